import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, type AccountEvent } from '@pushbase/domain';
import { decodeAccountEvent, decodeAccountEventValue, encodeAccountEvent, encodeAccountEventBatch, EventDecodeError } from '../src';

/*
 * Account events as stored (the embedded account log) and sent (the accounts topic): every field checked on
 * the way in, so a fold never meets a value of the wrong kind, and a newer schema_version refused, never
 * skipped.
 */

const v = ACCOUNT_EVENT_SCHEMA_VERSION;
const hash = 'ab'.repeat(32);
const events: AccountEvent[] = [
  { type: 'AccountCreated', schema_version: v, account: 'acme', at: 1, quotas: DEFAULT_QUOTAS },
  { type: 'AccountQuotasSet', schema_version: v, account: 'acme', at: 2, quotas: { datasets: 2, requests_per_minute: null } },
  { type: 'KeyCreated', schema_version: v, account: 'acme', at: 3, key_id: 'kid_0123456789abcdef', hash, scope: 'read', label: 'grafana "embed"' },
  { type: 'KeyCreated', schema_version: v, account: 'acme', at: 3, key_id: 'cfg_0123', hash, scope: 'write', label: null },
  { type: 'KeyRevoked', schema_version: v, account: 'acme', at: 4, key_id: 'kid_0123456789abcdef' },
  { type: 'AccountDeleted', schema_version: v, account: 'acme', at: 5 },
];

describe('the account event codec', () => {
  it.each(events.map((e) => [e.type, e] as const))('round-trips %s', (_type, event) => {
    expect(decodeAccountEvent(encodeAccountEvent(event))).toEqual(event);
    expect(decodeAccountEvent(Buffer.from(encodeAccountEvent(event)))).toEqual(event);
  });

  it('stores a batch as a JSON array of the events, members beyond the type dropped', () => {
    const batch = JSON.parse(encodeAccountEventBatch([{ ...events[0]!, extra: 'x' } as unknown as AccountEvent, events[5]!]).toString('utf8')) as unknown[];
    expect(batch.map((e) => decodeAccountEventValue(e))).toEqual([events[0], events[5]]);
    expect(JSON.stringify(batch)).not.toContain('extra');
  });

  it.each<[string, unknown, RegExp]>([
    ['not an object', [1], /must be a JSON object/],
    ['no schema_version', { ...events[0], schema_version: undefined }, /no valid schema_version/],
    ['a newer schema_version', { ...events[0], schema_version: v + 1 }, /newer than this reader knows/],
    ['an unknown type', { ...events[0], type: 'AccountRenamed' }, /unknown account event type "AccountRenamed"/],
    ['a bad account name', { ...events[0], account: 'a b' }, /account must be an account name/],
    ['a negative time', { ...events[0], at: -1 }, /at must be a time/],
    ['quotas of the wrong kind', { ...events[0], quotas: { datasets: 0, requests_per_minute: null } }, /quotas must be/],
    ['quotas missing one', { ...events[1], quotas: { datasets: 2 } }, /quotas must be/],
    ['a hash that is no SHA-256', { ...events[2], hash: 'AB'.repeat(32) }, /hash must be a SHA-256/],
    ['an unknown scope', { ...events[2], scope: 'admin' }, /scope must be "write" or "read"/],
    ['a label of the wrong kind', { ...events[2], label: 3 }, /label must be a string or null/],
    ['a key id with a slash', { ...events[4], key_id: 'a/b' }, /key_id must be a key id/],
  ])('refuses %s', (_what, value, message) => {
    expect(() => decodeAccountEventValue(value)).toThrow(EventDecodeError);
    expect(() => decodeAccountEventValue(value)).toThrow(message);
  });

  it('refuses to encode what it could not decode', () => {
    expect(() => encodeAccountEvent({ ...events[2], hash: 'nope' } as AccountEvent)).toThrow(EventDecodeError);
  });

  it('refuses bytes that are not JSON', () => {
    expect(() => decodeAccountEvent('{')).toThrow(/not valid JSON/);
  });
});

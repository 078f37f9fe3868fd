/*
 * DatasetSummary ↔ its proto message, through the real serialisation with the one option set: every
 * field type and time unit survives, and the domain's optional keys stay absent where they are absent.
 */
import { pushbaseServices } from '@pushbase/contracts';
import { FIELD_TYPES, TIME_UNITS, type DatasetSummary, type FieldDefinition } from '@pushbase/domain';
import {
  accountFromMessage,
  accountToMessage,
  keyFromMessage,
  keyToMessage,
  quotasFromMessage,
  summaryFromMessage,
  summaryToMessage,
  type AccountMessage,
  type DatasetSummaryMessage,
  type KeyMessage,
} from '../src/messages';

const get = pushbaseServices().SchemaService.service.Get!;
const overTheWire = (ds: DatasetSummary): DatasetSummary => {
  const decoded = get.responseDeserialize(get.responseSerialize({ dataset: summaryToMessage(ds) })) as { dataset: DatasetSummaryMessage };
  return summaryFromMessage(decoded.dataset);
};

const field = (type: FieldDefinition['type'], i: number): FieldDefinition => {
  if (type === 'money') return { type, name: `F${i}`, optional: i % 2 === 0, currency_code: 'EUR' };
  if (type === 'duration') return { type, name: `F${i}`, optional: false, time_unit: TIME_UNITS[i % TIME_UNITS.length]! };
  return { type, name: `F${i}`, optional: i % 2 === 0 };
};

describe('DatasetSummary messages', () => {
  it('round-trip every field type, with millisecond timestamps beyond 2^32', () => {
    const ds: DatasetSummary = {
      account: 'acme',
      id: 'sales.by-day',
      incarnation: '7f3c0d2e-1',
      definition: { fields: Object.fromEntries(FIELD_TYPES.map((t, i) => [`f${i}`, field(t, i)])), unique_by: ['f0', 'f4'] },
      created_at: 1_706_702_400_123,
      updated_at: 1_706_702_400_999,
    };
    const back = overTheWire(ds);
    expect(back).toEqual(ds);
    expect('currency_code' in back.definition.fields.f0!).toBe(false);
    expect('time_unit' in back.definition.fields.f0!).toBe(false);
  });

  it.each(TIME_UNITS)('round-trips the time unit %s', (unit) => {
    const ds: DatasetSummary = {
      account: 'a',
      id: 'd',
      incarnation: 'i',
      definition: { fields: { took: { type: 'duration', name: 'Took', optional: true, time_unit: unit } }, unique_by: [] },
      created_at: 0,
      updated_at: 0,
    };
    expect(overTheWire(ds)).toEqual(ds);
  });

  it('refuses an answer without a dataset, or with a type this code does not know', () => {
    expect(() => summaryFromMessage(null)).toThrow('no dataset');
    const m = summaryToMessage({ account: 'a', id: 'd', incarnation: 'i', definition: { fields: { x: { type: 'number', name: 'X', optional: false } }, unique_by: [] }, created_at: 0, updated_at: 0 });
    m.definition!.fields.x!.type = 'FIELD_TYPE_COLOUR';
    expect(() => summaryFromMessage(m)).toThrow('FIELD_TYPE_COLOUR');
  });
});

const getAccount = pushbaseServices().AccountAdmin.service.GetAccount!;
const listKeys = pushbaseServices().AccountAdmin.service.ListKeys!;
const accountWire = (m: AccountMessage): AccountMessage => (getAccount.responseDeserialize(getAccount.responseSerialize({ account: m })) as { account: AccountMessage }).account;
const keyWire = (m: KeyMessage): KeyMessage => (listKeys.responseDeserialize(listKeys.responseSerialize({ keys: [m] })) as { keys: KeyMessage[] }).keys[0]!;

describe('account and key messages', () => {
  it('carry null quotas as 0 and back, and show the quotas in force with the caller’s defaults', () => {
    const view = { account: 'acme', created_at: '2026-01-02T03:04:05.678Z', quotas: { datasets: null, requests_per_minute: 120 }, effective_quotas: { datasets: 100, requests_per_minute: 120 }, key_count: 2 };
    const wire = accountWire(accountToMessage(view));
    expect(wire.quotas).toEqual({ datasets: 0, requests_per_minute: 120 });
    expect(accountFromMessage(wire)).toEqual(view);
    // A gateway with another default rate limit shows its own in effective_quotas.
    expect(accountFromMessage(accountWire(accountToMessage({ ...view, quotas: { datasets: 5, requests_per_minute: null } })), { datasets: 100, requests_per_minute: 30 }).effective_quotas).toEqual({
      datasets: 5,
      requests_per_minute: 30,
    });
    expect(quotasFromMessage(null)).toEqual({ datasets: null, requests_per_minute: null });
    expect(() => accountFromMessage(null)).toThrow(/no account/);
  });

  it('keep a key’s label null apart from an empty one', () => {
    const key = { key_id: 'kid_1', account: 'acme', scope: 'read' as const, label: null, created_at: '2026-01-02T03:04:05.678Z' };
    expect(keyFromMessage(keyWire(keyToMessage(key)))).toEqual(key);
    expect(keyFromMessage(keyWire(keyToMessage({ ...key, label: '' })))).toEqual({ ...key, label: '' });
    expect(keyFromMessage(keyWire(keyToMessage({ ...key, scope: 'write', label: 'ci' })))).toEqual({ ...key, scope: 'write', label: 'ci' });
  });
});

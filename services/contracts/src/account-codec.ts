import {
  ACCOUNT_EVENT_SCHEMA_VERSION,
  ACCOUNT_NAME,
  KEY_SCOPES,
  type AccountEvent,
  type AccountQuotas,
  type KeyScope,
} from '@pushbase/domain';
import { EventDecodeError } from './event-codec';

/*
 * Account events on the wire and on disk: plain JSON objects, one per event, as the domain types them (the
 * embedded account log stores a JSON array of them per append; a Kafka message would hold one). Decoding
 * checks every field, so a fold never sees a value of the wrong kind, and refuses an event of a newer
 * schema_version (a newer pushbase wrote it: upgrade, never skip) with EventDecodeError like dataset events.
 */

type Raw = Record<string, unknown>;

const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const kindOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);

function field<T>(o: Raw, name: string, check: (v: unknown) => v is T, what: string): T {
  const v = o[name];
  if (!check(v)) throw new EventDecodeError(`the account event's ${name} must be ${what}, not ${kindOf(v)}`);
  return v;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isAccount = (v: unknown): v is string => typeof v === 'string' && ACCOUNT_NAME.test(v);
const isHash = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);
const isKeyId = (v: unknown): v is string => typeof v === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(v);
const isScope = (v: unknown): v is KeyScope => typeof v === 'string' && (KEY_SCOPES as readonly string[]).includes(v);
const isLabel = (v: unknown): v is string | null => v === null || typeof v === 'string';
const isQuota = (v: unknown): v is number | null => v === null || (typeof v === 'number' && Number.isInteger(v) && v >= 1);
const isQuotas = (v: unknown): v is AccountQuotas => isObject(v) && isQuota(v.datasets) && isQuota(v.requests_per_minute);

/** One account event from its parsed JSON value; throws EventDecodeError when it is not one this reader knows. */
export function decodeAccountEventValue(value: unknown): AccountEvent {
  if (!isObject(value)) throw new EventDecodeError(`an account event must be a JSON object, not ${kindOf(value)}`);
  const version = value.schema_version;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) throw new EventDecodeError('the account event has no valid schema_version');
  if (version > ACCOUNT_EVENT_SCHEMA_VERSION) {
    throw new EventDecodeError(
      `the account event has schema_version ${version}, newer than this reader knows (${ACCOUNT_EVENT_SCHEMA_VERSION}); a newer pushbase wrote it: upgrade this reader before it reads on (the event is not skipped)`,
    );
  }
  const base = {
    schema_version: ACCOUNT_EVENT_SCHEMA_VERSION,
    account: field(value, 'account', isAccount, 'an account name'),
    at: field(value, 'at', isTime, 'a time in epoch ms'),
  } as const;
  const type = field(value, 'type', isString, 'a string');
  switch (type) {
    case 'AccountCreated':
    case 'AccountQuotasSet': {
      const q = field(value, 'quotas', isQuotas, '{datasets, requests_per_minute}, each a whole number ≥ 1 or null');
      return { type, ...base, quotas: { datasets: q.datasets, requests_per_minute: q.requests_per_minute } };
    }
    case 'AccountDeleted':
      return { type, ...base };
    case 'KeyCreated':
      return {
        type,
        ...base,
        key_id: field(value, 'key_id', isKeyId, 'a key id'),
        hash: field(value, 'hash', isHash, 'a SHA-256 in hex'),
        scope: field(value, 'scope', isScope, '"write" or "read"'),
        label: field(value, 'label', isLabel, 'a string or null'),
      };
    case 'KeyRevoked':
      return { type, ...base, key_id: field(value, 'key_id', isKeyId, 'a key id') };
    default:
      throw new EventDecodeError(`unknown account event type ${JSON.stringify(type.slice(0, 40))}`);
  }
}

/** One account event from its UTF-8 JSON (a message's value). */
export function decodeAccountEvent(bytes: Uint8Array | string): AccountEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch {
    throw new EventDecodeError('the account event is not valid JSON');
  }
  return decodeAccountEventValue(parsed);
}

/** An account event as stored: its JSON, members in a fixed order. */
export function encodeAccountEvent(event: AccountEvent): string {
  return JSON.stringify(decodeAccountEventValue(event));
}

/** A batch of account events (one append) as stored in the embedded account log: a JSON array. */
export function encodeAccountEventBatch(events: readonly AccountEvent[]): Buffer {
  return Buffer.from(`[${events.map(encodeAccountEvent).join(',')}]`, 'utf8');
}

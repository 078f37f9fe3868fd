import { ACCOUNT_EVENT_SCHEMA_VERSION, ACCOUNT_EVENT_TYPES, KEY_SCOPES, type AccountEvent, type AccountQuotas } from '@pushbase/domain';

/*
 * The envelope of an account event (services/domain/src/accounts.ts), one codec for every log that stores
 * them (the embedded account log, the accounts topic):
 *
 *   { "type", "schema_version", "account", "at", …the type's payload fields }
 *
 * As for dataset events (event-codec.ts), decoding checks the envelope and the payload's shape: an unknown
 * `type`, a `schema_version` this reader does not know, a missing or mistyped field is an error naming what
 * is wrong, never skipped — the fold is order-dependent per account (a skipped KeyRevoked would leave a
 * revoked key working).
 */

export class AccountEventDecodeError extends Error {
  override readonly name = 'AccountEventDecodeError';
}

const KNOWN_TYPES = new Set<string>(ACCOUNT_EVENT_TYPES);
const SCOPES = new Set<string>(KEY_SCOPES);
const HASH = /^[0-9a-f]{64}$/;

/** The event's JSON: its own fields only, in a fixed order (type first, so a reader sees what it is). */
function toWire(e: AccountEvent): Record<string, unknown> {
  const base = { type: e.type, schema_version: e.schema_version, account: e.account, at: e.at };
  switch (e.type) {
    case 'AccountCreated':
    case 'AccountQuotasSet':
      return { ...base, quotas: { datasets: e.quotas.datasets, requests_per_minute: e.quotas.requests_per_minute } };
    case 'AccountDeleted':
      return base;
    case 'KeyCreated':
      return { ...base, key_id: e.key_id, hash: e.hash, scope: e.scope, label: e.label };
    case 'KeyRevoked':
      return { ...base, key_id: e.key_id };
  }
}

export function encodeAccountEvent(event: AccountEvent): Buffer {
  return Buffer.from(JSON.stringify(toWire(event)), 'utf8');
}

export function decodeAccountEvent(bytes: Uint8Array | string): AccountEvent {
  let value: unknown;
  try {
    value = JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (e) {
    throw new AccountEventDecodeError(`an account event is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  return decodeAccountEventValue(value);
}

/** Checks a parsed account event's envelope and payload; throws AccountEventDecodeError naming what is wrong. */
export function decodeAccountEventValue(value: unknown): AccountEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AccountEventDecodeError('an account event is not a JSON object');
  const o = value as Record<string, unknown>;
  const type = o.type;
  if (typeof type !== 'string' || !KNOWN_TYPES.has(type)) throw new AccountEventDecodeError(`unknown account event type ${JSON.stringify(type)}`);
  if (o.schema_version !== ACCOUNT_EVENT_SCHEMA_VERSION) {
    throw new AccountEventDecodeError(`${type} has schema_version ${JSON.stringify(o.schema_version)}; this reader knows ${ACCOUNT_EVENT_SCHEMA_VERSION}`);
  }
  const bad = (field: string, want: string): AccountEventDecodeError => new AccountEventDecodeError(`${type}.${field} is not ${want} (got ${JSON.stringify(o[field]) ?? 'nothing'})`);
  const str = (field: string): string => {
    const v = o[field];
    if (typeof v !== 'string' || v === '') throw bad(field, 'a non-empty string');
    return v;
  };
  const account = str('account');
  const at = o.at;
  if (typeof at !== 'number' || !Number.isSafeInteger(at)) throw bad('at', 'an integer');
  const base = { schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at } as const;
  const quotas = (): AccountQuotas => {
    const q = o.quotas;
    if (typeof q !== 'object' || q === null || Array.isArray(q)) throw bad('quotas', 'an object');
    const one = (k: 'datasets' | 'requests_per_minute'): number | null => {
      const v = (q as Record<string, unknown>)[k];
      if (v === null) return null;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw bad(`quotas`, `{datasets, requests_per_minute} of positive integers or null`);
      return v;
    };
    return { datasets: one('datasets'), requests_per_minute: one('requests_per_minute') };
  };
  switch (type as AccountEvent['type']) {
    case 'AccountCreated':
      return { type: 'AccountCreated', ...base, quotas: quotas() };
    case 'AccountQuotasSet':
      return { type: 'AccountQuotasSet', ...base, quotas: quotas() };
    case 'AccountDeleted':
      return { type: 'AccountDeleted', ...base };
    case 'KeyCreated': {
      const hash = str('hash');
      if (!HASH.test(hash)) throw bad('hash', 'a SHA-256 in lower-case hex');
      const scope = str('scope');
      if (!SCOPES.has(scope)) throw bad('scope', KEY_SCOPES.join(' or '));
      const label = o.label;
      if (label !== null && typeof label !== 'string') throw bad('label', 'a string or null');
      return { type: 'KeyCreated', ...base, key_id: str('key_id'), hash, scope: scope as 'write' | 'read', label };
    }
    case 'KeyRevoked':
      return { type: 'KeyRevoked', ...base, key_id: str('key_id') };
  }
}

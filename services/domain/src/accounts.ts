import { DomainError, invalid, quoteValue } from './errors';
import { LIMITS } from './types';

/*
 * Accounts and their API keys, as events (docs/operations.md → Accounts and API keys): they live only in
 * the log, and every store that resolves a key is a fold of them that replay rebuilds. A stream of their
 * own, ordered per account; pure: time, key ids and hashes are the caller's (the key never reaches an
 * event). Why: docs/architecture.md → Account events.
 */

export const ACCOUNT_EVENT_SCHEMA_VERSION = 1;

/** An account name: as PUSHBASE_API_KEYS has always accepted it. */
export const ACCOUNT_NAME = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * What a key may do. `write`: the whole public API (the only kind before read keys came). `read`: the read side
 * only (docs/read-api.md, docs/browser.md); a read key is refused by every write route.
 */
export type KeyScope = 'write' | 'read';
export const KEY_SCOPES: readonly KeyScope[] = ['write', 'read'];

/**
 * Per-account quotas. `null` means "the API's limit" (LIMITS), so an account created before a default
 * changes follows the new default; a number overrides it for this account.
 */
export interface AccountQuotas {
  /** Live datasets the account may hold (the API's limit: 100). */
  readonly datasets: number | null;
  /** Requests per rolling minute per API key of this account (the API's limit: 60; SPEC counts per key). */
  readonly requests_per_minute: number | null;
}

export const DEFAULT_QUOTAS: AccountQuotas = { datasets: null, requests_per_minute: null };

interface AccountEventBase {
  readonly schema_version: typeof ACCOUNT_EVENT_SCHEMA_VERSION;
  readonly account: string;
  /** Server time in epoch ms. */
  readonly at: number;
}

export interface AccountCreated extends AccountEventBase {
  readonly type: 'AccountCreated';
  readonly quotas: AccountQuotas;
}
export interface AccountQuotasSet extends AccountEventBase {
  readonly type: 'AccountQuotasSet';
  readonly quotas: AccountQuotas;
}
export interface AccountDeleted extends AccountEventBase {
  readonly type: 'AccountDeleted';
}
export interface KeyCreated extends AccountEventBase {
  readonly type: 'KeyCreated';
  /** A short public handle (listed, used to revoke); never enough to authenticate. */
  readonly key_id: string;
  /** SHA-256 of the key, hex. The key itself is shown once and stored nowhere. */
  readonly hash: string;
  readonly scope: KeyScope;
  /** An operator's note ("ci", "grafana embed"); null when none was given. */
  readonly label: string | null;
}
export interface KeyRevoked extends AccountEventBase {
  readonly type: 'KeyRevoked';
  readonly key_id: string;
}

export type AccountEvent = AccountCreated | AccountQuotasSet | AccountDeleted | KeyCreated | KeyRevoked;
export const ACCOUNT_EVENT_TYPES: readonly AccountEvent['type'][] = ['AccountCreated', 'AccountQuotasSet', 'AccountDeleted', 'KeyCreated', 'KeyRevoked'];

export interface KeyInfo {
  readonly key_id: string;
  readonly account: string;
  readonly hash: string;
  readonly scope: KeyScope;
  readonly label: string | null;
  readonly created_at: number;
}

export interface AccountInfo {
  readonly account: string;
  readonly created_at: number;
  readonly quotas: AccountQuotas;
  /** Live keys by key_id. */
  readonly keys: ReadonlyMap<string, KeyInfo>;
}

/** The fold of the account events: live accounts, and every live key by its hash. */
export interface AccountsState {
  readonly accounts: ReadonlyMap<string, AccountInfo>;
  readonly keysByHash: ReadonlyMap<string, KeyInfo>;
}

export const emptyAccounts = (): AccountsState => ({ accounts: new Map(), keysByHash: new Map() });

/**
 * Applies one event; returns a new state (the input is not changed). Total: an event that does not fit the
 * state (a key of a deleted account, a second create) changes nothing, so redelivering any suffix of the
 * log leaves the state as delivering it once, as the dataset fold does. That holds for a log of DECIDED
 * events (each one decided against the state before it, as the decide* functions do): in an arbitrary
 * sequence, an event ignored the first time (a key before its account) may apply when delivered again
 * (accounts.unit.test.ts checks both with fast-check).
 */
export function foldAccount(state: AccountsState, event: AccountEvent): AccountsState {
  const accounts = new Map(state.accounts);
  const keysByHash = new Map(state.keysByHash);
  const current = accounts.get(event.account);
  switch (event.type) {
    case 'AccountCreated':
      if (current !== undefined) return state;
      accounts.set(event.account, { account: event.account, created_at: event.at, quotas: event.quotas, keys: new Map() });
      break;
    case 'AccountQuotasSet':
      if (current === undefined) return state;
      accounts.set(event.account, { ...current, quotas: event.quotas });
      break;
    case 'AccountDeleted':
      if (current === undefined) return state;
      for (const key of current.keys.values()) keysByHash.delete(key.hash);
      accounts.delete(event.account);
      break;
    case 'KeyCreated': {
      if (current === undefined || current.keys.has(event.key_id) || keysByHash.has(event.hash)) return state;
      const key: KeyInfo = { key_id: event.key_id, account: event.account, hash: event.hash, scope: event.scope, label: event.label, created_at: event.at };
      accounts.set(event.account, { ...current, keys: new Map(current.keys).set(key.key_id, key) });
      keysByHash.set(key.hash, key);
      break;
    }
    case 'KeyRevoked': {
      const key = current?.keys.get(event.key_id);
      if (current === undefined || key === undefined) return state;
      const keys = new Map(current.keys);
      keys.delete(event.key_id);
      accounts.set(event.account, { ...current, keys });
      keysByHash.delete(key.hash);
      break;
    }
  }
  return { accounts, keysByHash };
}

export const foldAccounts = (events: Iterable<AccountEvent>, from: AccountsState = emptyAccounts()): AccountsState => {
  let state = from;
  for (const e of events) state = foldAccount(state, e);
  return state;
};

export interface QuotaLimits {
  readonly datasets: number;
  readonly requests_per_minute: number;
}

/**
 * The quotas in force: the account's overrides, else the server's defaults — the API's limits (100
 * datasets; 60 requests a minute, or PUSHBASE_RATE_LIMIT_PER_MINUTE where the operator changed it).
 */
export const effectiveQuotas = (quotas: AccountQuotas | undefined, defaults: QuotaLimits = { datasets: LIMITS.datasetsPerAccount, requests_per_minute: 60 }): QuotaLimits => ({
  datasets: quotas?.datasets ?? defaults.datasets,
  requests_per_minute: quotas?.requests_per_minute ?? defaults.requests_per_minute,
});

// ── Decisions: validate a command against the state, return the events to append. ──

export const accountNotFound = (account: string): DomainError => new DomainError('not_found', `Account ${quoteValue(account)} not found`);

/**
 * Deleting an account deletes its datasets, listing them again until none is left, since its keys can
 * create one meanwhile: this many rounds in both modes, then `accountDeletionRaced`.
 */
export const ACCOUNT_DELETE_ROUNDS = 5;
export const accountDeletionRaced = (account: string): DomainError =>
  new DomainError('unavailable', `Datasets of account ${quoteValue(account)} kept being created while it was being deleted; revoke its keys and try again`);

export function parseAccountName(v: unknown): string {
  if (typeof v !== 'string' || !ACCOUNT_NAME.test(v)) {
    throw invalid(`An account name is 1 to 100 of A-Z a-z 0-9 . _ - (got ${quoteValue(v)})`, 'account');
  }
  return v;
}

const QUOTA_MAX = 1_000_000;

/** A change of an account's quotas: a quota given is set (null: back to the API's limit), one absent is kept. */
export type QuotaChange = { readonly [K in keyof AccountQuotas]?: AccountQuotas[K] };

/** Parses `{datasets?, requests_per_minute?}` as a change: a number sets a quota, null restores the API's limit. */
export function parseQuotaChange(v: unknown): QuotaChange {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid('quotas must be a JSON object', 'quotas');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'datasets' && k !== 'requests_per_minute') throw invalid(`quotas has no setting ${quoteValue(k)} (datasets, requests_per_minute)`, `quotas.${k}`);
  }
  const change: { -readonly [K in keyof AccountQuotas]?: AccountQuotas[K] } = {};
  for (const k of ['datasets', 'requests_per_minute'] as const) {
    const q = o[k];
    if (q === undefined) continue;
    if (q !== null && (typeof q !== 'number' || !Number.isInteger(q) || q < 1 || q > QUOTA_MAX)) {
      throw invalid(`quotas.${k} must be a whole number from 1 to ${QUOTA_MAX}, or null for the API's limit (got ${quoteValue(q)})`, `quotas.${k}`);
    }
    change[k] = q;
  }
  return change;
}

/** The quotas `base` with `change` made to them. */
export const changeQuotas = (base: AccountQuotas, change: QuotaChange): AccountQuotas => ({
  datasets: change.datasets === undefined ? base.datasets : change.datasets,
  requests_per_minute: change.requests_per_minute === undefined ? base.requests_per_minute : change.requests_per_minute,
});

/** Parses `{datasets?, requests_per_minute?}` over `base`: a number sets a quota, null restores the API's limit. */
export function parseQuotas(v: unknown, base: AccountQuotas = DEFAULT_QUOTAS): AccountQuotas {
  return changeQuotas(base, parseQuotaChange(v));
}

export function parseKeyScope(v: unknown): KeyScope {
  if (v === undefined) return 'write';
  if (v !== 'write' && v !== 'read') throw invalid(`scope is "write" or "read" (got ${quoteValue(v)})`, 'scope');
  return v;
}

export function parseKeyLabel(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v.length > 200 || [...v].some((c) => c.charCodeAt(0) < 0x20)) throw invalid('label is a string of at most 200 characters without control characters', 'label');
  return v;
}

const base = (account: string, at: number) => ({ schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at }) as const;

export function decideCreateAccount(state: AccountsState, account: string, quotas: AccountQuotas, at: number): AccountCreated {
  if (state.accounts.has(account)) throw new DomainError('conflict', `Account ${quoteValue(account)} already exists`);
  return { type: 'AccountCreated', ...base(account, at), quotas };
}

/**
 * The account's quotas changed as `change` says, merged here into the ones `state` shows — under the
 * caller's lock or lease, so two changes of different quotas at once both hold.
 */
export function decideSetQuotas(state: AccountsState, account: string, change: QuotaChange, at: number): AccountQuotasSet {
  const current = state.accounts.get(account);
  if (current === undefined) throw accountNotFound(account);
  return { type: 'AccountQuotasSet', ...base(account, at), quotas: changeQuotas(current.quotas, change) };
}

/** The account's deletion; the caller deletes its datasets first (their DatasetDeleted events). */
export function decideDeleteAccount(state: AccountsState, account: string, at: number): AccountDeleted {
  if (!state.accounts.has(account)) throw accountNotFound(account);
  return { type: 'AccountDeleted', ...base(account, at) };
}

export function decideCreateKey(
  state: AccountsState,
  cmd: { readonly account: string; readonly key_id: string; readonly hash: string; readonly scope: KeyScope; readonly label: string | null; readonly at: number },
): KeyCreated {
  if (!state.accounts.has(cmd.account)) throw accountNotFound(cmd.account);
  if (state.keysByHash.has(cmd.hash)) throw new DomainError('conflict', 'That key is already registered');
  return { type: 'KeyCreated', ...base(cmd.account, cmd.at), key_id: cmd.key_id, hash: cmd.hash, scope: cmd.scope, label: cmd.label };
}

export function decideRevokeKey(state: AccountsState, account: string, keyId: string, at: number): KeyRevoked {
  const acc = state.accounts.get(account);
  if (acc === undefined) throw accountNotFound(account);
  if (!acc.keys.has(keyId)) throw new DomainError('not_found', `Key ${quoteValue(keyId)} not found in account ${quoteValue(account)}`);
  return { type: 'KeyRevoked', ...base(account, at), key_id: keyId };
}

/*
 * Accounts and keys as events (docs/operations.md → Accounts and API keys): the fold, the decisions, the quotas in force, and the
 * property every consumer of the log relies on — folding any suffix of the log again changes nothing, so a
 * redelivery (a projector restarting before its commit, a replay overlapping the live tail) is harmless.
 */
import fc from 'fast-check';
import {
  ACCOUNT_EVENT_SCHEMA_VERSION,
  DEFAULT_QUOTAS,
  DomainError,
  LIMITS,
  decideCreateAccount,
  decideCreateKey,
  decideDefine,
  decideDeleteAccount,
  decideRevokeKey,
  decideSetQuotas,
  effectiveQuotas,
  emptyAccounts,
  foldAccount,
  foldAccounts,
  parseAccountName,
  parseKeyLabel,
  parseKeyScope,
  parseQuotaChange,
  parseQuotas,
  type AccountEvent,
  type AccountsState,
} from '../src';

const v = ACCOUNT_EVENT_SCHEMA_VERSION;
const hash = (n: number): string => n.toString(16).padStart(64, '0');

describe('the account fold', () => {
  const log: AccountEvent[] = [
    { type: 'AccountCreated', schema_version: v, account: 'acme', at: 1, quotas: DEFAULT_QUOTAS },
    { type: 'KeyCreated', schema_version: v, account: 'acme', at: 2, key_id: 'k1', hash: hash(1), scope: 'write', label: 'ci' },
    { type: 'KeyCreated', schema_version: v, account: 'acme', at: 3, key_id: 'k2', hash: hash(2), scope: 'read', label: null },
    { type: 'AccountQuotasSet', schema_version: v, account: 'acme', at: 4, quotas: { datasets: 3, requests_per_minute: null } },
    { type: 'KeyRevoked', schema_version: v, account: 'acme', at: 5, key_id: 'k1' },
  ];

  it('holds live accounts with their quotas and live keys by hash', () => {
    const state = foldAccounts(log);
    expect([...state.accounts.keys()]).toEqual(['acme']);
    const acme = state.accounts.get('acme')!;
    expect(acme).toMatchObject({ account: 'acme', created_at: 1, quotas: { datasets: 3, requests_per_minute: null } });
    expect([...acme.keys.keys()]).toEqual(['k2']);
    expect([...state.keysByHash.keys()]).toEqual([hash(2)]);
    expect(state.keysByHash.get(hash(2))).toEqual({ key_id: 'k2', account: 'acme', hash: hash(2), scope: 'read', label: null, created_at: 3 });
  });

  it('drops an account\'s keys and quotas with it; a new account of the same name starts empty', () => {
    const deleted = foldAccounts([...log, { type: 'AccountDeleted', schema_version: v, account: 'acme', at: 6 }]);
    expect(deleted.accounts.size).toBe(0);
    expect(deleted.keysByHash.size).toBe(0);
    const again = foldAccount(deleted, { type: 'AccountCreated', schema_version: v, account: 'acme', at: 7, quotas: DEFAULT_QUOTAS });
    expect(again.accounts.get('acme')).toMatchObject({ created_at: 7, quotas: DEFAULT_QUOTAS });
    expect(again.accounts.get('acme')?.keys.size).toBe(0);
  });

  it('ignores what does not fit: a key of an unknown account, a second create, a revocation of an unknown key', () => {
    const state = foldAccounts(log);
    for (const odd of [
      { type: 'KeyCreated', schema_version: v, account: 'nobody', at: 9, key_id: 'k9', hash: hash(9), scope: 'write', label: null },
      { type: 'AccountCreated', schema_version: v, account: 'acme', at: 9, quotas: { datasets: 1, requests_per_minute: 1 } },
      { type: 'KeyRevoked', schema_version: v, account: 'acme', at: 9, key_id: 'nope' },
      { type: 'KeyCreated', schema_version: v, account: 'acme', at: 9, key_id: 'k3', hash: hash(2), scope: 'write', label: null },
      { type: 'AccountQuotasSet', schema_version: v, account: 'nobody', at: 9, quotas: DEFAULT_QUOTAS },
      { type: 'AccountDeleted', schema_version: v, account: 'nobody', at: 9 },
    ] satisfies AccountEvent[]) {
      expect(foldAccount(state, odd)).toBe(state);
    }
  });

  it('never changes the state it is given', () => {
    const state = foldAccounts(log.slice(0, 3));
    const copy = { accounts: new Map(state.accounts), keysByHash: new Map(state.keysByHash) };
    foldAccounts(log.slice(3), state);
    expect(state).toEqual(copy);
  });
});

describe('the decisions', () => {
  const state = foldAccounts([{ type: 'AccountCreated', schema_version: v, account: 'acme', at: 1, quotas: DEFAULT_QUOTAS }]);
  const expectCode = (f: () => unknown, code: string, message: RegExp): void => {
    try {
      f();
    } catch (e) {
      expect(e).toBeInstanceOf(DomainError);
      expect(e).toMatchObject({ code });
      expect((e as Error).message).toMatch(message);
      return;
    }
    throw new Error('expected a DomainError');
  };

  it('creates an account once', () => {
    expect(decideCreateAccount(emptyAccounts(), 'globex', DEFAULT_QUOTAS, 5)).toEqual({ type: 'AccountCreated', schema_version: v, account: 'globex', at: 5, quotas: DEFAULT_QUOTAS });
    expectCode(() => decideCreateAccount(state, 'acme', DEFAULT_QUOTAS, 5), 'conflict', /already exists/);
  });

  it('changes, deletes and keys only an account that exists', () => {
    expect(decideSetQuotas(state, 'acme', { datasets: 2, requests_per_minute: 3 }, 5)).toMatchObject({ type: 'AccountQuotasSet', quotas: { datasets: 2, requests_per_minute: 3 } });
    const changed = foldAccounts([decideSetQuotas(state, 'acme', { datasets: 2, requests_per_minute: 3 }, 5)], state);
    expect(decideSetQuotas(changed, 'acme', { requests_per_minute: null }, 6).quotas).toStrictEqual({ datasets: 2, requests_per_minute: null });
    expect(decideDeleteAccount(state, 'acme', 5)).toEqual({ type: 'AccountDeleted', schema_version: v, account: 'acme', at: 5 });
    expectCode(() => decideSetQuotas(state, 'nobody', DEFAULT_QUOTAS, 5), 'not_found', /Account "nobody" not found/);
    expectCode(() => decideDeleteAccount(state, 'nobody', 5), 'not_found', /not found/);
    expectCode(() => decideCreateKey(state, { account: 'nobody', key_id: 'k', hash: hash(1), scope: 'write', label: null, at: 5 }), 'not_found', /not found/);
  });

  it('registers a hash once and revokes only a key of the account', () => {
    const key = decideCreateKey(state, { account: 'acme', key_id: 'k1', hash: hash(1), scope: 'read', label: 'grafana', at: 5 });
    expect(key).toEqual({ type: 'KeyCreated', schema_version: v, account: 'acme', at: 5, key_id: 'k1', hash: hash(1), scope: 'read', label: 'grafana' });
    const withKey = foldAccount(foldAccount(state, { type: 'AccountCreated', schema_version: v, account: 'globex', at: 1, quotas: DEFAULT_QUOTAS }), key);
    expectCode(() => decideCreateKey(withKey, { account: 'globex', key_id: 'k2', hash: hash(1), scope: 'write', label: null, at: 6 }), 'conflict', /already registered/);
    expect(decideRevokeKey(withKey, 'acme', 'k1', 7)).toEqual({ type: 'KeyRevoked', schema_version: v, account: 'acme', at: 7, key_id: 'k1' });
    expectCode(() => decideRevokeKey(withKey, 'globex', 'k1', 7), 'not_found', /Key "k1" not found in account "globex"/);
  });

  it('parses names, quotas, scopes and labels', () => {
    expect(parseAccountName('acme.eu_1-x')).toBe('acme.eu_1-x');
    for (const bad of ['', 'two words', 'a/b', 'x'.repeat(101), 7, null]) expectCode(() => parseAccountName(bad), 'invalid', /account name/);
    expect(parseQuotas(undefined)).toEqual(DEFAULT_QUOTAS);
    // A change names only what changes; the merge happens in the decision, against the account's quotas.
    expect(parseQuotaChange({ datasets: 5 })).toStrictEqual({ datasets: 5 });
    expect(parseQuotaChange({ requests_per_minute: null })).toStrictEqual({ requests_per_minute: null });
    expect(parseQuotaChange(undefined)).toStrictEqual({});
    for (const bad of [[], { datasets: 0 }, { other: 1 }]) expectCode(() => parseQuotaChange(bad), 'invalid', /quotas/);
    expect(parseQuotas({ datasets: 5 }, { datasets: 1, requests_per_minute: 9 })).toEqual({ datasets: 5, requests_per_minute: 9 });
    expect(parseQuotas({ requests_per_minute: null }, { datasets: 1, requests_per_minute: 9 })).toEqual({ datasets: 1, requests_per_minute: null });
    for (const bad of [[], 'x', { datasets: 0 }, { datasets: 1.5 }, { datasets: '3' }, { requests_per_minute: 1_000_001 }, { other: 1 }]) expectCode(() => parseQuotas(bad), 'invalid', /quotas/);
    expect(parseKeyScope(undefined)).toBe('write');
    expect(parseKeyScope('read')).toBe('read');
    expectCode(() => parseKeyScope('admin'), 'invalid', /scope/);
    expect(parseKeyLabel(undefined)).toBeNull();
    expect(parseKeyLabel('ci runner')).toBe('ci runner');
    for (const bad of ['a\tb', 'x'.repeat(201), 3]) expectCode(() => parseKeyLabel(bad), 'invalid', /label/);
  });
});

describe('the quotas in force', () => {
  it('are the account\'s where set, else the defaults (the API\'s limits unless the operator changed them)', () => {
    expect(effectiveQuotas(undefined)).toEqual({ datasets: LIMITS.datasetsPerAccount, requests_per_minute: 60 });
    expect(effectiveQuotas({ datasets: 2, requests_per_minute: null }, { datasets: 100, requests_per_minute: 600 })).toEqual({ datasets: 2, requests_per_minute: 600 });
  });

  it('bound dataset creation, the message naming the limit in force', () => {
    const body = { fields: { n: { type: 'number', name: 'N' } } };
    const existing = decideDefine({ account: 'a', id: 'one', body, at: 1, newIncarnation: 'i1' }, undefined, 0, 2).dataset;
    expect(decideDefine({ account: 'a', id: 'two', body, at: 1, newIncarnation: 'i2' }, undefined, 1, 2).outcome).toBe('created');
    expect(() => decideDefine({ account: 'a', id: 'three', body, at: 1, newIncarnation: 'i3' }, undefined, 2, 2)).toThrow(/limit of 2 datasets/);
    // At the limit, an existing dataset is still found.
    expect(decideDefine({ account: 'a', id: 'one', body, at: 1, newIncarnation: 'i4' }, existing, 2, 2).outcome).toBe('found');
    expect(() => decideDefine({ account: 'a', id: 'x', body, at: 1, newIncarnation: 'i5' }, undefined, 100)).toThrow(/limit of 100 datasets/);
  });
});

// ── property: redelivering any suffix of the log changes nothing ──

const ACCOUNTS = ['a', 'b', 'c'];
const account = fc.constantFrom(...ACCOUNTS);
const keyId = fc.constantFrom('k1', 'k2', 'k3', 'k4');
const quota = fc.option(fc.integer({ min: 1, max: 5 }), { nil: null });
const quotas = fc.record({ datasets: quota, requests_per_minute: quota });
const at = fc.integer({ min: 0, max: 1000 });

/** Arbitrary account events over few names, so creates, revocations and deletions of the same things collide. */
const accountEvent: fc.Arbitrary<AccountEvent> = fc.oneof(
  fc.record({ type: fc.constant('AccountCreated' as const), schema_version: fc.constant(v), account, at, quotas }),
  fc.record({ type: fc.constant('AccountQuotasSet' as const), schema_version: fc.constant(v), account, at, quotas }),
  fc.record({ type: fc.constant('AccountDeleted' as const), schema_version: fc.constant(v), account, at }),
  fc.record({
    type: fc.constant('KeyCreated' as const),
    schema_version: fc.constant(v),
    account,
    at,
    key_id: keyId,
    hash: fc.integer({ min: 1, max: 6 }).map(hash),
    scope: fc.constantFrom('write' as const, 'read' as const),
    label: fc.option(fc.string({ maxLength: 5 }), { nil: null }),
  }),
  fc.record({ type: fc.constant('KeyRevoked' as const), schema_version: fc.constant(v), account, at, key_id: keyId }),
);

/** A log as a writer following the decisions produces it: each event decided against the state before it. */
function decidedLog(candidates: AccountEvent[]): AccountEvent[] {
  let state: AccountsState = emptyAccounts();
  const out: AccountEvent[] = [];
  for (const e of candidates) {
    const next = foldAccount(state, e);
    // An event the fold ignores is one no decision would have produced (a create of an existing account…).
    if (next === state) continue;
    out.push(e);
    state = next;
  }
  return out;
}

describe('folding again', () => {
  it('changes nothing when any suffix of a decided log is delivered again', () => {
    fc.assert(
      fc.property(fc.array(accountEvent, { maxLength: 40 }), fc.nat(), (candidates, cut) => {
        const log = decidedLog(candidates);
        const once = foldAccounts(log);
        const from = log.length === 0 ? 0 : cut % (log.length + 1);
        expect(foldAccounts(log.slice(from), once)).toEqual(once);
      }),
      { numRuns: 500 },
    );
  });

  /*
   * Only for decided logs: in an arbitrary sequence, an event ignored the first time (a key before its
   * account) can apply when delivered again after what follows it. Every writer of the account log decides
   * first; this pins where the claim ends.
   */
  it('is not claimed for undecided logs (a key before its account applies when delivered again)', () => {
    const undecided: AccountEvent[] = [
      { type: 'KeyCreated', schema_version: v, account: 'a', at: 0, key_id: 'k1', hash: hash(1), scope: 'write', label: null },
      { type: 'AccountCreated', schema_version: v, account: 'a', at: 0, quotas: DEFAULT_QUOTAS },
    ];
    const once = foldAccounts(undecided);
    expect(foldAccounts(undecided, once).keysByHash.size).toBe(1);
    expect(once.keysByHash.size).toBe(0);
  });
});

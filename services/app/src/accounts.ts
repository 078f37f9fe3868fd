import type { AccountAdmin, AccountCommands, AccountView, KeyStore, KeyView, Principal, QuotaSource } from '@pushbase/contracts';
import {
  ACCOUNT_DELETE_ROUNDS,
  accountDeletionRaced,
  accountNotFound,
  decideCreateAccount,
  decideCreateKey,
  decideDeleteAccount,
  decideRevokeKey,
  decideSetQuotas,
  DomainError,
  effectiveQuotas,
  foldAccounts,
  formatUtcMillis,
  invalid,
  parseAccountName,
  parseKeyLabel,
  parseKeyScope,
  parseQuotaChange,
  parseQuotas,
  type AccountEvent,
  type AccountInfo,
  type AccountsState,
  type KeyInfo,
  type KeyScope,
  type QuotaLimits,
  emptyAccounts,
} from '@pushbase/domain';
import { KeyedMutex } from './keyed-mutex';
import { hashApiKey, newApiKey, newKeyId } from '@pushbase/contracts';
import type { Clock } from './services';

/**
 * Where account events are kept, and their fold. Embedded: the data directory's account log; in tests,
 * memory. `append` resolves once the events are durable AND `state()` shows them; it rejects with
 * `unavailable` when none of them was stored.
 */
export interface AccountLog {
  state(): AccountsState;
  append(events: readonly AccountEvent[]): Promise<void>;
}

/** An account log in memory: the reference for tests. */
export class MemoryAccountLog implements AccountLog {
  readonly events: AccountEvent[] = [];
  private folded: AccountsState = emptyAccounts();

  state(): AccountsState {
    return this.folded;
  }

  append(events: readonly AccountEvent[]): Promise<void> {
    this.events.push(...events);
    this.folded = foldAccounts(events, this.folded);
    return Promise.resolve();
  }
}

/** The datasets of an account, as deleteAccount needs them: listed, and deleted through the schema service. */
export interface AccountDatasets {
  ids(account: string): Promise<string[]>;
  /** Deletes one dataset (a DatasetDeleted event); resolves also when it is already gone. */
  delete(account: string, id: string): Promise<unknown>;
}

/** An account decision: the event that makes it take effect (none when nothing changes) and the answer. */
export interface AccountDecision<T> {
  readonly event?: AccountEvent;
  readonly answer: T;
}

/**
 * How account and key changes take effect, as SchemaChanges is for datasets: the one thing the embedded
 * and the distributed account administration do differently. `decide` runs alone for its account (no
 * other account decision of it runs meanwhile, in this process or in any replica) against a state holding
 * every earlier change of the account and the keys of `hashes`; its event is then durable and visible to
 * `get` before `decided` resolves with the answer.
 */
export interface AccountChanges {
  decided<T>(account: string, decide: (state: AccountsState) => AccountDecision<T> | Promise<AccountDecision<T>>, hashes?: readonly string[]): Promise<T>;
  get(account: string): Promise<AccountInfo | undefined>;
  /** Every account, in code-unit order of their names. */
  list(): Promise<AccountInfo[]>;
}

/** Names in code-unit order, as both modes list accounts (the Redis account store sorts its names so). */
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The embedded mode's changes, over an AccountLog: one process decides, so one mutex serialises every
 * change (changes are rare, and a decision must see every earlier one: an account created twice, a key of
 * a deleted account), and the log's fold shows an event once `append` resolves.
 */
export function logAccountChanges(log: AccountLog): AccountChanges {
  const writer = new KeyedMutex();
  return {
    decided: (_account, decide) =>
      writer.run('accounts', async () => {
        const { event, answer } = await decide(log.state());
        if (event !== undefined) await log.append([event]);
        return answer;
      }),
    get: (account) => Promise.resolve(log.state().accounts.get(account)),
    list: () => Promise.resolve([...log.state().accounts.values()].sort((a, b) => byCodeUnits(a.account, b.account))),
  };
}

export interface AccountCommandsDeps {
  readonly changes: AccountChanges;
  readonly datasets: AccountDatasets;
  readonly clock: Clock;
  /** The quotas of an account that has none of its own (the API's limits, or the operator's rate limit). */
  readonly defaults: QuotaLimits;
  /** A key's public handle. Default: a random one (newKeyId). */
  readonly newKeyId?: () => string;
  /** Test seam: runs after the account's datasets are deleted, before AccountDeleted is decided. */
  readonly beforeAccountDeleted?: (account: string) => Promise<void>;
}

export interface AccountAdminDeps extends Omit<AccountCommandsDeps, 'changes' | 'newKeyId'> {
  readonly log: AccountLog;
}

export const accountView = (info: AccountInfo, defaults: QuotaLimits): AccountView => ({
  account: info.account,
  created_at: formatUtcMillis(info.created_at),
  quotas: info.quotas,
  effective_quotas: effectiveQuotas(info.quotas, defaults),
  key_count: info.keys.size,
});

export const keyView = (key: KeyInfo): KeyView => ({
  key_id: key.key_id,
  account: key.account,
  scope: key.scope,
  label: key.label,
  created_at: formatUtcMillis(key.created_at),
});

/** An account's keys as both modes list them: oldest first, then by key id. */
export const keyViews = (info: AccountInfo): KeyView[] => [...info.keys.values()].sort((a, b) => a.created_at - b.created_at || byCodeUnits(a.key_id, b.key_id)).map(keyView);

/** A dataset already deleted by someone else is as good as deleted by us. */
export const ignoreNotFound = (e: unknown): void => {
  if (!(e instanceof DomainError && e.code === 'not_found')) throw e;
};

/** Made already (by another replica, or an earlier start): as good as made now. */
export const ignoreConflict = (e: unknown): void => {
  if (!(e instanceof DomainError && e.code === 'conflict')) throw e;
};

const HASH = /^[0-9a-f]{64}$/;

/**
 * The account rules of both modes (docs/operations.md → Accounts and API keys): every change decided by
 * the domain (decide*) from the state `changes` shows under the account's lock, its answer the view of
 * what it decided. Arguments are parsed here too, as the gRPC edge hands them on unparsed.
 */
export function createAccountCommands(deps: AccountCommandsDeps): AccountCommands {
  const { changes, datasets, clock, defaults } = deps;
  const newKeyIdOf = deps.newKeyId ?? newKeyId;
  const viewOf = (a: AccountInfo): AccountView => accountView(a, defaults);
  const existing = async (account: string): Promise<AccountInfo> => {
    const found = await changes.get(parseAccountName(account));
    if (found === undefined) throw accountNotFound(account);
    return found;
  };
  /** Deletes the datasets listed now; counts only those this call deleted. */
  const deleteListed = async (name: string): Promise<number> => {
    let deleted = 0;
    for (const id of await datasets.ids(name)) {
      try {
        await datasets.delete(name, id);
        deleted += 1;
      } catch (e) {
        // Deleted meanwhile (by its own API call, or a deletion running beside this one): gone either way.
        ignoreNotFound(e);
      }
    }
    return deleted;
  };

  return {
    createAccount: async (account, quotas) => {
      const name = parseAccountName(account);
      const q = parseQuotas(quotas);
      return changes.decided(name, (state) => {
        const event = decideCreateAccount(state, name, q, clock.now());
        return { event, answer: viewOf({ account: name, created_at: event.at, quotas: q, keys: new Map() }) };
      });
    },
    listAccounts: async () => (await changes.list()).map(viewOf),
    getAccount: async (account) => viewOf(await existing(account)),
    setQuotas: async (account, quotas) => {
      const name = parseAccountName(account);
      const change = parseQuotaChange(quotas);
      return changes.decided(name, (state) => {
        // Merged with the quotas the state shows under the lock: two changes at once both hold.
        const event = decideSetQuotas(state, name, change, clock.now());
        return { event, answer: viewOf({ ...state.accounts.get(name)!, quotas: event.quotas }) };
      });
    },
    /*
     * The datasets first, each through the schema service (a DatasetDeleted, so every projection follows),
     * then, once none is listed under the account's lock, the account. Stopped half way, the account is
     * still there with fewer datasets, so a retry finishes it. A create that raced the last listing (its
     * key resolved before AccountDeleted) is swept once more after the account is gone.
     */
    deleteAccount: async (account) => {
      const name = parseAccountName(account);
      await existing(name);
      let deleted = 0;
      for (let round = 0; round < ACCOUNT_DELETE_ROUNDS; round++) {
        deleted += await deleteListed(name);
        await deps.beforeAccountDeleted?.(name);
        const done = await changes.decided(name, async (state) => {
          // One created since the round began sends the deletion round again.
          if ((await datasets.ids(name)).length > 0) return { answer: false };
          return { event: decideDeleteAccount(state, name, clock.now()), answer: true };
        });
        if (done) return { datasets_deleted: deleted + (await deleteListed(name)) };
      }
      throw accountDeletionRaced(name);
    },
    createKeyByHash: async (account, key) => {
      const name = parseAccountName(account);
      if (!HASH.test(key.hash)) throw invalid('hash must be a SHA-256 in lower-case hex', 'hash');
      const scope: KeyScope = parseKeyScope(key.scope);
      const label = parseKeyLabel(key.label);
      return changes.decided(
        name,
        (state) => {
          const event = decideCreateKey(state, { account: name, key_id: newKeyIdOf(), hash: key.hash, scope, label, at: clock.now() });
          return { event, answer: keyView({ ...event, created_at: event.at }) };
        },
        [key.hash],
      );
    },
    listKeys: async (account) => keyViews(await existing(account)),
    revokeKey: async (account, keyId) => {
      const name = parseAccountName(account);
      await changes.decided(name, (state) => ({ event: decideRevokeKey(state, name, keyId, clock.now()), answer: undefined }));
    },
  };
}

/**
 * The embedded AccountAdmin: the account rules over the data directory's account log. A new key is made
 * here and only its hash handed on, as the gateway's adapter does in the distributed mode.
 */
export function createAccountAdmin(deps: AccountAdminDeps): AccountAdmin {
  const { log, ...rest } = deps;
  const commands = createAccountCommands({ ...rest, changes: logAccountChanges(log) });
  return {
    ...commands,
    createKey: async (account, { scope, label }) => {
      const key = newApiKey();
      return { key, ...(await commands.createKeyByHash(account, { hash: hashApiKey(key), scope, label })) };
    },
  };
}

/** The quotas in force for an account of the log (the defaults when it has none, or is not in the log). */
export const quotasFromLog =
  (log: Pick<AccountLog, 'state'>, defaults: QuotaLimits) =>
  (account: string): QuotaLimits =>
    effectiveQuotas(log.state().accounts.get(account)?.quotas, defaults);

/** The schema service's dataset limit, from the account log. */
export const quotaSourceFromLog = (log: Pick<AccountLog, 'state'>, defaults: QuotaLimits): QuotaSource => {
  const quotasOf = quotasFromLog(log, defaults);
  return { datasetLimit: (account) => Promise.resolve(quotasOf(account).datasets) };
};

/**
 * The keys of the account log, resolved from its fold at every request: a revocation, a deleted account or
 * a quota change applies from the next request.
 */
export class AccountLogKeyStore implements KeyStore {
  constructor(
    private readonly log: Pick<AccountLog, 'state'>,
    private readonly defaults: QuotaLimits,
  ) {}

  resolve(apiKey: string): Promise<Principal | undefined> {
    const state = this.log.state();
    const key = state.keysByHash.get(hashApiKey(apiKey));
    if (key === undefined) return Promise.resolve(undefined);
    const quotas = effectiveQuotas(state.accounts.get(key.account)?.quotas, this.defaults);
    return Promise.resolve({ account: key.account, key_id: key.key_id, scope: key.scope, quotas });
  }
}

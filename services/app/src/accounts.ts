import type { AccountAdmin, AccountView, KeyStore, KeyView, Principal, QuotaSource } from '@pushbase/contracts';
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
  type AccountEvent,
  type AccountInfo,
  type AccountsState,
  type KeyInfo,
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

export interface AccountAdminDeps {
  readonly log: AccountLog;
  readonly datasets: AccountDatasets;
  readonly clock: Clock;
  /** The quotas of an account that has none of its own (the API's limits, or the operator's rate limit). */
  readonly defaults: QuotaLimits;
  /** Test seam: runs after the account's datasets are deleted, before AccountDeleted is appended. */
  readonly beforeAccountDeleted?: (account: string) => Promise<void>;
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

/** Names in code-unit order, as both modes list accounts (the Redis account store sorts its names so). */
const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

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

/**
 * The AccountAdmin over an AccountLog: decides with the domain's decide* functions against the log's fold,
 * appends, and answers only once the event is durable. One change at a time (a single mutex): changes are
 * rare and a decision must see every earlier one (an account created twice, a key of a deleted account).
 */
export function createAccountAdmin(deps: AccountAdminDeps): AccountAdmin {
  const { log, datasets, clock, defaults } = deps;
  const writer = new KeyedMutex();
  const oneAtATime = <T>(work: () => Promise<T>): Promise<T> => writer.run('accounts', work);
  const account = (name: string): AccountInfo => {
    const info = log.state().accounts.get(name);
    if (info === undefined) throw accountNotFound(name);
    return info;
  };
  /** Deletes every live dataset of the account, again until none is left (a create may race the listing). */
  const deleteDatasets = async (name: string): Promise<number> => {
    let deleted = 0;
    for (let round = 0; round < ACCOUNT_DELETE_ROUNDS; round++) {
      const ids = await datasets.ids(name);
      if (ids.length === 0) return deleted;
      for (const id of ids) {
        try {
          await datasets.delete(name, id);
          deleted += 1; // counted only when this call deleted it, as the distributed mode counts
        } catch (e) {
          ignoreNotFound(e);
        }
      }
    }
    throw accountDeletionRaced(name);
  };

  return {
    createAccount: (name, quotas) =>
      oneAtATime(async () => {
        const event = decideCreateAccount(log.state(), name, quotas, clock.now());
        await log.append([event]);
        return accountView(account(name), defaults);
      }),
    listAccounts: () => Promise.resolve([...log.state().accounts.values()].sort((a, b) => byCodeUnits(a.account, b.account)).map((a) => accountView(a, defaults))),
    getAccount: (name) => Promise.resolve().then(() => accountView(account(name), defaults)),
    setQuotas: (name, change) =>
      oneAtATime(async () => {
        await log.append([decideSetQuotas(log.state(), name, change, clock.now())]);
        return accountView(account(name), defaults);
      }),
    /*
     * The datasets first, each through the schema service (a DatasetDeleted, so every projection follows),
     * then the account. Stopped half way, the account is still there with fewer datasets, so a retry finishes
     * it. Its keys work until AccountDeleted, so a create can race the listing: once the account is gone (its
     * keys with it) the datasets are swept once more.
     */
    deleteAccount: (name) =>
      oneAtATime(async () => {
        account(name);
        let deleted = await deleteDatasets(name);
        await deps.beforeAccountDeleted?.(name);
        await log.append([decideDeleteAccount(log.state(), name, clock.now())]);
        deleted += await deleteDatasets(name);
        return { datasets_deleted: deleted };
      }),
    createKey: (name, { scope, label }) =>
      oneAtATime(async () => {
        const key = newApiKey();
        const event = decideCreateKey(log.state(), { account: name, key_id: newKeyId(), hash: hashApiKey(key), scope, label, at: clock.now() });
        await log.append([event]);
        return { key, ...keyView(account(name).keys.get(event.key_id) as KeyInfo) };
      }),
    listKeys: (name) =>
      Promise.resolve().then(() => keyViews(account(name))),
    revokeKey: (name, keyId) =>
      oneAtATime(async () => {
        await log.append([decideRevokeKey(log.state(), name, keyId, clock.now())]);
      }),
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

import { accountView, ignoreConflict, ignoreNotFound, keyView, keyViews, type Clock } from '@pushbase/app';
import { newKeyId as randomKeyId, type AccountCommands, type AccountView, type SchemaService } from '@pushbase/contracts';
import {
  ACCOUNT_DELETE_ROUNDS,
  accountDeletionRaced,
  accountNotFound,
  DEFAULT_QUOTAS,
  decideCreateAccount,
  decideCreateKey,
  decideDeleteAccount,
  decideRevokeKey,
  decideSetQuotas,
  effectiveQuotas,
  invalid,
  parseAccountName,
  parseKeyLabel,
  parseKeyScope,
  parseQuotaChange,
  parseQuotas,
  type AccountInfo,
  type KeyScope,
  type QuotaLimits,
} from '@pushbase/domain';
import type { Logger } from '@pushbase/grpc';
import type { Redis, RedisAccountStore, RedisSchemaStore } from '@pushbase/redis';
import type { RedisSchemaChanges } from './changes';

/*
 * Accounts and keys in the distributed mode (docs/operations.md → Accounts and API keys), served by the schema service over gRPC
 * (AccountAdmin in proto/pushbase/v1/accounts.proto). Every change is decided by the domain (decide*) from
 * the Redis account store, under the account's lease — the very lease, intent and roll-forward of the
 * account's dataset changes (changes.ts, decidedAccount) — then appended to the accounts topic and applied
 * to the account store before it is answered. So a key created is resolvable by every gateway at once, and
 * a revocation is in force on every gateway as soon as it is answered (they read the store on each request).
 *
 * Deleting an account: its datasets first, each through the schema service's own delete (a DatasetDeleted
 * in the dataset topic, so the projector and ClickHouse follow), then — under the lease, and only once the
 * schema store shows no live dataset of the account — the AccountDeleted. A deletion that stops half way
 * leaves the account in place with fewer datasets; calling it again finishes it.
 */

const HASH = /^[0-9a-f]{64}$/;

export interface DistributedAccountsDeps {
  readonly changes: Pick<RedisSchemaChanges, 'decidedAccount'>;
  readonly store: RedisAccountStore;
  readonly schemaStore: Pick<RedisSchemaStore, 'liveIds' | 'count'>;
  /** The schema service whose delete removes each dataset of a deleted account. */
  readonly schema: Pick<SchemaService, 'delete'>;
  readonly clock: Clock;
  /** A key's public handle. Default: the app's newKeyId (as the embedded mode's). */
  readonly newKeyId?: () => string;
  /** The quotas in force where an account sets none (shown in effective_quotas; a gateway shows its own). */
  readonly defaults?: QuotaLimits;
}

export function createDistributedAccounts(deps: DistributedAccountsDeps): AccountCommands {
  const { changes, store, schemaStore, schema, clock } = deps;
  const newKeyId = deps.newKeyId ?? randomKeyId;
  // The views the embedded mode shows (services/app/src/accounts.ts), so both modes answer alike.
  const defaults = deps.defaults ?? effectiveQuotas(undefined);
  const viewOf = (a: AccountInfo): AccountView => accountView(a, defaults);
  const existing = async (account: string): Promise<AccountInfo> => {
    const found = await store.get(parseAccountName(account));
    if (found === undefined) throw accountNotFound(account);
    return found;
  };

  return {
    createAccount: async (account, quotas) => {
      const name = parseAccountName(account);
      const q = parseQuotas(quotas);
      return changes.decidedAccount(name, async () => {
        const event = decideCreateAccount(await store.stateFor(name), name, q, clock.now());
        return { event, answer: viewOf({ account: name, created_at: event.at, quotas: q, keys: new Map() }) };
      });
    },
    listAccounts: async () => {
      const names = await store.list();
      const found = await Promise.all(names.map((n) => store.get(n)));
      return found.filter((a): a is AccountInfo => a !== undefined).map(viewOf);
    },
    getAccount: async (account) => viewOf(await existing(account)),
    setQuotas: async (account, quotas) => {
      const name = parseAccountName(account);
      const change = parseQuotaChange(quotas);
      return changes.decidedAccount(name, async () => {
        const state = await store.stateFor(name);
        // Merged with the quotas the store shows under the lease: two changes at once both hold.
        const event = decideSetQuotas(state, name, change, clock.now());
        return { event, answer: viewOf({ ...state.accounts.get(name)!, quotas: event.quotas }) };
      });
    },
    deleteAccount: async (account) => {
      const name = parseAccountName(account);
      await existing(name);
      let deleted = 0;
      for (let round = 0; round < ACCOUNT_DELETE_ROUNDS; round++) {
        for (const id of await schemaStore.liveIds(name)) {
          try {
            await schema.delete({ account: name, id });
            deleted += 1;
          } catch (e) {
            // Deleted meanwhile (by its own API call, or a deletion running beside this one): gone either way.
            ignoreNotFound(e);
          }
        }
        const done = await changes.decidedAccount(name, async () => {
          // Under the lease no dataset of the account can be created; one created since the round began
          // sends the deletion round again.
          if ((await schemaStore.count(name)) > 0) return { answer: false };
          return { event: decideDeleteAccount(await store.stateFor(name), name, clock.now()), answer: true };
        });
        if (done) return { datasets_deleted: deleted };
      }
      throw accountDeletionRaced(name);
    },
    createKeyByHash: async (account, key) => {
      const name = parseAccountName(account);
      if (!HASH.test(key.hash)) throw invalid('hash must be a SHA-256 in lower-case hex', 'hash');
      const scope: KeyScope = parseKeyScope(key.scope);
      const label = parseKeyLabel(key.label);
      return changes.decidedAccount(name, async () => {
        const event = decideCreateKey(await store.stateFor(name, [key.hash]), { account: name, key_id: newKeyId(), hash: key.hash, scope, label, at: clock.now() });
        return { event, answer: keyView({ ...event, created_at: event.at }) };
      });
    },
    listKeys: async (account) => keyViews(await existing(account)),
    revokeKey: async (account, keyId) => {
      const name = parseAccountName(account);
      await changes.decidedAccount(name, async () => ({ event: decideRevokeKey(await store.stateFor(name), name, keyId, clock.now()), answer: undefined }));
    },
  };
}

/**
 * Keys a distributed deployment kept before accounts were events: the Redis hash `<prefix>api-keys`
 * (SHA-256 → account). At start the schema service imports them once as events — the account created if
 * missing, each hash as a write key labelled `imported from Redis api-keys`, so the keys keep working —
 * then renames the hash to `<prefix>api-keys.imported`, which nothing reads. Several replicas starting at
 * once import side by side: a hash already registered is a conflict and skipped, and only one rename
 * succeeds. Resolves with the keys imported (0 when there is no such hash). Rejects unless the hash is gone
 * afterwards: left in place, it would be imported again at every start, bringing back every key revoked
 * (and every account deleted) since — so the start must fail instead.
 */
export async function importRedisApiKeys(redis: Pick<Redis, 'hgetall' | 'rename' | 'exists'>, prefix: string, accounts: AccountCommands, log: Logger): Promise<number> {
  const legacy = `${prefix}api-keys`;
  const entries = Object.entries(await redis.hgetall(legacy));
  if (entries.length === 0) return 0;
  let imported = 0;
  for (const [hash, account] of entries) {
    await accounts.createAccount(account, DEFAULT_QUOTAS).catch(ignoreConflict);
    try {
      await accounts.createKeyByHash(account, { hash, scope: 'write', label: 'imported from Redis api-keys' });
      imported += 1;
    } catch (e) {
      ignoreConflict(e);
    }
  }
  try {
    await redis.rename(legacy, `${legacy}.imported`);
  } catch (e) {
    // Renamed by a replica importing beside this one: gone either way. Anything else fails the start.
    if (!(e instanceof Error && /\bno such key\b/i.test(e.message))) {
      throw new Error(`API keys imported from ${legacy}, but the hash could not be renamed to ${legacy}.imported (${e instanceof Error ? e.message : String(e)})`, { cause: e });
    }
  }
  if ((await redis.exists(legacy)) !== 0) {
    // Written again after the read above (a gateway of the older version still running): not imported.
    throw new Error(`${legacy} is still there after the import (is a gateway of an older version still running and writing it?); stop it and start again`);
  }
  log('info', 'API keys imported from Redis into the accounts topic', { keys: imported, found: entries.length, renamed_to: `${legacy}.imported` });
  return imported;
}

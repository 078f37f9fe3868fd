import { createAccountCommands, ignoreConflict, type AccountChanges, type Clock } from '@pushbase/app';
import type { AccountCommands, SchemaService } from '@pushbase/contracts';
import { DEFAULT_QUOTAS, effectiveQuotas, type AccountInfo, type QuotaLimits } from '@pushbase/domain';
import type { Logger } from '@pushbase/grpc';
import type { Redis, RedisAccountStore, RedisSchemaStore } from '@pushbase/redis';
import type { RedisSchemaChanges } from './changes';

/*
 * Accounts and keys in the distributed mode (docs/operations.md → Accounts and API keys), served by the schema service over gRPC
 * (AccountAdmin in proto/pushbase/v1/accounts.proto): the account rules both modes share
 * (createAccountCommands), with each change made under the account's lease — the very lease, intent and
 * roll-forward of the account's dataset changes (changes.ts, decidedAccount) — then appended to the
 * accounts topic and applied to the Redis account store before it is answered. So a key created is
 * resolvable by every gateway at once, and a revocation is in force on every gateway as soon as it is
 * answered (they read the store on each request). Dataset creates take the same lease, so an account is
 * deleted only once the schema store shows none of its datasets under it.
 */

/** Account changes over the Redis account store, each decided under the account's lease. */
export function redisAccountChanges(changes: Pick<RedisSchemaChanges, 'decidedAccount'>, store: RedisAccountStore): AccountChanges {
  return {
    decided: (account, decide, hashes) => changes.decidedAccount(account, async () => decide(await store.stateFor(account, hashes))),
    get: (account) => store.get(account),
    list: async () => {
      const found = await Promise.all((await store.list()).map((n) => store.get(n)));
      return found.filter((a): a is AccountInfo => a !== undefined);
    },
  };
}

export interface DistributedAccountsDeps {
  readonly changes: Pick<RedisSchemaChanges, 'decidedAccount'>;
  readonly store: RedisAccountStore;
  readonly schemaStore: Pick<RedisSchemaStore, 'liveIds'>;
  /** The schema service whose delete removes each dataset of a deleted account. */
  readonly schema: Pick<SchemaService, 'delete'>;
  readonly clock: Clock;
  /** A key's public handle. Default: the app's newKeyId (as the embedded mode's). */
  readonly newKeyId?: () => string;
  /** The quotas in force where an account sets none (shown in effective_quotas; a gateway shows its own). */
  readonly defaults?: QuotaLimits;
}

export function createDistributedAccounts(deps: DistributedAccountsDeps): AccountCommands {
  const { schemaStore, schema } = deps;
  return createAccountCommands({
    changes: redisAccountChanges(deps.changes, deps.store),
    datasets: { ids: (account) => schemaStore.liveIds(account), delete: (account, id) => schema.delete({ account, id }) },
    clock: deps.clock,
    defaults: deps.defaults ?? effectiveQuotas(undefined),
    ...(deps.newKeyId === undefined ? {} : { newKeyId: deps.newKeyId }),
  });
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

import { randomUUID } from 'node:crypto';
import { createSchemaService, keyGuard, type Clock, type IdSource } from '@pushbase/app';
import type { AccountCommands, EventAppender, IdempotencyLedger, SchemaService } from '@pushbase/contracts';
import { effectiveQuotas } from '@pushbase/domain';
import { RedisAccountStore, RedisSchemaStore, type Redis } from '@pushbase/redis';
import { createDistributedAccounts } from './accounts';
import { RedisAccountLock } from './account-lock';
import type { Logger } from '@pushbase/grpc';
import { RedisSchemaChanges, type AccountChangeSink, type RedisSchemaChangesOptions } from './changes';

export interface DistributedSchemaDeps {
  readonly redis: Redis;
  /** The deployment's Redis key prefix (`pushbase:`), shared with the projector, records service and gateway. */
  readonly prefix: string;
  readonly appender: EventAppender;
  /** The accounts topic's writer; with it the service also serves accounts and keys (accounts.ts). */
  readonly accountLog?: AccountChangeSink['log'];
  readonly lock: { readonly ttlMs: number; readonly waitMs: number };
  readonly log?: Logger;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  /** Test seam, see RedisSchemaChangesOptions. */
  readonly afterAppend?: RedisSchemaChangesOptions['afterAppend'];
  /** The Idempotency-Keys of the writes (services/redis/src/idempotency.ts); keys are not honoured without one. */
  readonly ledger?: IdempotencyLedger;
  /** How long the applied keys the store records are kept (default 24 h). */
  readonly idempotencyTtlMs?: number;
}

export interface DistributedSchema {
  readonly service: SchemaService;
  /** Accounts and keys, when an accounts topic was given. */
  readonly accounts: AccountCommands | undefined;
  /** For the sweep of intents left by a crashed holder. */
  readonly changes: RedisSchemaChanges;
}

/**
 * The schema service of the distributed mode: app's createSchemaService (the same decisions as the
 * embedded mode) reading the Redis schema store, with its changes serialised per account across replicas
 * by a Redis lease and made durable in Kafka, then visible in Redis (changes.ts).
 */
export function createDistributedSchema(deps: DistributedSchemaDeps): DistributedSchema {
  // Every read checks that Redis lost nothing (services/redis/src/state.ts): a decision from a store that
  // lost a deletion or a revocation would be stored for good. A small read next to a decision's.
  const store = new RedisSchemaStore(deps.redis, { prefix: deps.prefix, stateCheckMs: 0, ...(deps.idempotencyTtlMs === undefined ? {} : { idempotency: { ttlMs: deps.idempotencyTtlMs } }) });
  const accountStore = new RedisAccountStore(deps.redis, { prefix: deps.prefix, stateCheckMs: 0 });
  const changes = new RedisSchemaChanges({
    ...(deps.accountLog === undefined ? {} : { accounts: { log: deps.accountLog, store: accountStore } }),
    redis: deps.redis,
    prefix: deps.prefix,
    lock: new RedisAccountLock(deps.redis, { prefix: deps.prefix, ...deps.lock }),
    appender: deps.appender,
    store,
    ...(deps.log === undefined ? {} : { log: deps.log }),
    ...(deps.afterAppend === undefined ? {} : { afterAppend: deps.afterAppend }),
  });
  const clock = deps.clock ?? { now: () => Date.now() };
  const service = createSchemaService({
    store,
    changes,
    clock,
    ids: deps.ids ?? { newIncarnation: () => randomUUID() },
    // The account's datasets quota (the account store, read under the account's lease when a create is
    // decided), else the API's limit: also for accounts that exist only in PUSHBASE_API_KEYS.
    quotas: { datasetLimit: async (account) => effectiveQuotas(await accountStore.quotas(account)).datasets },
  });
  const accounts = deps.accountLog === undefined ? undefined : createDistributedAccounts({ changes, store: accountStore, schemaStore: store, schema: service, clock });
  // The public API's writes honour Idempotency-Keys; the admin side's deletes carry none.
  return { service: deps.ledger === undefined ? service : keyGuard(deps.ledger, clock).schemas(service), accounts, changes };
}

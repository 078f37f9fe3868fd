import { randomUUID } from 'node:crypto';
import { createSchemaService, type Clock, type IdSource } from '@pushbase/app';
import type { EventAppender, SchemaService } from '@pushbase/contracts';
import { RedisSchemaStore, type Redis } from '@pushbase/redis';
import { RedisAccountLock } from './account-lock';
import type { Logger } from '@pushbase/grpc';
import { RedisSchemaChanges, type RedisSchemaChangesOptions } from './changes';

export interface DistributedSchemaDeps {
  readonly redis: Redis;
  /** The deployment's Redis key prefix (`pushbase:`), shared with the projector, records service and gateway. */
  readonly prefix: string;
  readonly appender: EventAppender;
  readonly lock: { readonly ttlMs: number; readonly waitMs: number };
  readonly log?: Logger;
  readonly clock?: Clock;
  readonly ids?: IdSource;
  /** Test seam, see RedisSchemaChangesOptions. */
  readonly afterAppend?: RedisSchemaChangesOptions['afterAppend'];
}

export interface DistributedSchema {
  readonly service: SchemaService;
  /** For the sweep of intents left by a crashed holder. */
  readonly changes: RedisSchemaChanges;
}

/**
 * The schema service of the distributed mode: app's createSchemaService (the same decisions as the
 * embedded mode) reading the Redis schema store, with its changes serialised per account across replicas
 * by a Redis lease and made durable in Kafka, then visible in Redis (changes.ts).
 */
export function createDistributedSchema(deps: DistributedSchemaDeps): DistributedSchema {
  const store = new RedisSchemaStore(deps.redis, { prefix: deps.prefix });
  const changes = new RedisSchemaChanges({
    redis: deps.redis,
    prefix: deps.prefix,
    lock: new RedisAccountLock(deps.redis, { prefix: deps.prefix, ...deps.lock }),
    appender: deps.appender,
    store,
    ...(deps.log === undefined ? {} : { log: deps.log }),
    ...(deps.afterAppend === undefined ? {} : { afterAppend: deps.afterAppend }),
  });
  const service = createSchemaService({
    store,
    changes,
    clock: deps.clock ?? { now: () => Date.now() },
    ids: deps.ids ?? { newIncarnation: () => randomUUID() },
  });
  return { service, changes };
}

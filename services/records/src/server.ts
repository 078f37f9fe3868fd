import { createRecordService, keyGuard, type Clock, type WriteDecider } from '@pushbase/app';
import { RequestScope, type EventAppender, type IdempotencyLedger, type PushbaseServices, type RecordService } from '@pushbase/contracts';
import { createGrpcServer, type GrpcCallMetrics, type GrpcServer, type Logger } from '@pushbase/grpc';
import { RedisSchemaStore, type Redis } from '@pushbase/redis';
import { CachedSchemaStore } from './schema-cache';

export interface RecordsServerDeps {
  /** The schema store's Redis (the records service only reads it). */
  readonly redis: Redis;
  readonly prefix: string;
  /** Where the events go: the Kafka appender (one event per request, answered once committed). */
  readonly appender: EventAppender;
  readonly log: Logger;
  readonly clock?: Clock;
  /** Where writes are parsed and validated; on the event loop by default. */
  readonly decider?: WriteDecider;
  /** The loaded protos; loaded anew when not given (tests starting many servers pass one). */
  readonly protos?: PushbaseServices;
  /** Times every gRPC call it answers (docs/metrics.md). */
  readonly metrics?: GrpcCallMetrics;
  /** PUSHBASE_GRPC_TOKEN: calls without it are refused (@pushbase/grpc auth.ts). */
  readonly token?: string | undefined;
  /** The Idempotency-Keys of the writes (services/redis/src/idempotency.ts); keys are not honoured without one. */
  readonly ledger?: IdempotencyLedger;
}

export interface RecordsServer {
  /** The record service itself (what the gRPC server serves), for tests. */
  readonly service: RecordService;
  readonly schemas: CachedSchemaStore;
  /** Unstarted: listen() binds it and turns its health SERVING. */
  readonly grpc: GrpcServer;
}

const systemClock: Clock = { now: () => Date.now() };

/**
 * The record service of services/app (the same one the embedded mode runs) over the Redis schema store,
 * with definitions cached per incarnation, writing to the given appender; behind a gRPC server
 * (pushbase.v1.RecordService and grpc.health.v1), unstarted. Stateless: any number of replicas.
 */
export function createRecordsServer(deps: RecordsServerDeps): RecordsServer {
  const schemas = new CachedSchemaStore(new RedisSchemaStore(deps.redis, { prefix: deps.prefix }));
  const clock = deps.clock ?? systemClock;
  const plain = createRecordService({ schemas, log: deps.appender, clock, ...(deps.decider === undefined ? {} : { decider: deps.decider }) });
  const service = deps.ledger === undefined ? plain : keyGuard(deps.ledger, clock).records(plain);
  const grpc = createGrpcServer({
    records: service,
    log: deps.log,
    requestScope: new RequestScope(),
    ...(deps.protos === undefined ? {} : { protos: deps.protos }),
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(deps.token === undefined ? {} : { token: deps.token }),
  });
  return { service, schemas, grpc };
}

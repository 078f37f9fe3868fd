import { Lifecycle } from '@pushbase/config';
import { jsonLogger, type Logger } from '@pushbase/grpc';
import { createKafka, KafkaAccountLog, KafkaEventAppender, kafkaLogTo, ProjectionProgress } from '@pushbase/kafka';
import { createMetricsRegistry, grpcMetrics, kafkaAppenderMetrics, startMetricsListener } from '@pushbase/metrics';
import { closeRedis, openRedis, RedisIdempotencyLedger } from '@pushbase/redis';
import type { SchemaConfig } from './config';
import { importRedisApiKeys } from './accounts';
import { createSchemaServer, type SchemaServer, type SchemaServerDeps } from './server';

export interface RunningSchema {
  readonly port: number;
  readonly server: SchemaServer;
  /** The port of its GET /metrics listener (PUSHBASE_METRICS_PORT). */
  readonly metricsPort: number;
  /** Health NOT_SERVING, calls still taken for the drain delay (PUSHBASE_GRPC_DRAIN_MS), then those in flight drained (cancelled after the shutdown timeout), sweep stopped, Kafka and Redis closed. */
  stop(): Promise<void>;
}

export interface SchemaHooks {
  readonly log?: Logger;
  /** Test seam: see RedisSchemaChangesOptions.afterAppend. */
  readonly afterAppend?: SchemaServerDeps['afterAppend'];
}

/**
 * The composition root of `pushbase schema`: Redis (the schema store, the account leases and intents),
 * the Kafka appender, the schema service behind its gRPC server, the sweep of intents left by a crash.
 * Writes `{"msg":"listening","grpc_port":N,"metrics_port":M}` once it serves (metrics: docs/metrics.md).
 */
export async function runSchema(config: SchemaConfig, hooks: SchemaHooks = {}): Promise<RunningSchema> {
  const log = hooks.log ?? jsonLogger('schema', undefined, config.telemetry.logLevel);
  const life = new Lifecycle();
  // Fail fast, as the gateway's clients do: a decision that cannot reach Redis answers 503 at once (nothing
  // was decided), instead of waiting in ioredis's offline queue through reconnection attempts.
  const redis = await openRedis(config.redis.url, { failFast: true });
  life.defer('redis', (atOnce) => closeRedis(redis, atOnce));
  return life.start(async () => {
    // This process's one registry, served by its own small listener: gRPC has no HTTP route to put it on.
    // Closed after everything but Redis, so a scrape during the drain still sees it.
    const metrics = createMetricsRegistry();
    const metricsListener = await startMetricsListener(metrics, config.metrics);
    life.defer('metrics listener', () => metricsListener.close());
    const kafkaLog = kafkaLogTo(log);
    const appender = new KafkaEventAppender({
      connection: { brokers: config.kafka.brokers, clientId: config.kafka.clientId, log: kafkaLog },
      topic: config.kafka.topic,
      appendTimeoutMs: config.kafka.appendTimeoutMs,
      transactionalId: config.kafka.transactionalId,
      // A schema change is one small event and rare: no reason to wait for others to share its request.
      lingerMs: 0,
      metrics: kafkaAppenderMetrics(metrics),
    });
    // The accounts topic's own transactional producer: one appender per topic keeps each one's batching and
    // its "one transaction in flight" rule simple; its id is the schema's own plus a suffix, so it is as
    // stable per instance and as unique among live producers.
    const accountAppender = new KafkaEventAppender({
      connection: { brokers: config.kafka.brokers, clientId: config.kafka.clientId, log: kafkaLog },
      topic: config.kafka.accountsTopic,
      appendTimeoutMs: config.kafka.appendTimeoutMs,
      transactionalId: `${config.kafka.transactionalId.slice(0, 240)}-accounts`,
      lingerMs: 0,
    });
    // Settles keyed changes of unknown outcome from how far the projector has folded the log (services/redis/src/idempotency.ts).
    const progress = new ProjectionProgress(
      createKafka({ brokers: config.kafka.brokers, clientId: `${config.kafka.clientId}-progress`, log: kafkaLog, retry: { retries: 2, initialRetryTimeMs: 100, maxRetryTimeMs: 1000 } }),
      config.kafka.topic,
      config.idempotency.projectorGroup,
    );
    // Closed in this order's reverse: the appenders, then the progress a cancelled call may still be asking.
    life.defer('projection progress', () => progress.close().catch(() => undefined));
    life.defer('accounts appender', () => accountAppender.close());
    life.defer('kafka appender', () => appender.close());
    const server = createSchemaServer({
      ledger: new RedisIdempotencyLedger(redis, {
        prefix: config.redis.prefix,
        url: config.redis.url,
        ttlMs: config.idempotency.ttlMs,
        leaseMs: config.idempotency.leaseMs,
        progress,
      }),
      idempotencyTtlMs: config.idempotency.ttlMs,
      redis,
      prefix: config.redis.prefix,
      appender,
      accountLog: new KafkaAccountLog(accountAppender),
      lock: config.lock,
      log,
      metrics: grpcMetrics(metrics, 'server'),
      token: config.grpc.token,
      ...(hooks.afterAppend === undefined ? {} : { afterAppend: hooks.afterAppend }),
    });
    // The sweep of intents a crash left; it stops once the calls have drained (one in flight may leave one).
    const stopSweeping = server.changes.startSweeping(config.sweepIntervalMs);
    life.defer('intent sweep', () => stopSweeping());
    // Stop: health NOT_SERVING, the drain, then everything deferred before.
    life.defer('grpc server', (atOnce) => (atOnce ? server.grpc.shutdown(0, 0) : server.grpc.shutdown(config.shutdownTimeoutMs, config.grpc.drainMs)));
    const port = await server.grpc.listen(config.grpc.host, config.grpc.port);
    // Before accounts were events, keys lived in a Redis hash: carried into the accounts topic once. A failed
    // import fails the start: a hash left in place would be imported again at each start (see the function).
    if (server.accounts !== undefined) {
      try {
        await importRedisApiKeys(redis, config.redis.prefix, server.accounts, log);
      } catch (e) {
        log('error', 'API keys in Redis could not be imported; not starting (the next start tries again)', { error: e instanceof Error ? e.message : String(e) });
        throw e;
      }
    }
    log('info', 'listening', {
      grpc_port: port,
      grpc_host: config.grpc.host,
      grpc_token: config.grpc.token !== undefined,
      metrics_port: metricsListener.port,
      metrics_host: config.metrics.host,
      topic: config.kafka.topic,
      accounts_topic: config.kafka.accountsTopic,
      redis_prefix: config.redis.prefix,
      lock_ttl_ms: config.lock.ttlMs,
    });
    return { port, server, metricsPort: metricsListener.port, stop: () => life.close() };
  });
}

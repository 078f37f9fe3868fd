import { createWritePool } from '@pushbase/app';
import { Lifecycle } from '@pushbase/config';
import { jsonLogger, type Logger } from '@pushbase/grpc';
import { createKafka, KafkaEventAppender, kafkaLogTo, ProjectionProgress } from '@pushbase/kafka';
import { createMetricsRegistry, grpcMetrics, kafkaAppenderMetrics, startMetricsListener } from '@pushbase/metrics';
import { closeRedis, openRedis, RedisIdempotencyLedger } from '@pushbase/redis';
import type { RecordsConfig } from './config';
import { createRecordsServer, type RecordsServer } from './server';

export interface RunningRecords {
  readonly port: number;
  readonly server: RecordsServer;
  readonly appender: KafkaEventAppender;
  /** The port of its GET /metrics listener (PUSHBASE_METRICS_PORT). */
  readonly metricsPort: number;
  /** Threads deciding writes beside the event loop (PUSHBASE_RECORDS_WRITE_WORKERS); 0 when on the event loop. */
  readonly writeWorkers: number;
  /** Health NOT_SERVING, calls still taken for the drain delay (PUSHBASE_GRPC_DRAIN_MS), then those in flight drained (cancelled after the shutdown timeout), Kafka and Redis closed. */
  stop(): Promise<void>;
}

export interface RecordsHooks {
  readonly log?: Logger;
}

/**
 * The composition root of `pushbase records`: Redis (the schema store), the Kafka appender (idempotent, its
 * lost answers confirmed: services/kafka/src/appender.ts), the record service behind its gRPC server. Writes
 * `{"msg":"listening","grpc_port":N,"metrics_port":M,"write_workers":W}` once it serves (metrics: docs/metrics.md). It starts while Kafka is down (its writes are then
 * refused with 503 until Kafka is back), not while Redis is: nothing could be validated.
 */
export async function runRecords(config: RecordsConfig, hooks: RecordsHooks = {}): Promise<RunningRecords> {
  const log = hooks.log ?? jsonLogger('records', undefined, config.telemetry.logLevel);
  const life = new Lifecycle();
  // Fail fast: a write that cannot reach Redis answers 503 at once (nothing was sent), instead of waiting in
  // ioredis's offline queue through reconnection attempts.
  const redis = await openRedis(config.redis.url, { failFast: true });
  life.defer('redis', (atOnce) => closeRedis(redis, atOnce));
  return life.start(async () => {
    // This process's one registry, served by its own small listener: gRPC has no HTTP route to put it on.
    // Closed after everything but Redis, so a scrape during the drain still sees it.
    const metrics = createMetricsRegistry();
    const metricsListener = await startMetricsListener(metrics, config.metrics);
    life.defer('metrics listener', () => metricsListener.close());
    const kafkaLog = kafkaLogTo(log);
    // Settles keyed writes of unknown outcome from how far the projector has folded the log (services/redis/src/idempotency.ts).
    const progress = new ProjectionProgress(
      createKafka({ brokers: config.kafka.brokers, clientId: `${config.kafka.clientId}-progress`, log: kafkaLog, retry: { retries: 2, initialRetryTimeMs: 100, maxRetryTimeMs: 1000 } }),
      config.kafka.topic,
      config.idempotency.projectorGroup,
    );
    // Closed after the appender: a call cancelled at the shutdown timeout may still be settling a write.
    life.defer('projection progress', () => progress.close().catch(() => undefined));
    const appender = new KafkaEventAppender({
      connection: {
        brokers: config.kafka.brokers,
        clientId: config.kafka.clientId,
        log: kafkaLog,
        // An unreachable Kafka turns into 503s within about 2 s rather than kafkajs's default ~7 s.
        retry: { retries: 5, initialRetryTimeMs: 100, maxRetryTimeMs: 1000 },
        // Leaves time to confirm a batch (send it again) before the write's deadline (config.ts).
        requestTimeoutMs: config.kafka.requestTimeoutMs,
      },
      topic: config.kafka.topic,
      // Confirmation rather than transactions: one produce request per batch (services/kafka/src/appender.ts).
      mode: 'idempotent',
      produceTimeoutMs: config.kafka.produceTimeoutMs,
      appendTimeoutMs: config.kafka.appendTimeoutMs,
      lingerMs: config.kafka.lingerMs,
      metrics: kafkaAppenderMetrics(metrics),
    });
    life.defer('kafka appender', () => appender.close());
    // Why beside the event loop: services/app/src/write-pool.ts.
    const pool = createWritePool(config.writeWorkers, { onUnavailable: (message) => log('warn', message) });
    // No call is left to decide a write by then; a pool that fails to close is logged, and Kafka closes anyway.
    if (pool !== undefined) life.defer('write pool', () => pool.close().catch((e: unknown) => log('warn', 'write pool did not close', { error: e instanceof Error ? e.message : String(e) })));
    const writeWorkers = pool?.threads ?? 0;
    const ledger = new RedisIdempotencyLedger(redis, {
      prefix: config.redis.prefix,
      url: config.redis.url,
      ttlMs: config.idempotency.ttlMs,
      leaseMs: config.idempotency.leaseMs,
      progress,
    });
    const server = createRecordsServer({
      ledger,
      redis,
      prefix: config.redis.prefix,
      appender,
      log,
      metrics: grpcMetrics(metrics, 'server'),
      token: config.grpc.token,
      ...(pool === undefined ? {} : { decider: pool.decider }),
    });
    // Stop: health NOT_SERVING, the drain, then everything deferred before.
    life.defer('grpc server', (atOnce) => (atOnce ? server.grpc.shutdown(0, 0) : server.grpc.shutdown(config.shutdownTimeoutMs, config.grpc.drainMs)));
    const port = await server.grpc.listen(config.grpc.host, config.grpc.port);
    // Connect now rather than at the first write, so the first write does not wait for the producer id.
    appender.connect().catch((e: unknown) => log('warn', 'Kafka not reachable yet; writes are refused until it is', { error: e instanceof Error ? e.message : String(e) }));
    log('info', 'listening', {
      grpc_port: port,
      grpc_host: config.grpc.host,
      grpc_token: config.grpc.token !== undefined,
      metrics_port: metricsListener.port,
      metrics_host: config.metrics.host,
      topic: config.kafka.topic,
      redis_prefix: config.redis.prefix,
      write_workers: writeWorkers,
    });
    return { port, server, appender, metricsPort: metricsListener.port, writeWorkers, stop: () => life.close() };
  });
}

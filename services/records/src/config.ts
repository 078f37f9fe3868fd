import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { hoursToMs, idempotencyEnv, integer, kafkaName, parseEnv, shutdownEnv } from '@pushbase/config';
import { defaultWriteWorkerCount } from '@pushbase/app';
import { DEFAULT_WRITE_DEADLINE_MS, grpcServerConfigOf, grpcServerEnv, grpcTokenRefinement } from '@pushbase/grpc';
import { kafkaEnv, projectorGroupEnv } from '@pushbase/kafka';
import { metricsConfigOf, metricsEnv } from '@pushbase/metrics';
import { redisEnv } from '@pushbase/redis';
import { telemetryConfigOf, telemetryEnv } from '@pushbase/telemetry';

/*
 * The records service's settings (`pushbase records`), one schema parsed once at start. Unset and empty
 * variables both mean "use the default". Kafka and Redis variables mean what they mean to the projector
 * and the schema service: the same topic, the same Redis key prefix (the schema store it validates against).
 */

/**
 * Kafka's request timeout for an append timeout: a third of it, at most 10 s, at least 1 s, so a broker
 * that stops answering leaves time to confirm the batch before the write's deadline
 * (docs/architecture.md → The Kafka appender, idempotent mode).
 */
export const requestTimeoutMs = (appendTimeoutMs: number): number => Math.max(1000, Math.min(10_000, Math.floor(appendTimeoutMs / 3)));

/**
 * How long a keyed write's attempt holds its key: the latest its event can still land in the log — the
 * append's deadline, a produce request sent just before it timing out, and the schema service's
 * transaction timeout (10 s), which can hold the partition's stable end behind an event — with 5 s to spare.
 */
export const idempotencyLeaseMs = (appendTimeoutMs: number): number => appendTimeoutMs + requestTimeoutMs(appendTimeoutMs) + 10_000 + 5_000;

/**
 * Threads that decide writes (parse, validate, serialise) beside the event loop: one per core, at most 4;
 * none on one core (the rule: defaultWriteWorkerCount; the 2-core figures: docs/operations.md → Stateless services).
 */
export const defaultRecordsWriteWorkers = (cores: number = availableParallelism()): number => defaultWriteWorkerCount(0, cores);

const schema = z
  .object({
    ...kafkaEnv,
    // The Kafka client id of this service's connections (its progress reader's gets "-progress").
    PUSHBASE_RECORDS_KAFKA_CLIENT_ID: kafkaName('PUSHBASE_RECORDS_KAFKA_CLIENT_ID', 'pushbase-records'),
    ...redisEnv,
    ...idempotencyEnv,
    ...projectorGroupEnv,
    ...metricsEnv,
    ...telemetryEnv,
    ...grpcServerEnv,
    // 0: the system picks a free port; the "listening" line says which.
    PUSHBASE_RECORDS_GRPC_PORT: integer(0, 0, 65_535),
    // From a write's append to the broker's acknowledgement; later it is refused (503) when its batch was
    // never sent, else answered outcome_unknown (500): docs/architecture.md → The Kafka appender.
    PUSHBASE_RECORDS_APPEND_TIMEOUT_MS: integer(30_000, 100, 600_000),
    // How long the first write into an idle appender waits for others to share its produce request. 1 ms, not
    // the appender's 5: writes arriving while a request is in flight share the next one anyway, so batches
    // stay large under load and an idle appender adds little (figures: docs/operations.md → Stateless services).
    PUSHBASE_RECORDS_LINGER_MS: integer(1, 0, 1000),
    // 0: decide on the event loop.
    PUSHBASE_RECORDS_WRITE_WORKERS: integer(defaultRecordsWriteWorkers(), 0, 64),
    ...shutdownEnv,
  })
  .refine((e) => e.PUSHBASE_RECORDS_APPEND_TIMEOUT_MS + 5_000 <= DEFAULT_WRITE_DEADLINE_MS, {
    // Past the callers' deadline a write the appender still settles would be answered by the caller's
    // timeout (outcome_unknown) instead of its real outcome.
    message: `PUSHBASE_RECORDS_APPEND_TIMEOUT_MS must stay at least 5 s under the gRPC clients' write deadline (${DEFAULT_WRITE_DEADLINE_MS} ms)`,
    path: ['PUSHBASE_RECORDS_APPEND_TIMEOUT_MS'],
  })
  .refine(...grpcTokenRefinement)
  .transform((e) =>
    Object.freeze({
      kafka: Object.freeze({
        brokers: e.PUSHBASE_KAFKA_BROKERS,
        topic: e.PUSHBASE_KAFKA_TOPIC,
        clientId: e.PUSHBASE_RECORDS_KAFKA_CLIENT_ID,
        appendTimeoutMs: e.PUSHBASE_RECORDS_APPEND_TIMEOUT_MS,
        // Derived, not set: see requestTimeoutMs below. The broker's wait for the in-sync replicas is half of
        // it, so it answers (with an error when the replicas are slow) before the request times out.
        requestTimeoutMs: requestTimeoutMs(e.PUSHBASE_RECORDS_APPEND_TIMEOUT_MS),
        produceTimeoutMs: Math.floor(requestTimeoutMs(e.PUSHBASE_RECORDS_APPEND_TIMEOUT_MS) / 2),
        lingerMs: e.PUSHBASE_RECORDS_LINGER_MS,
      }),
      redis: Object.freeze({ url: e.PUSHBASE_REDIS_URL, prefix: e.PUSHBASE_REDIS_PREFIX }),
      metrics: metricsConfigOf(e),
      telemetry: telemetryConfigOf(e),
      grpc: grpcServerConfigOf(e, e.PUSHBASE_RECORDS_GRPC_PORT),
      shutdownTimeoutMs: e.PUSHBASE_SHUTDOWN_TIMEOUT_MS,
      writeWorkers: e.PUSHBASE_RECORDS_WRITE_WORKERS,
      idempotency: Object.freeze({
        ttlMs: hoursToMs(e.PUSHBASE_IDEMPOTENCY_TTL_HOURS),
        leaseMs: idempotencyLeaseMs(e.PUSHBASE_RECORDS_APPEND_TIMEOUT_MS),
        projectorGroup: e.PUSHBASE_PROJECTOR_GROUP,
      }),
    }),
  );

export type RecordsConfig = z.output<typeof schema>;

/** Parses the environment; a bad value throws with every problem listed. */
export function loadRecordsConfig(env: NodeJS.ProcessEnv = process.env): RecordsConfig {
  return parseEnv(schema, env);
}

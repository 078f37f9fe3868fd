import { z } from 'zod';
import { hoursToMs, idempotencyEnv, integer, kafkaName, optionalKafkaName, parseEnv, shutdownEnv } from '@pushbase/config';
import { DEFAULT_WRITE_DEADLINE_MS, grpcServerConfigOf, grpcServerEnv, grpcTokenRefinement } from '@pushbase/grpc';
import { accountsTopicEnv, defaultAccountsTopic, defaultTransactionalId, kafkaEnv, projectorGroupEnv } from '@pushbase/kafka';
import { metricsConfigOf, metricsEnv } from '@pushbase/metrics';
import { telemetryConfigOf, telemetryEnv } from '@pushbase/telemetry';
import { redisEnv } from '@pushbase/redis';

/*
 * The schema service's settings (`pushbase schema`), one schema parsed once at start. Unset and empty
 * variables both mean "use the default". Kafka and Redis variables mean what they mean to the projector
 * (services/projector/src/config.ts): the same topic, the same Redis key prefix, so the store this service
 * writes is the one the projector feeds and the records service and the gateway read.
 */

const schema = z
  .object({
    ...kafkaEnv,
    ...accountsTopicEnv,
    PUSHBASE_SCHEMA_KAFKA_CLIENT_ID: kafkaName('PUSHBASE_SCHEMA_KAFKA_CLIENT_ID', 'pushbase-schema'),
    // The Kafka transactional id: stable per instance (a StatefulSet's pod name) lets a restarted instance
    // abort its predecessor's open transaction at once; unset, a unique one is made at start.
    PUSHBASE_SCHEMA_TRANSACTIONAL_ID: optionalKafkaName('PUSHBASE_SCHEMA_TRANSACTIONAL_ID'),
    ...redisEnv,
    ...idempotencyEnv,
    ...projectorGroupEnv,
    ...metricsEnv,
    ...telemetryEnv,
    ...grpcServerEnv,
    // 0: the system picks a free port; the "listening" line says which.
    PUSHBASE_SCHEMA_GRPC_PORT: integer(0, 0, 65_535),
    // From append() to the broker's acknowledgment; later, the change is refused or its outcome unknown.
    PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS: integer(10_000, 100, 120_000),
    // The per-account lease that serialises decisions across replicas (services/schema/src/changes.ts).
    PUSHBASE_SCHEMA_LOCK_TTL_MS: integer(60_000, 1000, 600_000),
    // How long a decision waits for the account's lease before answering 503 (nothing changed).
    PUSHBASE_SCHEMA_LOCK_WAIT_MS: integer(10_000, 10, 600_000),
    // How often intents left by a crashed holder are rolled forward for accounts nobody writes to.
    PUSHBASE_SCHEMA_SWEEP_MS: integer(10_000, 100, 3_600_000),
    ...shutdownEnv,
  })
  .refine((e) => e.PUSHBASE_SCHEMA_LOCK_TTL_MS >= 2 * e.PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS, {
    // A lease must outlive an append whose fate is unknown, or a late write could land after the next
    // holder's decisions (changes.ts, "Fencing").
    message: 'PUSHBASE_SCHEMA_LOCK_TTL_MS must be at least twice PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS',
    path: ['PUSHBASE_SCHEMA_LOCK_TTL_MS'],
  })
  .refine((e) => e.PUSHBASE_SCHEMA_LOCK_WAIT_MS + 2 * e.PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS < DEFAULT_WRITE_DEADLINE_MS, {
    // The longest a change can take: its wait, an earlier change rolled forward, its own append. Beyond the
    // callers' deadline a decided change would be answered by the caller's timeout (outcome_unknown).
    message: `PUSHBASE_SCHEMA_LOCK_WAIT_MS plus twice PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS must stay under the gRPC clients' write deadline (${DEFAULT_WRITE_DEADLINE_MS} ms)`,
    path: ['PUSHBASE_SCHEMA_LOCK_WAIT_MS'],
  })
  .refine(...grpcTokenRefinement)
  .transform((e) =>
    Object.freeze({
      kafka: Object.freeze({
        brokers: e.PUSHBASE_KAFKA_BROKERS,
        topic: e.PUSHBASE_KAFKA_TOPIC,
        accountsTopic: e.PUSHBASE_KAFKA_ACCOUNTS_TOPIC ?? defaultAccountsTopic(e.PUSHBASE_KAFKA_TOPIC),
        clientId: e.PUSHBASE_SCHEMA_KAFKA_CLIENT_ID,
        appendTimeoutMs: e.PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS,
        transactionalId: e.PUSHBASE_SCHEMA_TRANSACTIONAL_ID ?? defaultTransactionalId('schema'),
      }),
      redis: Object.freeze({ url: e.PUSHBASE_REDIS_URL, prefix: e.PUSHBASE_REDIS_PREFIX }),
      metrics: metricsConfigOf(e),
      telemetry: telemetryConfigOf(e),
      grpc: grpcServerConfigOf(e, e.PUSHBASE_SCHEMA_GRPC_PORT),
      lock: Object.freeze({ ttlMs: e.PUSHBASE_SCHEMA_LOCK_TTL_MS, waitMs: e.PUSHBASE_SCHEMA_LOCK_WAIT_MS }),
      sweepIntervalMs: e.PUSHBASE_SCHEMA_SWEEP_MS,
      shutdownTimeoutMs: e.PUSHBASE_SHUTDOWN_TIMEOUT_MS,
      idempotency: Object.freeze({
        ttlMs: hoursToMs(e.PUSHBASE_IDEMPOTENCY_TTL_HOURS),
        // A change of unknown outcome is rolled forward (or found never stored) by the account's next
        // holder or the sweep, at the latest a lease, an append and a sweep later: then the log is settled.
        leaseMs: e.PUSHBASE_SCHEMA_LOCK_TTL_MS + e.PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS + e.PUSHBASE_SCHEMA_SWEEP_MS + 5_000,
        projectorGroup: e.PUSHBASE_PROJECTOR_GROUP,
      }),
    }),
  );

export type SchemaConfig = z.output<typeof schema>;

/** Parses the environment; a bad value throws with every problem listed. */
export function loadSchemaConfig(env: NodeJS.ProcessEnv = process.env): SchemaConfig {
  return parseEnv(schema, env);
}

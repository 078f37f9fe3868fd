import { z } from 'zod';
import { hoursToMs, idempotencyEnv, integer, parseEnv } from '@pushbase/config';
import { clickhouseEnv, MAX_INSERT_ROWS, viewsDatabaseOf } from '@pushbase/clickhouse';
import { accountsTopicEnv, defaultAccountsTopic, kafkaEnv, projectorGroupEnv } from '@pushbase/kafka';
import { metricsConfigOf, metricsEnv } from '@pushbase/metrics';
import { telemetryConfigOf, telemetryEnv } from '@pushbase/telemetry';
import { redisEnv } from '@pushbase/redis';
import { MAX_ROWS_PER_EVENT } from './project';

/*
 * The projector's settings (`pushbase projector`), one schema parsed once at start. Unset and empty
 * variables both mean "use the default".
 */
/** A pending write holds at most flushRows plus the rows of the event that crossed it; it must fit one atomic insert. */
const MAX_FLUSH_ROWS = MAX_INSERT_ROWS - MAX_ROWS_PER_EVENT;

/** The variables the projector and replay share (replay reads the same topic into the same kinds of store). */
const projectorEnv = {
  ...kafkaEnv,
  ...accountsTopicEnv,
  ...projectorGroupEnv,
  ...clickhouseEnv,
  ...redisEnv,
  ...idempotencyEnv,
  PUSHBASE_PROJECTOR_MAX_ROWS: integer(4_000_000, 1, Number.MAX_SAFE_INTEGER),
  PUSHBASE_PROJECTOR_FLUSH_ROWS: integer(50_000, 1, MAX_FLUSH_ROWS),
  PUSHBASE_PROJECTOR_FLUSH_MS: integer(250, 10, 60_000),
  PUSHBASE_PROJECTOR_NICE: integer(0, 0, 19),
};

type ProjectorEnv = z.output<z.ZodObject<typeof projectorEnv>>;

const accountsTopicOf = (env: { PUSHBASE_KAFKA_TOPIC: string; PUSHBASE_KAFKA_ACCOUNTS_TOPIC?: string | undefined }): string =>
  env.PUSHBASE_KAFKA_ACCOUNTS_TOPIC ?? defaultAccountsTopic(env.PUSHBASE_KAFKA_TOPIC);

const projectorConfigOf = (env: ProjectorEnv) =>
  Object.freeze({
    kafka: Object.freeze({
      brokers: env.PUSHBASE_KAFKA_BROKERS,
      topic: env.PUSHBASE_KAFKA_TOPIC,
      accountsTopic: accountsTopicOf(env),
      groupId: env.PUSHBASE_PROJECTOR_GROUP,
    }),
    clickhouse: Object.freeze({ url: env.PUSHBASE_CLICKHOUSE_URL, database: env.PUSHBASE_CLICKHOUSE_DATABASE, viewsDatabase: viewsDatabaseOf(env) }),
    redis: Object.freeze({ url: env.PUSHBASE_REDIS_URL, prefix: env.PUSHBASE_REDIS_PREFIX }),
    // How long the applied Idempotency-Keys it records from the events are kept (services/redis/src/idempotency.ts).
    idempotencyTtlMs: hoursToMs(env.PUSHBASE_IDEMPOTENCY_TTL_HOURS),
    maxRows: env.PUSHBASE_PROJECTOR_MAX_ROWS,
    flushRows: env.PUSHBASE_PROJECTOR_FLUSH_ROWS,
    flushIntervalMs: env.PUSHBASE_PROJECTOR_FLUSH_MS,
    nice: env.PUSHBASE_PROJECTOR_NICE,
  });

// The long-running projector serves its metrics and probes (replay is a command that ends; it has none).
const liveEnv = {
  // How long a held partition with lag may go without its committed offset moving before /healthz
  // answers 503 (health.ts). A busy projector commits every write, well under a second apart.
  PUSHBASE_PROJECTOR_STALL_MS: integer(180_000, 5_000, 86_400_000),
};
const schema = z
  .object({ ...projectorEnv, ...liveEnv, ...metricsEnv, ...telemetryEnv })
  .transform((env) => Object.freeze({ ...projectorConfigOf(env), stallMs: env.PUSHBASE_PROJECTOR_STALL_MS, metrics: metricsConfigOf(env), telemetry: telemetryConfigOf(env) }));

export type ProjectorConfig = z.output<typeof schema>;

/** Parses the environment; a bad value throws with every problem listed. */
export function loadProjectorConfig(env: NodeJS.ProcessEnv = process.env): ProjectorConfig {
  return parseEnv(schema, env);
}

/*
 * `pushbase replay`: the projector's variables (it rebuilds what the projector builds, from the same
 * topic, and checks that the projector group named there is stopped) and the command's flags, in one schema.
 */
const replaySchema = z
  .object({
    ...projectorEnv,
    verify: z.boolean().default(false),
    verifyOnly: z.boolean().default(false),
    keepRetired: z.boolean().default(false),
    progress: z.boolean().default(true),
  })
  .refine((c) => !(c.verifyOnly && c.keepRetired), { message: '--keep-retired has nothing to keep with --verify-only (nothing is swapped)' })
  .transform((c) =>
    Object.freeze({
      ...projectorConfigOf(c),
      verify: c.verify || c.verifyOnly,
      verifyOnly: c.verifyOnly,
      keepRetired: c.keepRetired,
      progress: c.progress,
    }),
  );

export type ReplayConfig = z.output<typeof replaySchema>;

export interface ReplayFlags {
  readonly verify?: boolean;
  readonly verifyOnly?: boolean;
  readonly keepRetired?: boolean;
  readonly progress?: boolean;
}

/** Parses the environment and the command's flags together; a bad value throws with every problem listed. */
export function loadReplayConfig(flags: ReplayFlags = {}, env: NodeJS.ProcessEnv = process.env): ReplayConfig {
  return parseEnv(replaySchema, { ...env, ...flags });
}

/*
 * `pushbase migrate` sets up what the data path needs before any service starts: the topic of dataset
 * events (created when missing, never changed when present) and the ClickHouse tables. Its own schema,
 * sharing the variables' rules with the projector's.
 */
const migrateSchema = z.object({
  PUSHBASE_KAFKA_BROKERS: projectorEnv.PUSHBASE_KAFKA_BROKERS,
  PUSHBASE_KAFKA_TOPIC: projectorEnv.PUSHBASE_KAFKA_TOPIC,
  PUSHBASE_KAFKA_ACCOUNTS_TOPIC: projectorEnv.PUSHBASE_KAFKA_ACCOUNTS_TOPIC,
  // More partitions, more projectors can share the topic; a dataset stays in one. Fixed once created.
  PUSHBASE_KAFKA_PARTITIONS: integer(6, 1, 10_000),
  // 1 for one broker (local, tests); a cluster wants 3.
  PUSHBASE_KAFKA_REPLICATION_FACTOR: integer(1, 1, 32),
  ...clickhouseEnv,
});

export interface MigrateConfig {
  readonly kafka: { readonly brokers: readonly string[]; readonly topic: string; readonly accountsTopic: string; readonly partitions: number; readonly replicationFactor: number };
  readonly clickhouse: { readonly url: string; readonly database: string };
}

/** Parses the environment for `pushbase migrate`; a bad value throws with every problem listed. */
export function loadMigrateConfig(env: NodeJS.ProcessEnv = process.env): MigrateConfig {
  const e = parseEnv(migrateSchema, env);
  return Object.freeze({
    kafka: Object.freeze({
      brokers: e.PUSHBASE_KAFKA_BROKERS,
      topic: e.PUSHBASE_KAFKA_TOPIC,
      accountsTopic: accountsTopicOf(e),
      partitions: e.PUSHBASE_KAFKA_PARTITIONS, replicationFactor: e.PUSHBASE_KAFKA_REPLICATION_FACTOR }),
    clickhouse: Object.freeze({ url: e.PUSHBASE_CLICKHOUSE_URL, database: e.PUSHBASE_CLICKHOUSE_DATABASE }),
  });
}

import { z } from 'zod';
import { clickhouseEnv, MAX_INSERT_ROWS } from '@pushbase/clickhouse';
import { parseBrokers } from '@pushbase/kafka';
import { MAX_ROWS_PER_EVENT } from './project';

/*
 * The projector's settings (`pushbase projector`), one schema parsed once at start. Unset and empty
 * variables both mean "use the default".
 */
const blankToUndefined = (v: unknown): unknown => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const integer = (fallback: number, min: number, max: number) => z.preprocess(blankToUndefined, z.coerce.number().int().min(min).max(max).default(fallback));
const name = (fallback: string, what: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .default(fallback)
      // Kafka's own rule for topic and group names, so a typo fails here and not in the first fetch.
      .refine((v) => /^[A-Za-z0-9._-]{1,249}$/.test(v), `${what} must be 1 to 249 of A-Z a-z 0-9 . _ -`),
  );

/** A pending write holds at most flushRows plus the rows of the event that crossed it; it must fit one atomic insert. */
const MAX_FLUSH_ROWS = MAX_INSERT_ROWS - MAX_ROWS_PER_EVENT;

const schema = z
  .object({
    PUSHBASE_KAFKA_BROKERS: z.preprocess(
      blankToUndefined,
      z
        .string()
        .default('127.0.0.1:9092')
        .transform((list, ctx) => {
          try {
            return parseBrokers(list);
          } catch (e) {
            ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : String(e) });
            return z.NEVER;
          }
        }),
    ),
    PUSHBASE_KAFKA_TOPIC: name('pushbase.dataset-events', 'PUSHBASE_KAFKA_TOPIC'),
    PUSHBASE_PROJECTOR_GROUP: name('pushbase-projector', 'PUSHBASE_PROJECTOR_GROUP'),
    ...clickhouseEnv,
    PUSHBASE_PROJECTOR_MAX_ROWS: integer(1_000_000, 1, Number.MAX_SAFE_INTEGER),
    PUSHBASE_PROJECTOR_FLUSH_ROWS: integer(50_000, 1, MAX_FLUSH_ROWS),
    PUSHBASE_PROJECTOR_FLUSH_MS: integer(1000, 10, 60_000),
  })
  .transform((env) =>
    Object.freeze({
      kafka: Object.freeze({ brokers: env.PUSHBASE_KAFKA_BROKERS, topic: env.PUSHBASE_KAFKA_TOPIC, groupId: env.PUSHBASE_PROJECTOR_GROUP }),
      clickhouse: Object.freeze({ url: env.PUSHBASE_CLICKHOUSE_URL, database: env.PUSHBASE_CLICKHOUSE_DATABASE }),
      maxRows: env.PUSHBASE_PROJECTOR_MAX_ROWS,
      flushRows: env.PUSHBASE_PROJECTOR_FLUSH_ROWS,
      flushIntervalMs: env.PUSHBASE_PROJECTOR_FLUSH_MS,
    }),
  );

export type ProjectorConfig = z.output<typeof schema>;

/** Parses the environment; a bad value throws with every problem listed. */
export function loadProjectorConfig(env: NodeJS.ProcessEnv = process.env): ProjectorConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('\n  ');
    throw new Error(`Invalid configuration:\n  ${problems}`);
  }
  return parsed.data;
}

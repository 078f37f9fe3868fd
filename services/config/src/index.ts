import { z } from 'zod';

/*
 * The pieces every service's config.ts is built from (docs/configuration.md), so a variable is read and
 * checked the same way wherever it is: unset and empty (or blank) both mean "use the default", and a bad
 * environment fails the start with every problem listed.
 */

/** A blank value reads as unset, so `VAR=` in a compose file or a chart keeps the default. */
export const blankToUndefined = (v: unknown): unknown => (typeof v === 'string' && v.trim() === '' ? undefined : v);

/** A whole number from `min` to `max`, `fallback` when unset. */
export const integer = (fallback: number, min: number, max: number) => z.preprocess(blankToUndefined, z.coerce.number().int().min(min).max(max).default(fallback));

/** A string, `fallback` when unset. */
export const text = (fallback: string) => z.preprocess(blankToUndefined, z.string().default(fallback));

/** A name Kafka accepts for a topic, group or client id. */
export const KAFKA_NAME = /^[A-Za-z0-9._-]{1,249}$/;
const kafkaNameProblem = (variable: string): string => `${variable} must be 1 to 249 of A-Z a-z 0-9 . _ -`;

/** A Kafka name, `fallback` when unset. */
export const kafkaName = (variable: string, fallback: string) => text(fallback).refine((v) => KAFKA_NAME.test(v), kafkaNameProblem(variable));

/** A Kafka name, undefined when unset (the caller derives one). */
export const optionalKafkaName = (variable: string) => z.preprocess(blankToUndefined, z.string().refine((v) => KAFKA_NAME.test(v), kafkaNameProblem(variable)).optional());

/** The variables every long-running service reads the same way. */
export const shutdownEnv = {
  // How long SIGTERM waits for requests and calls in flight before cancelling them; 0 cancels at once.
  PUSHBASE_SHUTDOWN_TIMEOUT_MS: integer(10_000, 0, 600_000),
};

/**
 * How long a write's Idempotency-Key is kept (docs/api.md → Retrying a write), read alike by `pushbase serve`
 * and by every distributed service that records or reads keys. At least an hour: an attempt of unknown
 * outcome is settled only after its lease (under a minute), and a key forgotten before that would let its
 * retry be applied a second time. At most a week: every retained key is held in memory and snapshots
 * (embedded) or in Redis (distributed).
 */
export const DEFAULT_IDEMPOTENCY_TTL_HOURS = 24;
export const IDEMPOTENCY_TTL_HOURS_MIN = 1;
export const IDEMPOTENCY_TTL_HOURS_MAX = 168;
export const hoursToMs = (hours: number): number => Math.round(hours * 3_600_000);
export const idempotencyEnv = {
  PUSHBASE_IDEMPOTENCY_TTL_HOURS: z.preprocess(
    blankToUndefined,
    z.coerce
      .number()
      .min(IDEMPOTENCY_TTL_HOURS_MIN, `PUSHBASE_IDEMPOTENCY_TTL_HOURS must be at least ${IDEMPOTENCY_TTL_HOURS_MIN} (hours)`)
      .max(IDEMPOTENCY_TTL_HOURS_MAX, `PUSHBASE_IDEMPOTENCY_TTL_HOURS must be at most ${IDEMPOTENCY_TTL_HOURS_MAX} (hours, a week)`)
      .default(DEFAULT_IDEMPOTENCY_TTL_HOURS),
  ),
};

/** Every problem of a failed parse, one a line. */
export function configProblems(error: z.ZodError): Error {
  const problems = error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('\n  ');
  return new Error(`Invalid configuration:\n  ${problems}`);
}

/** Parses `env` with `schema`; a bad value throws with every problem listed. */
export function parseEnv<S extends z.ZodType>(schema: S, env: unknown): z.output<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw configProblems(parsed.error);
  return parsed.data;
}
export * from './lifecycle';

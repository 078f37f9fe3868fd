import { z } from 'zod';
import { blankToUndefined } from '@pushbase/config';

/*
 * The Redis variables, for every service whose own config schema includes Redis (the projector, replay,
 * the gateway). Unset and empty variables both mean "use the default".
 */

export const redisEnv = {
  PUSHBASE_REDIS_URL: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('redis://127.0.0.1:6379')
      .refine((u) => URL.canParse(u) && /^rediss?:$/.test(new URL(u).protocol), 'PUSHBASE_REDIS_URL must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379'),
  ),
  PUSHBASE_REDIS_PREFIX: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('pushbase:')
      // Letters, digits and . _ - : only, so the prefix is never a glob pattern when keys are scanned.
      .refine((v) => /^[A-Za-z0-9._:-]{1,100}:$/.test(v) && !v.includes('*'), 'PUSHBASE_REDIS_PREFIX must be 1 to 100 of A-Z a-z 0-9 . _ - : ending in ":"'),
  ),
};

/**
 * How long a write's Idempotency-Key is kept (docs/api.md → Retrying a write): every service that records or
 * reads keys. At least an hour: an attempt of unknown outcome is settled only after its lease (under a
 * minute), and a key forgotten before that would let its retry be applied a second time. At most a week:
 * Redis holds every key of the retention.
 */
export const IDEMPOTENCY_TTL_HOURS_MIN = 1;
export const IDEMPOTENCY_TTL_HOURS_MAX = 168;
export const idempotencyEnv = {
  PUSHBASE_IDEMPOTENCY_TTL_HOURS: z.preprocess(
    blankToUndefined,
    z.coerce
      .number()
      .min(IDEMPOTENCY_TTL_HOURS_MIN, `PUSHBASE_IDEMPOTENCY_TTL_HOURS must be at least ${IDEMPOTENCY_TTL_HOURS_MIN} (hours)`)
      .max(IDEMPOTENCY_TTL_HOURS_MAX, `PUSHBASE_IDEMPOTENCY_TTL_HOURS must be at most ${IDEMPOTENCY_TTL_HOURS_MAX} (hours, a week)`)
      .default(24),
  ),
};
export const idempotencyTtlMsOf = (env: { readonly PUSHBASE_IDEMPOTENCY_TTL_HOURS: number }): number => Math.round(env.PUSHBASE_IDEMPOTENCY_TTL_HOURS * 3_600_000);

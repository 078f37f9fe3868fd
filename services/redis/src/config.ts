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

import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RateDecision, RateLimiter } from '@pushbase/contracts';

/**
 * The RateLimiter port over rate-limiter-flexible, whose memory and Redis backends share one interface
 * (the distributed gateway passes a RateLimiterRedis here). A refused request adds nothing that matters:
 * the window does not move, so only requests that were let through decide when the key may go again.
 */
export class FlexibleRateLimiter implements RateLimiter {
  constructor(private readonly limiter: RateLimiterAbstract) {}

  async consume(key: string): Promise<RateDecision> {
    const limit = this.limiter.points;
    try {
      const res = await this.limiter.consume(key, 1);
      return { allowed: true, limit, remaining: res.remainingPoints, resetMs: res.msBeforeNext };
    } catch (e: unknown) {
      if (e instanceof RateLimiterRes) return { allowed: false, limit, remaining: 0, resetMs: e.msBeforeNext };
      throw e;
    }
  }

  /** Whether `key` is already over the limit, without counting a request. */
  async isBlocked(key: string): Promise<RateDecision | undefined> {
    const res = await this.limiter.get(key);
    if (res === null || res.consumedPoints < this.limiter.points) return undefined;
    return { allowed: false, limit: this.limiter.points, remaining: 0, resetMs: res.msBeforeNext };
  }
}

export const memoryRateLimiter = (points: number, durationSeconds: number, keyPrefix: string): FlexibleRateLimiter =>
  new FlexibleRateLimiter(new RateLimiterMemory({ points, duration: durationSeconds, keyPrefix }));

import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { RateDecision, RateLimiter } from '@pushbase/contracts';

/**
 * A fixed-limit limiter over rate-limiter-flexible: the failed-authentication guard per client address.
 * Not the RateLimiter port (whose limit is each account's quota, given per request): rate-limiter-flexible
 * fixes its points per instance. A refused request adds nothing that matters: the window does not move,
 * so only requests that were let through decide when the address may go again.
 */
export class FlexibleRateLimiter {
  constructor(private readonly limiter: RateLimiterAbstract) {}

  async consume(key: string): Promise<RateDecision> {
    const limit = this.limiter.points;
    try {
      const res = await this.limiter.consume(key, 1);
      return { allowed: true, limit, remaining: res.remainingPoints, resetMs: this.resetMs(res) };
    } catch (e: unknown) {
      if (e instanceof RateLimiterRes) return { allowed: false, limit, remaining: 0, resetMs: this.resetMs(e) };
      throw e;
    }
  }

  /** Whether `key` is already over the limit, without counting a request. */
  async isBlocked(key: string): Promise<RateDecision | undefined> {
    const res = await this.limiter.get(key);
    if (res === null || res.consumedPoints < this.limiter.points) return undefined;
    return { allowed: false, limit: this.limiter.points, remaining: 0, resetMs: this.resetMs(res) };
  }

  /**
   * The memory backend ends a window with a timer (monotonic in Node), so a wall-clock step never
   * lengthens a block; but it computes msBeforeNext from Date.now(), so after a step back of an hour it
   * would tell a client to wait an hour (and after a step forward, a negative time). A window never
   * outlasts its configured duration: bound the answer by it.
   */
  private resetMs(res: RateLimiterRes): number {
    const longest = Math.max(this.limiter.duration, this.limiter.blockDuration) * 1000;
    return Math.min(Math.max(res.msBeforeNext, 0), longest);
  }
}

/** Milliseconds from an arbitrary origin that never step backwards or jump with the wall clock. */
export type MonotonicClock = () => number;
export const monotonicNow: MonotonicClock = () => performance.now();

export const memoryRateLimiter = (points: number, durationSeconds: number, keyPrefix: string): FlexibleRateLimiter =>
  new FlexibleRateLimiter(new RateLimiterMemory({ points, duration: durationSeconds, keyPrefix }));

/**
 * The per-key limit of docs/api.md → Limits: `limit` requests in any rolling `windowMs`, refused requests
 * not counted. A sliding log of the last `limit` admitted times per key, because rate-limiter-flexible's
 * fixed window lets twice the limit through across a boundary and rolling-rate-limiter counts refused
 * attempts (a steady retrier stays refused for ever). The Redis twin is services/redis/src/rate-limiter.ts.
 *
 * The clock is monotonic (`performance.now()`; tests pass their own): a wall-clock step would keep a key
 * refused, or empty every window at once.
 */
export class SlidingWindowRateLimiter implements RateLimiter {
  private readonly log = new Map<string, number[]>();
  private lastSweep = 0;

  /** `defaultLimit`: the limit when a caller gives none (the port's callers always give the one in force). */
  constructor(
    private readonly defaultLimit: number,
    private readonly windowMs: number,
    private readonly now: MonotonicClock = monotonicNow,
  ) {}

  consume(key: string, limit: number = this.defaultLimit): Promise<RateDecision> {
    const now = this.now();
    this.sweep(now);
    let times = this.log.get(key);
    if (times === undefined) {
      times = [];
      this.log.set(key, times);
    }
    const horizon = now - this.windowMs;
    let expired = 0;
    while (expired < times.length && (times[expired] as number) <= horizon) expired++;
    if (expired > 0) times.splice(0, expired);
    // A quota lowered since leaves more times than the new limit: the oldest ones decide when it frees up.
    if (times.length >= limit) {
      return Promise.resolve({ allowed: false, limit, remaining: 0, resetMs: (times[times.length - limit] as number) + this.windowMs - now });
    }
    times.push(now);
    return Promise.resolve({
      allowed: true,
      limit,
      remaining: limit - times.length,
      resetMs: (times[0] as number) + this.windowMs - now,
    });
  }

  /** Forgets keys idle for a whole window, at most once a window, so memory follows active keys only. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.windowMs) return;
    this.lastSweep = now;
    for (const [key, times] of this.log) {
      if (times.length === 0 || (times[times.length - 1] as number) <= now - this.windowMs) this.log.delete(key);
    }
  }
}

import { randomUUID } from 'node:crypto';
import type { RateDecision, RateLimiter } from '@pushbase/contracts';
import type { Redis, Result } from 'ioredis';
import { redisError, where } from './connection';
import { checkPrefix, DEFAULT_PREFIX } from './keys';

/*
 * The rolling-window limit shared by every gateway: a sorted set per key holds the times of the requests
 * it allowed within the window. One Lua script trims, counts, decides and records, so concurrent requests
 * from any number of gateways are decided one at a time, exactly. Time is Redis's own (`TIME`, read inside
 * the script), never a gateway's clock, so gateways whose clocks disagree still share one window.
 * Hand-written rather than a library: rate-limiter-flexible's Redis limiters count refused requests too,
 * and the limit here must not (as the embedded SlidingWindowRateLimiter does not).
 */

// KEYS[1] the key's sorted set. ARGV[1] limit, ARGV[2] window in ms, ARGV[3] a member unique to this request.
// Returns {allowed (1|0), remaining, ms until the oldest counted request leaves the window}. Times are whole
// milliseconds of Redis's clock, as the embedded limiter's are of the gateway's. Redis's clock is a wall
// clock: a step back is absorbed by re-stamping later entries to now, so a key waits at most one window.
const CONSUME = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
-- Requests stamped after now were counted before Redis's clock stepped back (NTP, a resumed VM). They
-- still count, but as of now: left in the future they would keep the key blocked for the size of the step.
local future = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
for _, member in ipairs(future) do redis.call('ZADD', KEYS[1], now, member) end
local count = redis.call('ZCARD', KEYS[1])
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if count >= limit then
  return {0, 0, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
local first = now
if count > 0 then first = tonumber(oldest[2]) end
return {1, limit - count - 1, first + window - now}
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseRateConsume(key: string, limit: number, windowMs: number, member: string): Result<[number, number, number], Context>;
  }
}

export interface RedisRateLimiterOptions {
  /** Requests allowed per key within any rolling window. */
  readonly limit?: number;
  readonly windowMs?: number;
  readonly prefix?: string;
}

export class RedisRateLimiter implements RateLimiter {
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly prefix: string;
  /** Sorted-set members must be unique: this limiter's id and a counter make them so across gateways. */
  private readonly instance = randomUUID();
  private sequence = 0;

  constructor(
    private readonly redis: Redis,
    options: RedisRateLimiterOptions = {},
  ) {
    this.limit = options.limit ?? 60;
    this.windowMs = options.windowMs ?? 60_000;
    if (!Number.isInteger(this.limit) || this.limit < 1) throw new Error(`rate limit must be a positive integer, got ${this.limit}`);
    if (!Number.isInteger(this.windowMs) || this.windowMs < 1) throw new Error(`rate window must be a positive integer of ms, got ${this.windowMs}`);
    this.prefix = `${checkPrefix(options.prefix ?? DEFAULT_PREFIX)}rate:`;
    redis.defineCommand('pushbaseRateConsume', { numberOfKeys: 1, lua: CONSUME });
  }

  /** `limit`: the limit in force for this key (its account's quota); the configured one when not given. */
  async consume(key: string, limit: number = this.limit): Promise<RateDecision> {
    const member = `${this.instance}-${this.sequence++}`;
    let answer: [number, number, number];
    try {
      answer = await this.redis.pushbaseRateConsume(this.prefix + key, limit, this.windowMs, member);
    } catch (e) {
      // Unreachable Redis: `unavailable`, which the gateway answers 503 before the request goes anywhere.
      throw redisError(where(this.redis), 'the rate limit', e);
    }
    const [allowed, remaining, resetMs] = answer;
    return { allowed: allowed === 1, limit, remaining, resetMs };
  }
}

import { randomBytes } from 'node:crypto';
import { DomainError } from '@pushbase/domain';
import { redisError, schemaHoldKey, schemaLockNamespace, type Redis } from '@pushbase/redis';
import type { Result } from 'ioredis';

/*
 * A per-account lease in Redis (`<prefix>schema-lock:<account>`) that serialises one account's schema
 * decisions across replicas: SET NX PX takes it, a token-checking script extends or releases it. Hand-written
 * because the token fences the schema service's own scripts (changes.ts); kept outside `<prefix>schema:` so a
 * replay's swap leaves it alone; not taken while replay holds schema changes (schema-hold.ts). Why not a
 * library or Redlock: docs/architecture.md → The schema lease.
 */

/** A lease held: its key and the holder's token. */
export interface AccountLease {
  readonly account: string;
  readonly key: string;
  readonly token: string;
}

export interface RedisAccountLockOptions {
  /** The deployment's key prefix (`pushbase:` by default), as the schema store and the projector use it. */
  readonly prefix: string;
  /**
   * How long a lease lasts unless extended. Must be well above the longest time a holder can spend
   * between two fence checks (an append's timeout): see changes.ts.
   */
  readonly ttlMs: number;
  /** How long acquire() keeps trying before it gives up with `unavailable`. */
  readonly waitMs: number;
}

// KEYS[1] the lease, KEYS[2] the hold; ARGV[1] the token, ARGV[2] the TTL in ms. 1 taken, 0 held by
// another, 2 schema changes on hold.
const ACQUIRE = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then return 1 end
return 0
`;

// KEYS[1] the lease, ARGV[1] the token, ARGV[2] the new TTL in ms. 1 when still held (and extended), else 0.
const EXTEND = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

// KEYS[1] the lease, ARGV[1] the token. Deletes the lease only if it is still the caller's.
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseLeaseAcquire(key: string, hold: string, token: string, ttlMs: number): Result<number, Context>;
    pushbaseLeaseExtend(key: string, token: string, ttlMs: number): Result<number, Context>;
    pushbaseLeaseRelease(key: string, token: string): Result<number, Context>;
  }
}

/** First retry after this long, doubling up to MAX_BACKOFF_MS, with jitter so waiters do not move in step. */
const MIN_BACKOFF_MS = 2;
const MAX_BACKOFF_MS = 50;

export class RedisAccountLock {
  private readonly namespace: string;
  private readonly holdKey: string;

  constructor(
    private readonly redis: Redis,
    private readonly options: RedisAccountLockOptions,
  ) {
    this.namespace = schemaLockNamespace(options.prefix);
    this.holdKey = schemaHoldKey(options.prefix);
    redis.defineCommand('pushbaseLeaseAcquire', { numberOfKeys: 2, lua: ACQUIRE });
    redis.defineCommand('pushbaseLeaseExtend', { numberOfKeys: 1, lua: EXTEND });
    redis.defineCommand('pushbaseLeaseRelease', { numberOfKeys: 1, lua: RELEASE });
  }

  get ttlMs(): number {
    return this.options.ttlMs;
  }

  keyOf(account: string): string {
    return `${this.namespace}${account}`;
  }

  /** Takes the lease if it is free now; undefined when another holder has it or changes are on hold. */
  async tryAcquire(account: string): Promise<AccountLease | undefined> {
    const taken = await this.attempt(account);
    return typeof taken === 'string' ? undefined : taken;
  }

  private async attempt(account: string): Promise<AccountLease | 'busy' | 'held'> {
    const lease = { account, key: this.keyOf(account), token: randomBytes(16).toString('hex') };
    let taken: number;
    try {
      taken = await this.redis.pushbaseLeaseAcquire(lease.key, this.holdKey, lease.token, this.options.ttlMs);
    } catch (e) {
      // The SET may have run with its answer lost (a command timeout): give the lease back if it is ours,
      // or the account would wait a whole TTL for a lease nobody holds.
      void this.release(lease).catch(() => undefined);
      throw redisError(this.where(), `taking the schema lock of account ${JSON.stringify(account)}`, e);
    }
    return taken === 1 ? lease : taken === 2 ? 'held' : 'busy';
  }

  /**
   * Waits for the lease until `deadline` (epoch ms; by default `waitMs` from now). Giving up is
   * `unavailable`: nothing was decided, so nothing will be stored. (Redis has no blocking SET NX; a short
   * jittered poll is cheap next to the decision it guards, and the caller queues its own requests per
   * account before they get here, so few poll at once.)
   */
  async acquire(account: string, deadline: number = Date.now() + this.options.waitMs): Promise<AccountLease> {
    let backoff = MIN_BACKOFF_MS;
    let last: 'busy' | 'held' = 'busy';
    for (;;) {
      if (Date.now() >= deadline) {
        throw new DomainError(
          'unavailable',
          last === 'held' ? 'Schema changes are held while `pushbase replay` swaps the rebuilt state in; nothing was changed' : `Other schema changes of this account held it for over ${this.options.waitMs} ms; nothing was changed`,
        );
      }
      const lease = await this.attempt(account);
      if (typeof lease !== 'string') return lease;
      last = lease;
      await new Promise((resolve) => setTimeout(resolve, Math.min(backoff / 2 + Math.random() * backoff, Math.max(0, deadline - Date.now()))));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  get waitMs(): number {
    return this.options.waitMs;
  }

  /** True, with the lease's expiry pushed to a full TTL from now, while the lease is still the caller's. */
  async extend(lease: AccountLease): Promise<boolean> {
    try {
      return (await this.redis.pushbaseLeaseExtend(lease.key, lease.token, this.options.ttlMs)) === 1;
    } catch (e) {
      throw redisError(this.where(), 'checking the schema lock', e);
    }
  }

  /** Frees the lease if it is still the caller's (one that expired and was taken since is left alone). */
  async release(lease: AccountLease): Promise<void> {
    try {
      await this.redis.pushbaseLeaseRelease(lease.key, lease.token);
    } catch (e) {
      throw redisError(this.where(), 'releasing the schema lock', e);
    }
  }

  private where(): string {
    return `${this.redis.options.host ?? '?'}:${this.redis.options.port ?? '?'}`;
  }
}

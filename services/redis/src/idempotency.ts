import { randomUUID } from 'node:crypto';
import type { IdempotencyLedger, KeyClaim, KeyOutcome } from '@pushbase/contracts';
import { appliedKeyOf, DomainError, keyInFlight, type AppliedKey, type DatasetEvent } from '@pushbase/domain';
import type { ChainableCommander, Redis, Result } from 'ioredis';
import { redisError } from './connection';
import { checkPrefix, DEFAULT_PREFIX } from './keys';

/*
 * The distributed ledger of Idempotency-Keys (the rules: services/app/src/idempotency.ts). An applied record
 * is written by the attempt once acknowledged and again by whatever folds the log (SET NX, first wins), so a
 * writer that died in between loses nothing. An attempt holds its key with a lease as long as its event could
 * land; an unknown one is settled, not guessed, once the lease is over and the log is folded that far. Keys
 * and reasoning: docs/architecture.md → The Idempotency-Key ledger.
 */

export interface RedisIdempotencyOptions {
  readonly prefix?: string;
  /** The configured Redis URL, for messages (its password redacted). */
  readonly url?: string;
  readonly ttlMs: number;
  /** How long an attempt may still be stored after it started: the writer's deadline plus a request's timeout. */
  readonly leaseMs: number;
  /**
   * How far the log has been folded into Redis (services/kafka/src/projection-progress.ts): `end` is where
   * the log holding the dataset's stream ends now; `projected` whether the fold (the projector's committed
   * offset) has reached such an end — then the applied records are complete up to it.
   */
  readonly progress: {
    end(account: string, dataset: string): Promise<{ readonly partition: number; readonly offset: number }>;
    projected(end: { readonly partition: number; readonly offset: number }): Promise<boolean>;
  };
  readonly clock?: { now(): number };
}

interface Attempt {
  readonly owner: string;
  readonly dataset: string;
  readonly state: 'running' | 'unknown';
  readonly leaseUntil: number;
  /** Where the log ended when a request first found the lease over: the attempt's event, if stored, is below. */
  readonly end?: { readonly partition: number; readonly offset: number };
}

// KEYS[1] the attempt. ARGV[1] the value the caller holds; ARGV[2] the new value, or '' to delete.
const REPLACE_IF_HELD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
return 1
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseIdemReplaceIfHeld(attempt: string, held: string, next: string): Result<number, Context>;
  }
}

const slot = (account: string, key: string): string => `${account.length}:${account}:${key}`;
export const appliedKeyName = (prefix: string, account: string, key: string): string => `${checkPrefix(prefix)}idem:applied:${slot(account, key)}`;
const attemptKeyName = (prefix: string, account: string, key: string): string => `${checkPrefix(prefix)}idem:attempt:${slot(account, key)}`;

/** Adds to `pipeline` the applied records of the keyed events among `events` still retained at `now` (first one wins). */
export function recordAppliedKeys(pipeline: ChainableCommander, prefix: string, events: readonly DatasetEvent[], ttlMs: number, now: number): void {
  for (const e of events) {
    // Without a create's definition (appliedKeyOf): its repeat carries the same body and parses it again.
    const applied = appliedKeyOf(e);
    if (applied === undefined || e.at + ttlMs <= now) continue;
    pipeline.set(appliedKeyName(prefix, e.account, applied.key), JSON.stringify(applied), 'PXAT', e.at + ttlMs, 'NX');
  }
}

export class RedisIdempotencyLedger implements IdempotencyLedger {
  private readonly prefix: string;
  private readonly clock: { now(): number };

  constructor(
    private readonly redis: Redis,
    private readonly options: RedisIdempotencyOptions,
  ) {
    this.prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX);
    this.clock = options.clock ?? { now: () => Date.now() };
    redis.defineCommand('pushbaseIdemReplaceIfHeld', { numberOfKeys: 1, lua: REPLACE_IF_HELD });
  }

  async applied(account: string, key: string): Promise<AppliedKey | undefined> {
    const appliedName = appliedKeyName(this.prefix, account, key);
    const attemptName = attemptKeyName(this.prefix, account, key);
    const [applied, held] = await this.run('reading an Idempotency-Key', () => this.redis.mget(appliedName, attemptName));
    if (applied !== null && applied !== undefined) return JSON.parse(applied) as AppliedKey;
    if (held === null || held === undefined) return undefined;
    const attempt = JSON.parse(held) as Attempt;
    if (this.clock.now() < attempt.leaseUntil) {
      // A live attempt: the caller's claim is refused (409). An unknown one may still land: not yet settled.
      if (attempt.state === 'running') return undefined;
      throw keyInFlight(key);
    }
    // The lease is over: the attempt's event is in the log or never will be. The log's end is read once and
    // kept with the attempt (compare-and-set: the attempt may have renewed its lease at its append meanwhile,
    // and from then on it is fenced off); settled once Redis holds the log's fold up to that end.
    let current = held;
    let end = attempt.end;
    if (end === undefined) {
      end = await this.options.progress.end(account, attempt.dataset);
      const next = JSON.stringify({ ...attempt, end } satisfies Attempt);
      if ((await this.run('settling an Idempotency-Key', () => this.redis.pushbaseIdemReplaceIfHeld(attemptName, held, next))) !== 1) throw keyInFlight(key);
      current = next;
    }
    if (!(await this.options.progress.projected(end))) throw keyInFlight(key);
    const settled = await this.run('reading an Idempotency-Key', () => this.redis.get(appliedName));
    if (settled !== null) return JSON.parse(settled) as AppliedKey;
    // Never stored: the key is free again.
    await this.run('releasing an Idempotency-Key', () => this.redis.pushbaseIdemReplaceIfHeld(attemptName, current, ''));
    return undefined;
  }

  async claim(account: string, key: string, dataset: string): Promise<KeyClaim | undefined> {
    const attemptName = attemptKeyName(this.prefix, account, key);
    const now = this.clock.now();
    let held = JSON.stringify({ owner: randomUUID(), dataset, state: 'running', leaseUntil: now + this.options.leaseMs } satisfies Attempt);
    // Kept past the lease until settled, but never longer than the key itself.
    const took = await this.run('claiming an Idempotency-Key', () => this.redis.set(attemptName, held, 'PX', Math.max(this.options.ttlMs, this.options.leaseMs), 'NX'));
    if (took !== 'OK') return undefined;
    return {
      hold: async (): Promise<void> => {
        // Compare-and-set on the whole record: a request that found the lease over and began settling it
        // changed or deleted the record, and from then on this attempt must not reach the log.
        const next = JSON.stringify({ ...(JSON.parse(held) as Attempt), leaseUntil: this.clock.now() + this.options.leaseMs } satisfies Attempt);
        const kept = await this.run('holding an Idempotency-Key', () => this.redis.pushbaseIdemReplaceIfHeld(attemptName, held, next));
        if (kept !== 1) throw new DomainError('unavailable', `The Idempotency-Key ${JSON.stringify(key)} was taken over while this attempt waited; nothing was stored, retry the request`);
        held = next;
      },
      settle: async (outcome: KeyOutcome): Promise<void> => {
        if (outcome === 'unknown') {
          const next = JSON.stringify({ ...(JSON.parse(held) as Attempt), state: 'unknown' } satisfies Attempt);
          if ((await this.redis.pushbaseIdemReplaceIfHeld(attemptName, held, next)) === 1) held = next;
          return;
        }
        if (outcome !== 'not_applied') {
          const { applied } = outcome;
          await this.redis.set(appliedKeyName(this.prefix, account, key), JSON.stringify(applied), 'PXAT', applied.at + this.options.ttlMs, 'NX');
        }
        await this.redis.pushbaseIdemReplaceIfHeld(attemptName, held, '');
      },
    };
  }

  private async run<T>(what: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (e) {
      throw redisError(this.options.url ?? 'redis://', what, e);
    }
  }
}

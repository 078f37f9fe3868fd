import { performance } from 'node:perf_hooks';
import pLimit, { type Limit } from 'p-limit';
import { HttpError } from './errors';
import { BODY_LIMIT_BYTES } from './uploads';

/*
 * One tenant's share of this process: at most `concurrency` of an account's requests are worked on at once,
 * the rest queue in arrival order up to `maxQueued`, so one tenant with many keys cannot make everyone wait
 * behind all of its work. Reads also draw on a budget of read time per second, charged after each read (so
 * it runs into debt, which token-bucket libraries do not model), and writes on one of body bytes per second
 * (a body may be larger than a second's worth: debt again). Why: docs/architecture.md → A tenant's share of
 * a process.
 */

export interface AccountShare {
  /** Requests of one account worked on at once. */
  readonly concurrency: number;
  /** Requests of one account waiting for a turn; beyond it, 429. */
  readonly maxQueued: number;
  /** Milliseconds of read work one account may use per second, on average (a second's worth may be spent at once); 0: no bound. */
  readonly readMsPerSecond: number;
  /** Bytes of write bodies one account may send per second, on average; 0: no bound. */
  readonly writeBytesPerSecond: number;
  /** Bytes of write bodies an idle account may send at once (at least a second's worth). */
  readonly writeBurstBytes: number;
}

// Two turns: fewer than the write workers of a 2-core server (3), so one account never holds them all.
// Half a second of reads a second: a dashboard's widgets refreshing together stay well inside it.
// Write bytes: the measured choice is in docs/operations.md → Many tenants. An idle account may send one
// body at its limit at once: only the sustained rate protects the neighbours.
const WRITE_BYTES_PER_SECOND = 1024 * 1024;
export const DEFAULT_ACCOUNT_SHARE: AccountShare = Object.freeze({ concurrency: 2, maxQueued: 64, readMsPerSecond: 500, writeBytesPerSecond: WRITE_BYTES_PER_SECOND, writeBurstBytes: BODY_LIMIT_BYTES });

/** The clock the budget is kept on (injected in tests). */
export interface GateClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}
const realClock: GateClock = { now: () => performance.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) };

/** An account's budget: `level` left at time `at` (negative: in debt). */
interface Budget {
  level: number;
  at: number;
}

// Budgets of idle accounts are dropped once this many are kept (a full one and a dropped one are alike).
const BUDGETS_KEPT = 10_000;

/** Per account, `perSecond` of something (read milliseconds, body bytes), up to `burst` of which (at least a second's worth) may be spent at once. */
class Budgets {
  private readonly kept = new Map<string, Budget>();
  private readonly most: number;

  constructor(
    readonly perSecond: number,
    burst: number,
    private readonly clock: GateClock,
    private readonly busy: (account: string) => boolean,
  ) {
    this.most = Math.max(perSecond, burst);
  }

  of(account: string): Budget {
    let budget = this.kept.get(account);
    if (budget === undefined) {
      if (this.kept.size >= BUDGETS_KEPT) this.dropRefilled();
      budget = { level: this.most, at: this.clock.now() };
      this.kept.set(account, budget);
    }
    return budget;
  }

  /** Waits until `budget` is out of debt, looking again at least every second. */
  async outOfDebt(budget: Budget): Promise<void> {
    for (let level = this.refill(budget); level <= 0; level = this.refill(budget)) {
      await this.clock.sleep(Math.min(1000, Math.ceil((-level * 1000) / this.perSecond) + 1));
    }
  }

  charge(budget: Budget, amount: number): void {
    this.refill(budget);
    budget.level -= amount;
  }

  /** Brings `budget` up to now; returns its level. */
  private refill(budget: Budget): number {
    const now = this.clock.now();
    budget.level = Math.min(this.most, budget.level + ((now - budget.at) * this.perSecond) / 1000);
    budget.at = now;
    return budget.level;
  }

  /** Forgets the budgets that have refilled by now, and those of idle accounts if that is not enough. */
  private dropRefilled(): void {
    for (const [account, b] of this.kept) if (this.refill(b) >= this.most) this.kept.delete(account);
    if (this.kept.size < BUDGETS_KEPT) return;
    for (const account of this.kept.keys()) if (!this.busy(account)) this.kept.delete(account);
  }
}

export class AccountGate {
  /** Per account with requests in progress or waiting: its queue, and how many it holds (p-limit counts lazily). */
  private readonly accountsNow = new Map<string, { readonly limit: Limit; admitted: number }>();
  private readonly reads: Budgets | undefined;
  private readonly writes: Budgets | undefined;

  constructor(
    readonly share: AccountShare = DEFAULT_ACCOUNT_SHARE,
    private readonly clock: GateClock = realClock,
  ) {
    const busy = (account: string): boolean => this.accountsNow.has(account);
    this.reads = share.readMsPerSecond > 0 ? new Budgets(share.readMsPerSecond, 0, clock, busy) : undefined;
    this.writes = share.writeBytesPerSecond > 0 ? new Budgets(share.writeBytesPerSecond, share.writeBurstBytes, clock, busy) : undefined;
  }

  /**
   * Runs `work` in `account`'s turn; refuses at once when too many of its requests already wait. A `read`
   * first waits until the account's read budget is out of debt, and is charged its time; a write waits until
   * its write budget is, and is charged its body's `bytes`. Both wait holding no turn.
   */
  async run<T>(account: string, work: () => Promise<T>, kind: 'read' | 'write' = 'write', bytes = 0): Promise<T> {
    let entry = this.accountsNow.get(account);
    if (entry === undefined) {
      entry = { limit: pLimit(this.share.concurrency), admitted: 0 };
      this.accountsNow.set(account, entry);
    }
    if (entry.admitted >= this.share.concurrency + this.share.maxQueued) {
      throw new HttpError(429, 'This account has too many requests in progress at once; wait for some to finish', 'account_busy', { 'Retry-After': '1' });
    }
    entry.admitted++;
    try {
      if (kind === 'read' && this.reads !== undefined) {
        const budget = this.reads.of(account);
        await this.reads.outOfDebt(budget);
        return await entry.limit(() => this.charged(budget, work));
      }
      if (kind === 'write' && this.writes !== undefined) {
        // A bodiless write (a delete) costs nothing, but waits like the others while the account is in debt.
        const budget = this.writes.of(account);
        await this.writes.outOfDebt(budget);
        if (bytes > 0) this.writes.charge(budget, bytes);
      }
      return await entry.limit(work);
    } finally {
      // Idle accounts are forgotten, so the map holds only those with requests in progress.
      if (--entry.admitted === 0 && this.accountsNow.get(account) === entry) this.accountsNow.delete(account);
    }
  }

  /** Runs a read, then charges its time (a failed one at most a second's worth: an outage must not lock accounts out). */
  private async charged<T>(budget: Budget, work: () => Promise<T>): Promise<T> {
    const started = this.clock.now();
    let failed = true;
    try {
      const result = await work();
      failed = false;
      return result;
    } finally {
      const took = this.clock.now() - started;
      this.reads?.charge(budget, failed ? Math.min(this.share.readMsPerSecond, took) : took);
    }
  }

  /** Accounts with requests in progress or waiting (for tests). */
  get accounts(): number {
    return this.accountsNow.size;
  }
}

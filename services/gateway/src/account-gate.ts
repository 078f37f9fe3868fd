import { performance } from 'node:perf_hooks';
import pLimit, { type Limit } from 'p-limit';
import { HttpError } from './errors';

/*
 * One tenant's share of this process: at most `concurrency` of an account's requests are worked on at once,
 * the rest queue in arrival order up to `maxQueued`, so one tenant with many keys cannot make everyone wait
 * behind all of its work. Reads also draw on a budget of read time per second, charged after each read (so
 * it runs into debt, which token-bucket libraries do not model). Why: docs/architecture.md → A tenant's
 * share of a process.
 */

export interface AccountShare {
  /** Requests of one account worked on at once. */
  readonly concurrency: number;
  /** Requests of one account waiting for a turn; beyond it, 429. */
  readonly maxQueued: number;
  /** Milliseconds of read work one account may use per second, on average (a second's worth may be spent at once); 0: no bound. */
  readonly readMsPerSecond: number;
}

// Two turns: fewer than the write workers of a 2-core server (3), so one account never holds them all.
// Half a second of reads a second: a dashboard's widgets refreshing together stay well inside it.
export const DEFAULT_ACCOUNT_SHARE: AccountShare = Object.freeze({ concurrency: 2, maxQueued: 64, readMsPerSecond: 500 });

/** The clock the budget is kept on (injected in tests). */
export interface GateClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}
const realClock: GateClock = { now: () => performance.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) };

/** An account's read budget: `level` milliseconds left at time `at` (negative: in debt). */
interface Budget {
  level: number;
  at: number;
}

// Budgets of idle accounts are dropped once this many are kept (a full one and a dropped one are alike).
const BUDGETS_KEPT = 10_000;

export class AccountGate {
  /** Per account with requests in progress or waiting: its queue, and how many it holds (p-limit counts lazily). */
  private readonly accountsNow = new Map<string, { readonly limit: Limit; admitted: number }>();
  private readonly budgets = new Map<string, Budget>();

  constructor(
    readonly share: AccountShare = DEFAULT_ACCOUNT_SHARE,
    private readonly clock: GateClock = realClock,
  ) {}

  /**
   * Runs `work` in `account`'s turn; refuses at once when too many of its requests already wait. A `read`
   * first waits until the account's read budget is out of debt, and is charged its time.
   */
  async run<T>(account: string, work: () => Promise<T>, kind: 'read' | 'write' = 'write'): Promise<T> {
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
      if (kind === 'write' || this.share.readMsPerSecond === 0) return await entry.limit(work);
      const budget = this.budgetOf(account);
      await this.outOfDebt(budget);
      return await entry.limit(() => this.charged(budget, work));
    } finally {
      // Idle accounts are forgotten, so the map holds only those with requests in progress.
      if (--entry.admitted === 0 && this.accountsNow.get(account) === entry) this.accountsNow.delete(account);
    }
  }

  /** Brings `budget` up to now; returns its level. */
  private refill(budget: Budget): number {
    const now = this.clock.now();
    budget.level = Math.min(this.share.readMsPerSecond, budget.level + ((now - budget.at) * this.share.readMsPerSecond) / 1000);
    budget.at = now;
    return budget.level;
  }

  private async outOfDebt(budget: Budget): Promise<void> {
    for (let level = this.refill(budget); level <= 0; level = this.refill(budget)) {
      await this.clock.sleep(Math.ceil((-level * 1000) / this.share.readMsPerSecond) + 1);
    }
  }

  private async charged<T>(budget: Budget, work: () => Promise<T>): Promise<T> {
    const started = this.clock.now();
    let failed = true;
    try {
      const result = await work();
      failed = false;
      return result;
    } finally {
      const took = this.clock.now() - started;
      this.refill(budget);
      budget.level -= failed ? Math.min(this.share.readMsPerSecond, took) : took;
    }
  }

  private budgetOf(account: string): Budget {
    let budget = this.budgets.get(account);
    if (budget === undefined) {
      if (this.budgets.size >= BUDGETS_KEPT) this.dropRefilled();
      budget = { level: this.share.readMsPerSecond, at: this.clock.now() };
      this.budgets.set(account, budget);
    }
    return budget;
  }

  /** Forgets the budgets that have refilled by now, and those of idle accounts if that is not enough. */
  private dropRefilled(): void {
    for (const [account, b] of this.budgets) if (this.refill(b) >= this.share.readMsPerSecond) this.budgets.delete(account);
    if (this.budgets.size < BUDGETS_KEPT) return;
    for (const account of this.budgets.keys()) if (!this.accountsNow.has(account)) this.budgets.delete(account);
  }

  /** Accounts with requests in progress or waiting (for tests). */
  get accounts(): number {
    return this.accountsNow.size;
  }
}

import pLimit, { type Limit } from 'p-limit';
import { HttpError } from './errors';

/*
 * One tenant's share of this process: at most `concurrency` of an account's requests are worked on at
 * once (parsing and validating a body, deciding a write, computing a read), the rest wait their turn in
 * arrival order, and beyond `maxQueued` waiting ones it is told to slow down. Without it a tenant with many
 * keys (each within its rate limit) fills the event loop, the write workers and the store's connections,
 * and every other tenant's request waits behind all of its work; with it, behind at most its share.
 */

export interface AccountShare {
  /** Requests of one account worked on at once. */
  readonly concurrency: number;
  /** Requests of one account waiting for a turn; beyond it, 429. */
  readonly maxQueued: number;
}

// Two: fewer than the write workers of a 2-core server (3), so one account never holds them all.
export const DEFAULT_ACCOUNT_SHARE: AccountShare = Object.freeze({ concurrency: 2, maxQueued: 64 });

export class AccountGate {
  /** Per account with requests in progress or waiting: its queue, and how many it holds (p-limit counts lazily). */
  private readonly accountsNow = new Map<string, { readonly limit: Limit; admitted: number }>();

  constructor(readonly share: AccountShare = DEFAULT_ACCOUNT_SHARE) {}

  /** Runs `work` in `account`'s turn; refuses at once when too many of its requests already wait. */
  async run<T>(account: string, work: () => Promise<T>): Promise<T> {
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
      return await entry.limit(work);
    } finally {
      // Idle accounts are forgotten, so the map holds only those with requests in progress.
      if (--entry.admitted === 0 && this.accountsNow.get(account) === entry) this.accountsNow.delete(account);
    }
  }

  /** Accounts with requests in progress or waiting (for tests). */
  get accounts(): number {
    return this.accountsNow.size;
  }
}

/*
 * Heavy readers yield to light ones. ClickHouse pauses a running query, between blocks, while a query of
 * higher priority (a lower `priority` number; 0 takes no part) runs. So each read goes out with a priority
 * from its account's recent use of ClickHouse: the time its reads took, decayed with a half-life of a few
 * seconds. An account under `heavyMsPerSecond` reads at priority 1; one above it at 2, so it pauses while a
 * lighter account's read runs and runs at full speed when nothing lighter does (a priority costs nothing
 * alone). The projector's loads and inserts send none and never wait.
 *
 * Per process: each gateway judges by the reads it sent, which is what a tenant at the read limit sends to
 * every gateway alike. docs/operations.md (Many tenants on one deployment) has the measurements.
 */

export interface ReadSharesOptions {
  /** Reads slower than this, per second of wall time, make an account heavy. Default 250 ms/s. */
  readonly heavyMsPerSecond?: number;
  /** How fast past use is forgotten. Default 5000 ms. */
  readonly halfLifeMs?: number;
  readonly now?: () => number;
}

interface Use {
  /** Decayed milliseconds of reads, as of `at`. */
  ms: number;
  at: number;
}

/** Above this many accounts, the ones whose use has decayed to nothing are dropped on the next record. */
const PRUNE_ABOVE = 1000;

export class ReadShares {
  private readonly uses = new Map<string, Use>();
  private readonly heavy: number;
  private readonly halfLifeMs: number;
  private readonly now: () => number;

  constructor(options: ReadSharesOptions = {}) {
    this.halfLifeMs = options.halfLifeMs ?? 5000;
    // The decayed sum of a steady rate r ms/s settles at r × halfLife / ln 2 / 1000.
    this.heavy = ((options.heavyMsPerSecond ?? 250) * this.halfLifeMs) / Math.LN2 / 1000;
    this.now = options.now ?? Date.now;
  }

  /** The `priority` setting for this account's next read. */
  priorityOf(account: string): 1 | 2 {
    return this.decayed(account, this.now()) > this.heavy ? 2 : 1;
  }

  /** Counts a read of `ms` milliseconds that ended now. */
  record(account: string, ms: number): void {
    const t = this.now();
    this.uses.set(account, { ms: this.decayed(account, t) + ms, at: t });
    if (this.uses.size > PRUNE_ABOVE) {
      for (const [name] of this.uses) if (this.decayed(name, t) < 1) this.uses.delete(name);
    }
  }

  private decayed(account: string, t: number): number {
    const use = this.uses.get(account);
    return use === undefined ? 0 : use.ms * 2 ** (-(t - use.at) / this.halfLifeMs);
  }
}

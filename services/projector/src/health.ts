import type { ProbeAnswer } from '@pushbase/metrics';

/*
 * The projector's liveness: a partition with lag whose committed offset (Kafka's own account, read by an
 * admin client) has not moved for `stallMs` is stalled, and /healthz answers 503 so that Kubernetes
 * restarts the process; nothing is lost. Waiting for the store, no lag, or Kafka away is not a stall. Why:
 * docs/architecture.md → The projector's liveness.
 */

export interface PartitionProgress {
  readonly partition: number;
  /** The group's committed offset (the next to read), or the partition's start when none is committed. */
  readonly committed: number;
  /** The partition's end: the offset the next event will get. */
  readonly end: number;
}

interface Tracked {
  committed: number;
  end: number;
  movedAt: number;
}

export class ProgressWatch {
  private readonly partitions = new Map<number, Tracked>();
  private lastLookFailed = false;

  constructor(
    private readonly stallMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * One look at the partitions this member holds now. `waiting`: the projector is waiting for its store
   * (paused while it retries), which is not a stall.
   */
  observe(held: readonly PartitionProgress[], waiting: boolean): void {
    const t = this.now();
    const seen = new Set<number>();
    for (const { partition, committed, end } of held) {
      seen.add(partition);
      const before = this.partitions.get(partition);
      const moved = before === undefined || committed > before.committed || committed >= end || waiting;
      this.partitions.set(partition, { committed, end, movedAt: moved ? t : before.movedAt });
    }
    for (const partition of [...this.partitions.keys()]) if (!seen.has(partition)) this.partitions.delete(partition);
    this.lastLookFailed = false;
  }

  /** Kafka could not be asked: no verdict until it can. */
  lookFailed(): void {
    this.lastLookFailed = true;
  }

  /** The /healthz answer: 503 with the stalled partitions (numbers and lag only) once any is. */
  verdict(): ProbeAnswer {
    if (this.lastLookFailed) return { ok: true, body: { status: 'unknown', reason: 'kafka_unreachable' } };
    const t = this.now();
    const stalled = [...this.partitions]
      .filter(([, p]) => p.end > p.committed && t - p.movedAt >= this.stallMs)
      .map(([partition, p]) => ({ partition, lag: p.end - p.committed, stalled_seconds: Math.floor((t - p.movedAt) / 1000) }))
      .sort((a, b) => a.partition - b.partition);
    return stalled.length === 0 ? { ok: true, body: { status: 'ok' } } : { ok: false, body: { status: 'stalled', partitions: stalled } };
  }
}

/**
 * Looks every `everyMs` (one look at a time; a look that hangs holds the next back, and the verdict stays
 * what the last look saw). Returns the function that stops it.
 */
export function startProgressLooks(options: {
  readonly watch: ProgressWatch;
  /** The partitions this member holds, with their committed offsets and ends, from Kafka. */
  readonly read: () => Promise<readonly PartitionProgress[]>;
  readonly waiting: () => boolean;
  readonly everyMs: number;
}): () => void {
  let looking = false;
  const look = (): void => {
    if (looking) return;
    looking = true;
    const waiting = options.waiting();
    options
      .read()
      .then(
        (held) => options.watch.observe(held, waiting || options.waiting()),
        () => options.watch.lookFailed(),
      )
      .finally(() => {
        looking = false;
      });
  };
  look();
  const timer = setInterval(look, options.everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

import type { ProbeAnswer } from '@pushbase/metrics';

/*
 * The projector's liveness. It serves no API, so nothing else notices a member that holds partitions and
 * stopped folding them: a fetch loop, a write or a commit that never returns. What counts is Kafka's own
 * account of it, the group's committed offset against the partition's end, read by an admin client beside
 * the consumer: a partition with lag whose committed offset has not moved for `stallMs` is stalled, and the
 * process answers 503 on /healthz so that Kubernetes restarts it (its partitions go to another member, or
 * to itself again, from the last commit: nothing is lost).
 *
 * Not stalled: a member that waits for an unavailable store (it has paused its partitions, retries with
 * backoff and says so in its log and metrics; a restart would not bring ClickHouse back), a member whose
 * lag is zero, and a member whose last look at Kafka failed (Kafka away: the consumer's own retries and
 * crash handling deal with that). The clock of each partition starts again when it moves, when it catches
 * up, while the store is awaited, and when the partition is (re)assigned.
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

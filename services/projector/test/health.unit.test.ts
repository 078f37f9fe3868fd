import { ProgressWatch, startProgressLooks, type PartitionProgress } from '../src/health';

const STALL = 60_000;

function watchAt(): { watch: ProgressWatch; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { watch: new ProgressWatch(STALL, () => t), advance: (ms) => (t += ms) };
}
const at = (partition: number, committed: number, end: number): PartitionProgress => ({ partition, committed, end });

describe('ProgressWatch', () => {
  it('answers stalled once a partition with lag has not moved for the stall time, with its lag', () => {
    const { watch, advance } = watchAt();
    watch.observe([at(0, 10, 50), at(1, 7, 7)], false);
    advance(STALL - 1);
    watch.observe([at(0, 10, 50), at(1, 7, 7)], false);
    expect(watch.verdict()).toEqual({ ok: true, body: { status: 'ok' } });
    advance(1);
    expect(watch.verdict()).toEqual({ ok: false, body: { status: 'stalled', partitions: [{ partition: 0, lag: 40, stalled_seconds: 60 }] } });
  });

  it('restarts a partition clock when its committed offset moves, when it catches up, and while the store is awaited', () => {
    const { watch, advance } = watchAt();
    watch.observe([at(0, 10, 50)], false);
    advance(STALL - 1);
    watch.observe([at(0, 11, 50)], false); // moved
    advance(STALL - 1);
    expect(watch.verdict().ok).toBe(true);
    watch.observe([at(0, 50, 50)], false); // caught up
    advance(STALL - 1);
    watch.observe([at(0, 50, 90)], false); // new events, nothing committed yet
    expect(watch.verdict().ok).toBe(true);
    advance(1);
    expect(watch.verdict().ok).toBe(false); // no progress since it last had no lag
    watch.observe([at(0, 50, 90)], true); // the projector waits for its store
    expect(watch.verdict().ok).toBe(true);
    advance(STALL);
    watch.observe([at(0, 50, 90)], false);
    expect(watch.verdict().ok).toBe(false);
  });

  it('forgets partitions it no longer holds and starts a new one fresh', () => {
    const { watch, advance } = watchAt();
    watch.observe([at(0, 10, 50)], false);
    advance(STALL);
    expect(watch.verdict().ok).toBe(false);
    watch.observe([at(1, 3, 9)], false); // rebalanced: partition 0 went elsewhere
    expect(watch.verdict()).toEqual({ ok: true, body: { status: 'ok' } });
    advance(STALL);
    expect(watch.verdict()).toEqual({ ok: false, body: { status: 'stalled', partitions: [{ partition: 1, lag: 6, stalled_seconds: 60 }] } });
    watch.observe([], false);
    expect(watch.verdict().ok).toBe(true);
  });

  it('gives no verdict while Kafka cannot be asked, and judges again from the next look', () => {
    const { watch, advance } = watchAt();
    watch.observe([at(0, 10, 50)], false);
    advance(STALL);
    watch.lookFailed();
    expect(watch.verdict()).toEqual({ ok: true, body: { status: 'unknown', reason: 'kafka_unreachable' } });
    watch.observe([at(0, 10, 50)], false);
    expect(watch.verdict().ok).toBe(false);
  });
});

describe('startProgressLooks', () => {
  it('looks at once and then on its interval, one look at a time, and records a failed look', async () => {
    const { watch } = watchAt();
    const answers: (() => Promise<readonly PartitionProgress[]>)[] = [];
    let calls = 0;
    let release: (() => void) | undefined;
    const read = (): Promise<readonly PartitionProgress[]> => {
      calls++;
      const next = answers.shift();
      if (next !== undefined) return next();
      return new Promise((resolve) => (release = () => resolve([])));
    };
    answers.push(() => Promise.reject(new Error('broker down')));
    jest.useFakeTimers();
    const stop = startProgressLooks({ watch, read, waiting: () => false, everyMs: 20 });
    try {
      await jest.advanceTimersByTimeAsync(5);
      expect(calls).toBe(1);
      expect(watch.verdict().body).toEqual({ status: 'unknown', reason: 'kafka_unreachable' });
      // The second look hangs: no third one starts until it answers.
      await jest.advanceTimersByTimeAsync(100);
      expect(calls).toBe(2);
      release?.();
      await jest.advanceTimersByTimeAsync(20);
      expect(calls).toBe(3);
      expect(watch.verdict().body).toEqual({ status: 'ok' });
    } finally {
      stop();
      jest.useRealTimers();
    }
  });
});

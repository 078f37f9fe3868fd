/*
 * The projector's loop with a fake consumer and the memory store: what it writes, when it commits, how it
 * behaves while the store is down, what a revocation and the memory bound drop. No Kafka, no ClickHouse.
 */
import { DomainError, fold, recordsOf, type DatasetEvent } from '@pushbase/domain';
import type { PendingRows, ProjectedHead, ProjectedRow, StreamPosition } from '@pushbase/contracts';
import type { BatchControl, CommitResult, EventConsumerHandlers } from '@pushbase/kafka';
import { LARGE_STATE_ROWS, Projector, type ProjectorOptions, type ProjectorSource } from '../src/projector';
import { MemoryProjectionStore } from './memory-projection-store';
import { eventsOf, redecoded, type Step } from './event-sequences';
import { createMetricsRegistry, projectorMetrics } from '@pushbase/metrics';
import { sample } from '../../../test/helpers/metrics';

class FakeSource implements ProjectorSource {
  readonly calls: string[] = [];
  readonly commits: StreamPosition[][] = [];
  owned: number[] = [0, 1];
  failCommits = false;
  start(): Promise<void> {
    return Promise.resolve();
  }
  commit(positions: readonly StreamPosition[]): Promise<CommitResult> {
    this.calls.push('commit');
    if (this.failCommits) return Promise.reject(new Error('rebalance in progress'));
    this.commits.push([...positions]);
    return Promise.resolve({ notOwned: [] });
  }
  pause(partitions: readonly number[]): void {
    this.calls.push(`pause ${partitions.join(',')}`);
  }
  resume(partitions: readonly number[]): void {
    this.calls.push(`resume ${partitions.join(',')}`);
  }
  assigned(): readonly number[] {
    return this.owned;
  }
  stop(): Promise<void> {
    return Promise.resolve();
  }
}

/** The memory store, failing as unavailable while `down`, and noting every call. */
class FlakyStore extends MemoryProjectionStore {
  down = 0;
  constructor(private readonly calls: string[]) {
    super();
  }
  override write(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): Promise<void> {
    if (this.down > 0) {
      this.down--;
      this.calls.push('write failed');
      return Promise.reject(new DomainError('unavailable', 'ClickHouse cannot be reached'));
    }
    this.calls.push(`write ${rows.length}`);
    return super.write(rows, heads);
  }
}

const control: BatchControl = { heartbeat: () => Promise.resolve(), isRunning: () => true };
const ACCOUNT = 'acme';
const steps: Step[] = [
  { kind: 'define', ds: 0, keyed: false },
  { kind: 'define', ds: 1, keyed: true },
  { kind: 'append', ds: 0, count: 300, seed: 1, deleteBy: null, repeat: 1 },
  { kind: 'append', ds: 1, count: 200, seed: 3, deleteBy: 'day', repeat: 2 },
  { kind: 'replace', ds: 0, count: 5, seed: 4 },
  { kind: 'append', ds: 0, count: 100, seed: 5, deleteBy: 'at', repeat: 1 },
];
const events = eventsOf(steps, { account: ACCOUNT, datasets: ['sales', 'visits'] });

function setup(options: Partial<ProjectorOptions> = {}) {
  const source = new FakeSource();
  const store = new FlakyStore(source.calls);
  const projector = new Projector(store, { maxRows: 1_000_000, flushRows: 1_000_000, flushIntervalMs: 60_000, retryInitialMs: 1, retryMaxMs: 4, log: () => undefined, ...options });
  const handlers: EventConsumerHandlers = projector.handlers();
  /** Delivers events as one batch of `partition`, at offsets from `from`. */
  const deliver = (partition: number, batch: readonly DatasetEvent[], from: number) =>
    handlers.onBatch({ topic: 't', partition, highWatermark: from + batch.length, next: from + batch.length, events: batch.map((e, i) => ({ event: redecoded(e), position: { partition, offset: from + i }, append: { index: 0, count: 1 } })) }, control);
  return { source, store, projector, handlers, deliver };
}

const expectFold = (store: MemoryProjectionStore, upTo = events.length): void => {
  const state = fold(events.slice(0, upTo).map(redecoded));
  for (const id of ['sales', 'visits']) expect(store.records(ACCOUNT, id)).toStrictEqual(recordsOf(state.get(ACCOUNT)!.get(id)!));
};

afterEach(() => {
  jest.useRealTimers();
});

describe('Projector', () => {
  it('writes the rows of many events in one write and commits after it, the offset of the last event of each partition', async () => {
    const { source, store, projector, deliver } = setup();
    await projector.start(source);
    // One dataset per partition, as the topic's key puts them.
    const sales = events.filter((e) => e.dataset === 'sales');
    const visits = events.filter((e) => e.dataset === 'visits');
    await deliver(0, sales, 10);
    await deliver(1, visits, 0);
    expect(source.calls).toStrictEqual([]);
    await projector.stop();
    expect(source.calls).toStrictEqual([`pause 0,1`, expect.stringMatching(/^write \d+$/), 'commit']);
    expect(source.commits).toStrictEqual([[{ partition: 0, offset: 10 + sales.length - 1 }, { partition: 1, offset: visits.length - 1 }]]);
    expect(store.writes).toBe(1);
  });

  it('writes once flushRows rows are pending, in the middle of a batch', async () => {
    const { source, store, projector, deliver } = setup({ flushRows: 250 });
    await projector.start(source);
    await deliver(0, events, 0);
    await projector.drained();
    expect(store.writes).toBeGreaterThanOrEqual(2);
    expect(source.commits.length).toBe(store.writes);
    await projector.stop();
    expectFold(store);
  });

  it('encodes the next write while the one before is still being inserted, and inserts it right after that one landed', async () => {
    const calls: string[] = [];
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    class GatedStore extends MemoryProjectionStore {
      override prepare(pending: readonly PendingRows[], heads: readonly ProjectedHead[]) {
        calls.push(`prepare ${pending.reduce((n, p) => n + p.size, 0)}`);
        return super.prepare(pending, heads);
      }
      override async write(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): Promise<void> {
        calls.push(`insert ${rows.length}`);
        if (calls.filter((c) => c.startsWith('insert')).length === 1) await gate;
        await super.write(rows, heads);
        calls.push(`landed ${rows.length}`);
      }
    }
    const store = new GatedStore();
    const source = new FakeSource();
    const projector = new Projector(store, { maxRows: 1_000_000, flushRows: 1, flushIntervalMs: 60_000, log: () => undefined });
    const handlers = projector.handlers();
    const deliver = (batch: readonly DatasetEvent[], from: number) =>
      handlers.onBatch({ topic: 't', partition: 0, highWatermark: from + batch.length, next: from + batch.length, events: batch.map((e, i) => ({ event: redecoded(e), position: { partition: 0, offset: from + i }, append: { index: 0, count: 1 } })) }, control);
    await projector.start(source);
    // Two definitions and an append of 300: one write, held in its insert.
    await deliver(events.slice(0, 3), 0);
    // The next append closes the next batch, which waits for the first write to land.
    const second = deliver(events.slice(3, 4), 3);
    for (let i = 0; i < 100 && calls.length < 3; i++) await new Promise((r) => setImmediate(r));
    expect(calls).toStrictEqual(['prepare 300', 'insert 300', expect.stringMatching(/^prepare [1-9]\d*$/)]);
    const rows = calls[2]?.split(' ')[1];
    release();
    await second;
    await projector.stop();
    expect(calls).toStrictEqual(['prepare 300', 'insert 300', `prepare ${rows}`, 'landed 300', `insert ${rows}`, `landed ${rows}`]);
    expectFold(store, 4);
  });

  it('pauses while the store is unavailable, retries, skips nothing, resumes and commits only after the write landed', async () => {
    const { source, store, projector, deliver } = setup({ flushRows: 1 });
    await projector.start(source);
    store.down = 3;
    await deliver(0, events.slice(0, 3), 0);
    await projector.drained();
    expect(source.calls.slice(0, 6)).toStrictEqual(['write failed', 'pause 0,1', 'write failed', 'write failed', 'write 300', 'resume 0,1']);
    expect(source.calls.indexOf('commit')).toBeGreaterThan(source.calls.indexOf('resume 0,1'));
    expect(projector.stats().retries).toBe(3);
    await deliver(0, events.slice(3), 3);
    await projector.stop();
    expectFold(store);
  });

  it('survives a refused commit: the rows are durable and the redelivered events are skipped', async () => {
    const { source, store, projector, deliver } = setup({ flushRows: 1 });
    await projector.start(source);
    source.failCommits = true;
    await deliver(0, events, 0);
    await projector.drained();
    source.failCommits = false;
    const written = store.writes;
    await deliver(0, events, 0);
    expect(projector.stats().skipped).toBe(events.length);
    await projector.stop();
    expect(store.writes - written).toBeLessThanOrEqual(1);
    expectFold(store);
  });

  it('drops the unwritten rows and the states of revoked partitions; the redelivered events then load from the store', async () => {
    const { source, store, projector, handlers, deliver } = setup();
    await projector.start(source);
    await deliver(0, events.slice(0, 3), 0);
    await handlers.onRevoked?.([0]);
    expect(projector.stats().cachedDatasets).toBe(0);
    await projector.stop();
    expect(store.writes).toBe(0);
    expect(source.commits).toStrictEqual([]);

    const again = setup();
    await again.projector.start(again.source);
    await again.deliver(0, events, 0);
    await again.projector.stop();
    expectFold(again.store);
  });

  it('keeps at most maxRows rows of states after a write, and loads dropped states back', async () => {
    const { source, store, projector, deliver } = setup({ maxRows: 50, flushRows: 1 });
    await projector.start(source);
    await deliver(0, events, 0);
    await projector.stop();
    expect(projector.stats().cachedRows).toBeLessThanOrEqual(50);
    expect(projector.stats().evictions).toBeGreaterThan(0);
    expect(store.loads).toBeGreaterThan(2);
    expectFold(store);
  });

  it('tells after stop() whether its last write landed, so a replay never swaps in a generation missing rows', async () => {
    const ok = setup();
    await ok.projector.start(ok.source);
    await ok.deliver(0, events.slice(0, 2), 0);
    await ok.projector.stop();
    expect(ok.projector.stoppedClean).toBe(true);

    const down = setup({ stopTimeoutMs: 50 });
    await down.projector.start(down.source);
    await down.deliver(0, events.slice(0, 2), 0);
    down.store.down = Number.POSITIVE_INFINITY;
    await down.projector.stop();
    expect(down.projector.stoppedClean).toBe(false);
    expect(down.source.commits).toStrictEqual([]);
  });

  it('stops on an error it must not retry, without committing the failing event', async () => {
    const fatal: Error[] = [];
    const { source, projector, deliver } = setup({ onFatal: (e) => fatal.push(e) });
    await projector.start(source);
    await deliver(0, events.slice(0, 2), 0);
    // The same dataset's next event from another partition: the topic's partition count changed.
    await expect(deliver(1, events.slice(2, 3), 0)).rejects.toThrow(/partition/);
    expect(fatal).toHaveLength(1);
    await projector.stop();
    expect(source.commits).toStrictEqual([[{ partition: 0, offset: 1 }]]);
  });

  it('writes as soon as the last write landed and flushIntervalMs has passed since it started, not a whole interval after the first event', async () => {
    jest.useFakeTimers();
    const { source, store, projector, deliver } = setup({ flushIntervalMs: 40 });
    await projector.start(source);
    await deliver(0, events.slice(0, 3), 0);
    // The first write goes out one interval after the start, on the tick.
    expect(store.writes).toBe(0);
    await jest.advanceTimersByTimeAsync(40);
    expect(store.writes).toBe(1);
    await projector.drained();
    // Idle for longer than the interval: the next batch is written when it has been folded, on its own.
    await jest.advanceTimersByTimeAsync(60);
    await deliver(0, events.slice(3, 4), 3);
    expect(store.writes).toBe(2);
    await projector.stop();
    expectFold(store, 4);
  });

  it('once over maxRows, drops written states down to 90% of it, so the next datasets do not force a write each', async () => {
    const { source, projector, deliver } = setup({ maxRows: 400, flushRows: 1 });
    await projector.start(source);
    await deliver(0, events, 0);
    await projector.drained();
    expect(projector.stats().cachedRows).toBeLessThanOrEqual(360);
    await projector.stop();
  });
});

/** Steps and events of the named datasets of ACCOUNT, for the memory-bound tests. */
function namedDatasets(names: readonly string[]) {
  const ds = (name: string): number => names.indexOf(name);
  const define = (name: string): Step => ({ kind: 'define', ds: ds(name), keyed: false });
  /** `count` rows appended to `name`, 500 a request. */
  const fill = (name: string, count: number, seed: number): Step[] =>
    Array.from({ length: Math.ceil(count / 500) }, (_, i): Step => ({ kind: 'append', ds: ds(name), count: Math.min(500, count - i * 500), seed: seed + i, deleteBy: null, repeat: 1 }));
  const events = (steps: readonly Step[]): DatasetEvent[] => eventsOf(steps, { account: ACCOUNT, datasets: names });
  /** Events of `steps` after a stream's own (the same incarnations: eventsOf numbers them by definition). */
  const later = (steps: readonly Step[]): DatasetEvent[] => events([...names.map(define), ...steps]).slice(names.length);
  return { define, fill, events, later };
}

describe('Projector: which states the memory bound drops', () => {
  // Ten datasets defined first and left idle (tiny, the least recently touched), then one of LARGE_STATE_ROWS
  // rows and more, then a small one that takes the states over the bound.
  const tiny = Array.from({ length: 10 }, (_, i) => `tiny${i}`);
  const names = [...tiny, 'big', 'late'];
  const { define, fill, events, later } = namedDatasets(names);
  const bigRows = LARGE_STATE_ROWS + 100;
  const stream = events([...tiny.map(define), define('big'), ...fill('big', bigRows, 10), define('late'), ...fill('late', 100, 20)]);
  // Over the bound only once `late` holds its rows.
  const held = tiny.length + (1 + bigRows) + (1 + 100);
  const maxRows = held - 10;

  it('drops a large idle state before tiny ones idle for longer, and loads only it back', async () => {
    const { source, store, projector, deliver } = setup({ maxRows });
    await projector.start(source);
    await deliver(0, stream, 0);
    await projector.drained();
    expect(projector.stats().evictions).toBe(1);
    expect(projector.stats().cachedRows).toBe(held - (1 + bigRows));
    // The next event of each tiny dataset finds its state in memory; the big one's is loaded.
    const loads = store.loads;
    const more = later(tiny.flatMap((name) => fill(name, 1, 30)));
    await deliver(0, more, stream.length);
    expect(store.loads).toBe(loads);
    await deliver(0, later(fill('big', 1, 40)), stream.length + more.length);
    expect(store.loads).toBe(loads + 1);
    await projector.stop();
    for (const name of names) expect(store.records(ACCOUNT, name)).toHaveLength(name === 'big' ? bigRows + 1 : name === 'late' ? 100 : 1);
  });

  it('loads the datasets a batch misses 8 to a query, and skips the events their loaded positions cover', async () => {
    const many = Array.from({ length: 20 }, (_, i) => `m${i}`);
    const { define, events: manyEvents } = namedDatasets(many);
    const defined = manyEvents(many.map(define));
    const first = setup();
    await first.projector.start(first.source);
    await first.deliver(0, defined, 0);
    await first.projector.stop();
    // A restart: the same store, nothing in memory; the redelivered events need all 20 datasets at once.
    const again = setup();
    for (const [k, v] of first.store.rows) again.store.rows.set(k, v);
    for (const [k, v] of first.store.heads) again.store.heads.set(k, v);
    const sizes: number[] = [];
    const loadMany = again.store.loadMany.bind(again.store);
    again.store.loadMany = (refs, options) => {
      sizes.push(refs.length);
      return loadMany(refs, options);
    };
    await again.projector.start(again.source);
    await again.deliver(0, defined, 0);
    await again.projector.stop();
    expect(sizes).toEqual([8, 8, 4]);
    expect(again.projector.stats()).toMatchObject({ loads: 20, skipped: 20 });
  });

  it('still keeps to the bound when every state is tiny, dropping the least recently touched', async () => {
    const many = Array.from({ length: 60 }, (_, i) => `d${i}`);
    const named = namedDatasets(many);
    const { source, store, projector, deliver } = setup({ maxRows: 50 });
    await projector.start(source);
    const defined = named.events(many.map(named.define));
    await deliver(0, defined, 0);
    await projector.drained();
    // 60 states of weight 1: over 50 once, dropped down to 45 (90%), the oldest first.
    expect(projector.stats().cachedRows).toBeLessThanOrEqual(50);
    expect(projector.stats().evictions).toBeGreaterThan(0);
    // The newest state is held, the oldest was dropped and loads back.
    const loads = store.loads;
    const append = (name: string): DatasetEvent[] => named.later(named.fill(name, 1, 1));
    await deliver(0, append('d59'), defined.length);
    expect(store.loads).toBe(loads);
    await deliver(0, append('d0'), defined.length + 1);
    expect(store.loads).toBe(loads + 1);
    await projector.stop();
  });

  it('keeps a large state touched lately and drops a long-idle medium one instead', async () => {
    // Six medium datasets (under LARGE_STATE_ROWS) filled first and left idle, then a large one filled last,
    // then a small one that takes the states over the bound: the large state is among the newest half of the
    // held rows, so the least recently touched medium state goes, as plain LRU would drop it.
    const medium = Array.from({ length: 6 }, (_, i) => `medium${i}`);
    const named = namedDatasets([...medium, 'hot', 'last']);
    const mediumRows = LARGE_STATE_ROWS - 212;
    const hotRows = LARGE_STATE_ROWS + 188;
    const events = named.events([
      ...medium.flatMap((name, i): Step[] => [named.define(name), ...named.fill(name, mediumRows, 10 * i)]),
      named.define('hot'),
      ...named.fill('hot', hotRows, 100),
      named.define('last'),
      ...named.fill('last', 100, 200),
    ]);
    const total = medium.length * (1 + mediumRows) + (1 + hotRows) + (1 + 100);
    const { source, store, projector, deliver } = setup({ maxRows: total - 10 });
    await projector.start(source);
    await deliver(0, events, 0);
    await projector.drained();
    expect(projector.stats().evictions).toBe(1);
    expect(projector.stats().cachedRows).toBe(total - (1 + mediumRows));
    // The large state is still held: its next event needs no load; the oldest medium one's does.
    const loads = store.loads;
    const next = (name: string, seed: number): DatasetEvent[] => named.later(named.fill(name, 1, seed));
    await deliver(0, next('hot', 300), events.length);
    expect(store.loads).toBe(loads);
    await deliver(0, next('medium0', 301), events.length + 1);
    expect(store.loads).toBe(loads + 1);
    await projector.stop();
    expect(store.records(ACCOUNT, 'hot')).toHaveLength(hotRows + 1);
    expect(store.records(ACCOUNT, 'medium0')).toHaveLength(mediumRows + 1);
  });
});

describe('Projector: metrics', () => {
  it('reports lag per partition from the fetched high watermark to the written offset, and forgets a revoked partition', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const { source, projector, handlers } = setup({ metrics: projectorMetrics(registry) });
    await projector.start(source);
    const lag = async (partition: number): Promise<number | undefined> => sample(await registry.metrics(), 'pushbase_projector_lag_messages', { partition: String(partition) });
    const batch = (partition: number, from: number, slice: readonly DatasetEvent[], highWatermark: number, next: number) =>
      handlers.onBatch(
        { topic: 't', partition, highWatermark, next, events: slice.map((e, i) => ({ event: redecoded(e), position: { partition, offset: from + i }, append: { index: 0, count: 1 } })) },
        control,
      );
    // Read from offset 100 (where the group's commit was); the partition's end is 120.
    await batch(0, 100, events.slice(0, 3), 120, 104);
    expect(await lag(0)).toBe(20); // folded, not yet written
    await projector.drained();
    expect(await lag(0)).toBe(16); // written up to the batch's end, markers included
    // The rest, ending just below the partition's new end: the commit marker after them at 120, the end 121.
    const rest = events.slice(3);
    await batch(0, 120 - rest.length, rest, 121, 121);
    expect(await lag(0)).toBe(121 - 104);
    await projector.drained();
    expect(await lag(0)).toBe(0);
    // A later fetch of nothing but a transaction marker catches up with a newer watermark.
    await batch(1, 0, eventsOf(steps, { account: ACCOUNT, datasets: ['orders', 'leads'] }).slice(0, 2), 3, 2);
    await projector.drained();
    expect(await lag(1)).toBe(1);
    handlers.onSkipped?.(1, 3);
    expect(await lag(1)).toBe(0);
    await handlers.onRevoked?.([0]);
    expect(await lag(0)).toBeUndefined();
    await projector.stop();
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_projector_writes_total')).toBe(projector.stats().writes);
    expect(sample(text, 'pushbase_projector_events_total')).toBe(projector.stats().events);
    expect(sample(text, 'pushbase_projector_loads_total')).toBe(projector.stats().loads);
    // One observation a load query, each of up to 8 datasets.
    const loadQueries = sample(text, 'pushbase_projector_load_duration_seconds_count');
    expect(loadQueries).toBeGreaterThan(0);
    expect(loadQueries).toBeLessThanOrEqual(projector.stats().loads);
    expect(sample(text, 'pushbase_clickhouse_insert_rows_count')).toBe(projector.stats().writes);
    expect(sample(text, 'pushbase_clickhouse_insert_rows_sum')).toBe(projector.stats().rows);
    expect(sample(text, 'pushbase_clickhouse_insert_duration_seconds_count')).toBe(projector.stats().writes);
  });

  it('counts store retries and evictions as stats() does', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const { source, store, projector, deliver } = setup({ maxRows: 50, flushRows: 1, metrics: projectorMetrics(registry) });
    await projector.start(source);
    store.down = 2;
    await deliver(0, events, 0);
    await projector.stop();
    const text = await registry.metrics();
    expect(projector.stats().retries).toBe(2);
    expect(sample(text, 'pushbase_projector_store_retries_total')).toBe(2);
    expect(projector.stats().evictions).toBeGreaterThan(0);
    expect(sample(text, 'pushbase_projector_evictions_total')).toBe(projector.stats().evictions);
    // Only successful inserts are timed: the failed attempts are the retries.
    expect(sample(text, 'pushbase_clickhouse_insert_duration_seconds_count')).toBe(store.writes);
  });
});

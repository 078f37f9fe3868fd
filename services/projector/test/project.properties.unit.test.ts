/*
 * Properties of the pure projection: the rows it derives, applied to a table with ReplacingMergeTree
 * semantics, show exactly the domain fold; redelivery, restarts and dropped states change nothing.
 * Streams pass the real 5000-record window, so runs are few.
 */
import fc from 'fast-check';
import { evolve, fold, initialState, recordsOf, type DatasetEvent, type State } from '@pushbase/domain';
import type { StreamPosition } from '@pushbase/contracts';
import { loadedDataset, project, type ProjectedDataset } from '../src/project';
import { MemoryProjectionStore } from './memory-projection-store';
import { eventsOf, redecoded, stepsArb } from './event-sequences';

const ACCOUNT = 'acme';
const DATASETS = ['sales', 'visits'] as const;

interface Positioned {
  readonly event: DatasetEvent;
  readonly position: StreamPosition;
}

/** Events of all datasets in one partition, with gaps where other datasets' events would sit. */
const streamArb = fc
  .tuple(stepsArb(DATASETS.length), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 47, maxLength: 47 }))
  .map(([steps, gaps]): Positioned[] => {
    let offset = 0;
    return eventsOf(steps, { account: ACCOUNT, datasets: DATASETS }).map((event, i) => ({ event, position: { partition: 0, offset: (offset += gaps[i % gaps.length] as number) } }));
  });

/** A tiny projector: the cache is what it holds in memory, the store what survives a crash. */
class Harness {
  readonly cache = new Map<string, ProjectedDataset>();
  evictions = 0;
  constructor(readonly store: MemoryProjectionStore) {}

  deliver(p: Positioned): { applied: boolean; rows: number } {
    const event = redecoded(p.event);
    const loaded = this.cache.has(event.dataset) ? undefined : this.store.loadNow(event.account, event.dataset);
    const before = this.cache.get(event.dataset) ?? (loaded === undefined ? undefined : loadedDataset(loaded));
    const step = project(before, event, p.position);
    this.evictions += step.rows.filter((r) => r.deleted).length;
    this.store.writeNow(step.rows, step.head === undefined ? [] : [step.head]);
    this.cache.set(event.dataset, step.dataset);
    return { applied: step.applied, rows: step.rows.length };
  }
}

function expectProjectionEqualsFold(store: MemoryProjectionStore, state: State): void {
  for (const id of DATASETS) {
    const ds = state.get(ACCOUNT)?.get(id);
    if (ds === undefined) {
      expect(store.records(ACCOUNT, id)).toBeUndefined();
      // Every row of every incarnation is tombstoned: nothing of a deleted dataset stays visible.
      expect(store.liveRows(ACCOUNT, id)).toStrictEqual([]);
      continue;
    }
    expect(store.records(ACCOUNT, id)).toStrictEqual(recordsOf(ds));
    expect(store.liveRows(ACCOUNT, id)).toHaveLength(ds.rows.size);
    const head = store.head(ACCOUNT, id);
    expect(head).toMatchObject({ incarnation: ds.incarnation, definition: ds.definition, record_count: ds.rows.size, next_row: ds.nextRow, deleted: false });
  }
}

const foldOf = (stream: readonly Positioned[]): State => fold(stream.map((p) => redecoded(p.event)));

/** Per dataset, the most records it held after any event of the stream, whatever its incarnation. */
function mostRecordsOf(stream: readonly Positioned[]): Map<string, number> {
  const most = new Map<string, number>();
  let state: State = initialState();
  for (const p of stream) {
    state = evolve(state, redecoded(p.event));
    const size = state.get(ACCOUNT)?.get(p.event.dataset)?.rows.size ?? 0;
    most.set(p.event.dataset, Math.max(most.get(p.event.dataset) ?? 0, size));
  }
  return most;
}

/**
 * The bound on what the store keeps: a dataset's rows sit in slots 1…n, n never above the most records it
 * ever held, so its stored rows (tombstones included, one per key after a merge) are at most that many,
 * however many records went through it.
 */
function expectBoundedRows(store: MemoryProjectionStore, stream: readonly Positioned[]): void {
  const most = mostRecordsOf(stream);
  for (const id of DATASETS) {
    const stored = store.storedRows(ACCOUNT, id);
    const bound = most.get(id) ?? 0;
    expect(stored.length).toBeLessThanOrEqual(bound);
    for (const r of stored) {
      expect(r.slot).toBeGreaterThanOrEqual(1);
      expect(r.slot).toBeLessThanOrEqual(bound);
    }
  }
}

describe('project: derived rows equal the domain fold', () => {
  let tombstones = 0;
  afterAll(() => {
    // The streams must actually exercise removals (window, replace, clear, delete), or the property is hollow.
    expect(tombstones).toBeGreaterThan(0);
  });

  it('applied to an empty table (latest version per key wins, deleted hidden, ordered by seq)', () => {
    fc.assert(
      fc.property(streamArb, (stream) => {
        const h = new Harness(new MemoryProjectionStore());
        for (const p of stream) expect(h.deliver(p).applied).toBe(true);
        tombstones += h.evictions;
        expectProjectionEqualsFold(h.store, foldOf(stream));
        expectBoundedRows(h.store, stream);
      }),
      { numRuns: 40 },
    );
  });

  it('redelivering any suffix to the running projector writes nothing and changes nothing', () => {
    fc.assert(
      fc.property(streamArb, fc.nat(), (stream, k) => {
        const h = new Harness(new MemoryProjectionStore());
        for (const p of stream) h.deliver(p);
        const from = k % stream.length;
        for (const p of stream.slice(from)) expect(h.deliver(p)).toStrictEqual({ applied: false, rows: 0 });
        expectProjectionEqualsFold(h.store, foldOf(stream));
        expectBoundedRows(h.store, stream);
      }),
      { numRuns: 25 },
    );
  });

  it('a restart from any earlier committed position, with states dropped and reloaded at random, changes nothing', () => {
    fc.assert(
      fc.property(streamArb, fc.nat(), fc.nat(), fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }), (stream, crash, commit, drops) => {
        const store = new MemoryProjectionStore();
        const first = new Harness(store);
        const crashAt = crash % (stream.length + 1);
        for (const p of stream.slice(0, crashAt)) first.deliver(p);
        // The process dies: its memory is gone, the store keeps what was written, the log restarts from
        // the last committed offset, which may be anywhere at or before the crash.
        const restarted = new Harness(store);
        let i = 0;
        for (const p of stream.slice(commit % (crashAt + 1))) {
          // The memory bound drops a dataset's state; it comes back from the store when next needed.
          if (drops[i++ % drops.length] === true) restarted.cache.delete(p.event.dataset);
          restarted.deliver(p);
        }
        expectProjectionEqualsFold(store, foldOf(stream));
        expectBoundedRows(store, stream);
      }),
      { numRuns: 30 },
    );
  });
});

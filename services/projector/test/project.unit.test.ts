import { EVENT_SCHEMA_VERSION, LIMITS, type DatasetDefinition, type DatasetEvent, type DatasetRecord } from '@pushbase/domain';
import type { StreamPosition } from '@pushbase/contracts';
import { MAX_ROWS_PER_EVENT, ProjectionError, VERSION_STRIDE, heldState, project, type ProjectedDataset } from '../src/project';
import { KEYED, PLAIN } from './event-sequences';

const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'sales', at: 1_700_000_000_000 } as const;
const defined = (incarnation: string, definition: DatasetDefinition = PLAIN): DatasetEvent => ({ ...base, type: 'DatasetDefined', incarnation, definition });
const appended = (incarnation: string, records: DatasetRecord[], delete_by: string | null = null): DatasetEvent => ({ ...base, type: 'RecordsAppended', incarnation, records, delete_by });
const replaced = (incarnation: string, records: DatasetRecord[]): DatasetEvent => ({ ...base, type: 'RecordsReplaced', incarnation, records });
const deleted = (incarnation: string): DatasetEvent => ({ ...base, type: 'DatasetDeleted', incarnation });
const at = (offset: number, partition = 0): StreamPosition => ({ partition, offset });
const plain = (n: number): DatasetRecord => ({ day: null, at: null, n });
const team = (t: string, n: number): DatasetRecord => ({ team: t, day: null, at: null, n });

/** Folds events at offsets 1, 2, … and returns every step. */
function run(events: readonly DatasetEvent[], from?: ProjectedDataset) {
  let held = from;
  return events.map((e, i) => {
    const step = project(held, e, at((from?.position.offset ?? 0) + i + 1));
    held = step.dataset;
    return step;
  });
}

/** A plain dataset holding exactly the window's 5000 records, rows 0…4999. */
const fullDataset = (): ProjectedDataset | undefined =>
  run([defined('i1'), ...Array.from({ length: 10 }, (_, i) => appended('i1', Array.from({ length: 500 }, (_, j) => plain(i * 500 + j))))]).at(-1)?.dataset;

describe('project', () => {
  it('states the version bound: one event writes at most 500 live rows and 5000 tombstones, below the stride', () => {
    expect(MAX_ROWS_PER_EVENT).toBe(LIMITS.recordsPerRequest + LIMITS.recordsPerDataset);
    expect(MAX_ROWS_PER_EVENT).toBeLessThan(VERSION_STRIDE);
  });

  it('writes appended records as live rows whose version and seq come from the position, in insertion order', () => {
    const [, step] = run([defined('i1'), appended('i1', [plain(1), plain(2)])]);
    expect(step?.rows).toStrictEqual([
      { account: 'acme', dataset: 'sales', incarnation: 'i1', row_key: '0', slot: 1, version: 2 * VERSION_STRIDE, seq: 2 * VERSION_STRIDE, deleted: false, record: plain(1) },
      { account: 'acme', dataset: 'sales', incarnation: 'i1', row_key: '1', slot: 2, version: 2 * VERSION_STRIDE + 1, seq: 2 * VERSION_STRIDE + 1, deleted: false, record: plain(2) },
    ]);
    expect(step?.head).toMatchObject({ incarnation: 'i1', record_count: 2, next_row: 2, position: at(2), version: 3 * VERSION_STRIDE - 1, deleted: false });
  });

  it('gives a merged unique key a newer seq and no tombstone; an in-request duplicate keeps the first place', () => {
    const steps = run([defined('i1', KEYED), appended('i1', [team('a', 1), team('b', 1)]), appended('i1', [team('b', 2), team('c', 1), team('b', 3)])]);
    const rows = steps[2]?.rows ?? [];
    expect(rows.map((r) => [r.row_key, r.record?.n, r.deleted])).toStrictEqual([
      ['sb', 3, false],
      ['sc', 1, false],
    ]);
    expect(rows[0]?.seq).toBeGreaterThan(steps[1]?.rows[1]?.seq ?? Infinity);
  });

  it('gives a new row the slot of the row the window evicts: its live row replaces the evicted one, no tombstone', () => {
    const [step] = run([appended('i1', [plain(-1)])], fullDataset());
    expect(step?.rows.map((r) => [r.row_key, r.slot, r.deleted])).toStrictEqual([['5000', 1, false]]);
    expect(step?.head?.record_count).toBe(LIMITS.recordsPerDataset);
  });

  it('tombstones a removed row whose slot no new row takes, with a version above every live row of the event', () => {
    const steps = run([defined('i1'), appended('i1', [plain(1), plain(2)]), replaced('i1', [plain(3)]), replaced('i1', [])]);
    expect(steps[2]?.rows.map((r) => [r.row_key, r.slot, r.deleted])).toStrictEqual([
      ['2', 1, false],
      ['1', 2, true],
    ]);
    expect(steps[2]?.rows[1]?.version).toBeGreaterThan(steps[2]?.rows[0]?.version ?? Infinity);
    expect(steps[3]?.rows.map((r) => [r.row_key, r.slot, r.deleted])).toStrictEqual([['2', 1, true]]);
    expect(steps[3]?.head).toMatchObject({ record_count: 0, next_row: 3, deleted: false });
  });

  it('tombstones every row on delete, keeps the head as deleted, and a re-created dataset starts a new incarnation', () => {
    const steps = run([defined('i1'), appended('i1', [plain(1)]), deleted('i1'), appended('i1', [plain(9)]), defined('i2'), appended('i2', [plain(2)])]);
    expect(steps[2]?.rows).toStrictEqual([expect.objectContaining({ incarnation: 'i1', row_key: '0', deleted: true, record: null })]);
    expect(steps[2]?.head).toMatchObject({ incarnation: 'i1', deleted: true, record_count: 0, position: at(3) });
    expect(steps[2]?.dataset.state).toBeUndefined();
    // A late append of the deleted incarnation changes nothing but is remembered as applied.
    expect(steps[3]).toMatchObject({ applied: true, rows: [], head: undefined });
    expect(steps[4]?.head).toMatchObject({ incarnation: 'i2', deleted: false, record_count: 0 });
    expect(steps[5]?.rows).toStrictEqual([expect.objectContaining({ incarnation: 'i2', row_key: '0', deleted: false })]);
  });

  it('skips an event at or before the last applied position without touching the state', () => {
    const [, step] = run([defined('i1'), appended('i1', [plain(1)])]);
    const held = step?.dataset as ProjectedDataset;
    const again = project(held, appended('i1', [plain(1)]), at(2));
    expect(again).toStrictEqual({ dataset: held, applied: false, rows: [], head: undefined });
    expect(project(held, appended('i1', [plain(1)]), at(1)).applied).toBe(false);
    expect(held.state?.rows.size).toBe(1);
  });

  it('refuses a dataset whose events moved to another partition instead of writing versions that shrink', () => {
    const [step] = run([defined('i1')]);
    expect(() => project(step?.dataset, appended('i1', [plain(1)]), at(1, 3))).toThrow(ProjectionError);
  });

  it('refuses an event that would write more rows than a version stride holds (beyond what any fold holds)', () => {
    // A state past the window, as no fold makes: its delete would write a tombstone per row, over the stride.
    const held = fullDataset() as ProjectedDataset;
    for (let k = 5000; k < VERSION_STRIDE + 1; k++) {
      held.state?.rows.set(k, plain(k));
      held.slots.take(k);
    }
    expect(() => project(held, deleted('i1'), at(100))).toThrow(ProjectionError);
  });

  it('keeps a dataset in the slots of its most records through a long churn: no unique_by, a datetime unique_by, replaces, re-creation', () => {
    const timed: DatasetDefinition = { fields: { at: { type: 'datetime', name: 'At', optional: false } }, unique_by: ['at'] } as unknown as DatasetDefinition;
    const histories: [string, DatasetEvent[]][] = [
      ['appends of 500 through the window', [defined('i1'), ...Array.from({ length: 120 }, (_, i) => appended('i1', Array.from({ length: 500 }, (_, j) => plain(i * 500 + j))))]],
      ['a datetime unique_by whose keys keep changing, windowed by delete_by', [defined('i1', timed), ...Array.from({ length: 120 }, (_, i) => appended('i1', Array.from({ length: 500 }, (_, j) => ({ at: (i * 500 + j) * 1000 })), 'at'))]],
      ['replaces and delete / re-create', Array.from({ length: 30 }, (_, i) => [defined(`i${i}`), appended(`i${i}`, Array.from({ length: 500 }, (_, j) => plain(j))), replaced(`i${i}`, Array.from({ length: 300 }, (_, j) => plain(j))), deleted(`i${i}`)]).flat()],
    ];
    for (const [, events] of histories) {
      const stored = new Map<number, { deleted: boolean; version: number }>();
      let held: ProjectedDataset | undefined;
      let most = 0;
      for (const [i, e] of events.entries()) {
        const step = project(held, e, at(i + 1));
        held = step.dataset;
        most = Math.max(most, held.state?.rows.size ?? 0);
        for (const r of step.rows) stored.set(r.slot, { deleted: r.deleted, version: r.version });
        expect(held.slots.size).toBe(held.state?.rows.size ?? 0);
      }
      // One stored key per slot ever used: no more than the most records the dataset held.
      expect(stored.size).toBeLessThanOrEqual(most);
      expect(Math.max(...stored.keys())).toBeLessThanOrEqual(LIMITS.recordsPerDataset);
      expect([...stored.values()].filter((r) => !r.deleted)).toHaveLength(held?.state?.rows.size ?? 0);
    }
  });

  it('holds of each row only its date and datetime values, the only ones a later delete_by reads, and writes the rows whole', () => {
    const steps = run([defined('i1'), appended('i1', [{ day: '2024-01-02', at: 5, n: 1 }, { day: null, at: 7, n: 2 }])]);
    expect(steps[1]?.rows.map((r) => r.record)).toStrictEqual([{ day: '2024-01-02', at: 5, n: 1 }, { day: null, at: 7, n: 2 }]);
    expect([...(steps[1]?.dataset.state?.rows ?? [])]).toStrictEqual([[0, { day: '2024-01-02', at: 5 }], [1, { day: null, at: 7 }]]);
    // The window by delete_by over held rows drops what the fold drops: (the first two rows left the window
    // by insertion order already) the whole oldest day goes, not just the one oldest row.
    const full = run(
      [appended('i1', Array.from({ length: 500 }, (_, j) => ({ day: '2024-01-01', at: j, n: j }))), ...Array.from({ length: 9 }, () => appended('i1', Array.from({ length: 500 }, (_, j) => ({ day: '2024-02-01', at: j, n: j })))), appended('i1', [{ day: '2024-03-01', at: 0, n: 0 }], 'day')],
      steps[1]?.dataset,
    );
    // Rows 2…501 go; the new row takes the lowest of their slots, the others are tombstoned.
    const last = full.at(-1)?.rows ?? [];
    const [live, ...tombstones] = last;
    expect(live).toMatchObject({ deleted: false, row_key: '5002' });
    expect(tombstones.map((r) => r.row_key)).toStrictEqual(Array.from({ length: 499 }, (_, j) => String(j + 3)));
    expect(tombstones.every((r) => r.deleted && r.slot > (live?.slot ?? Infinity))).toBe(true);
  });

  it('holds one shared empty record per row for a dataset without date or datetime fields', () => {
    const definition: DatasetDefinition = { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] } as unknown as DatasetDefinition;
    const steps = run([defined('i1', definition), appended('i1', [{ n: 1 }, { n: 2 }])]);
    const held = [...(steps[1]?.dataset.state?.rows.values() ?? [])];
    expect(held).toStrictEqual([{}, {}]);
    expect(held[0]).toBe(held[1]);
  });

  it('turns a state read back from the store into held rows, in the same order', () => {
    const state = run([defined('i1', KEYED)])[0]!.dataset.state!;
    state.rows.set('b', { team: 'b', day: '2024-01-01', at: null, n: 1 });
    state.rows.set('a', { team: 'a', day: null, at: 3, n: 2 });
    expect([...heldState(state).rows]).toStrictEqual([['b', { day: '2024-01-01', at: null }], ['a', { day: null, at: 3 }]]);
  });
});

import fc from 'fast-check';
import { EVENT_SCHEMA_VERSION, type DatasetDefinition, type DatasetEvent, type State } from '@pushbase/domain';

/* Shared by the snapshot, compaction and segmented-log tests: random event histories and a state dump. */

const PLAIN: DatasetDefinition = {
  fields: { k: { type: 'string', name: 'K' }, v: { type: 'number', name: 'V' }, d: { type: 'date', name: 'D', optional: true } },
  unique_by: [],
} as unknown as DatasetDefinition;
const UNIQUE: DatasetDefinition = { ...PLAIN, unique_by: ['k'] };

const base = { schema_version: EVENT_SCHEMA_VERSION } as const;

const record = fc.record({
  k: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
  v: fc.integer({ min: -1000, max: 1000 }),
  d: fc.option(fc.constantFrom('2024-01-01', '2024-01-02', '2024-01-03'), { nil: null }),
});

/** One random event over 2 accounts × 3 datasets × 2 incarnations, so stale and deleted cases happen. */
export const eventArb: fc.Arbitrary<DatasetEvent> = fc
  .record({
    kind: fc.constantFrom('define', 'append', 'append', 'append', 'append', 'replace', 'delete'),
    account: fc.constantFrom('acme', 'globex'),
    dataset: fc.constantFrom('sales', 'leads', 'x.y'),
    incarnation: fc.constantFrom('i1', 'i2'),
    unique: fc.boolean(),
    at: fc.integer({ min: 0, max: 2 ** 40 }),
    records: fc.array(record, { maxLength: 6 }),
    deleteBy: fc.constantFrom(null, 'd'),
  })
  .map(({ kind, account, dataset, incarnation, unique, at, records, deleteBy }): DatasetEvent => {
    const env = { ...base, account, dataset, incarnation, at };
    switch (kind) {
      case 'define':
        return { ...env, type: 'DatasetDefined', definition: unique ? UNIQUE : PLAIN };
      case 'append':
        return { ...env, type: 'RecordsAppended', records, delete_by: deleteBy };
      case 'replace':
        return { ...env, type: 'RecordsReplaced', records };
      case 'delete':
        return { ...env, type: 'DatasetDeleted' };
    }
  });

/** Events grouped into frames (append calls) of 1–4 events. */
export const framesArb = (maxFrames = 60): fc.Arbitrary<DatasetEvent[][]> => fc.array(fc.array(eventArb, { minLength: 1, maxLength: 4 }), { maxLength: maxFrames });

/** Everything observable about a state, in iteration order: rows as [key, record] pairs, oldest first. */
export function dumpState(state: State): unknown[] {
  const out: unknown[] = [];
  for (const [account, datasets] of state) {
    for (const [id, ds] of datasets) {
      out.push({
        account,
        id,
        incarnation: ds.incarnation,
        definition: ds.definition,
        created_at: ds.created_at,
        updated_at: ds.updated_at,
        nextRow: ds.nextRow,
        rows: [...ds.rows.entries()],
      });
    }
  }
  return out;
}

/** A big, deterministic history: `datasets` plain datasets in one account, `appends` × 500 rows each. */
export function bulkFrames(datasets: number, appends: number, rowsPerAppend = 500): DatasetEvent[][] {
  const frames: DatasetEvent[][] = [];
  for (let d = 0; d < datasets; d++) {
    frames.push([{ ...base, type: 'DatasetDefined', account: 'bulk', dataset: `ds${d}`, incarnation: 'i', at: d, definition: PLAIN }]);
  }
  let n = 0;
  for (let a = 0; a < appends; a++) {
    for (let d = 0; d < datasets; d++) {
      const records = Array.from({ length: rowsPerAppend }, (_, i) => ({ k: `r${n + i}`, v: n + i, d: null }));
      n += rowsPerAppend;
      frames.push([{ ...base, type: 'RecordsAppended', account: 'bulk', dataset: `ds${d}`, incarnation: 'i', at: 1000 + a, records, delete_by: null }]);
    }
  }
  return frames;
}

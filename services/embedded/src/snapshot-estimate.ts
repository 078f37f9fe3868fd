import { fieldOrder, RowMap, type DatasetRecord, type DatasetState, type FieldValue, type RowKey } from '@pushbase/domain';
import { columnKind, isString, KIND_F64, KIND_I32, KIND_NULL, KIND_STR, metaOf } from './snapshot-columns';
import { LazyRows } from './snapshot-decode';

/*
 * How many bytes a dataset will take in a version-2 snapshot, judged without encoding it: the free-space
 * check before a compaction (snapshot.ts estimateSnapshotBytes). Why it samples: docs/embedded-storage.md
 * → Snapshot dataset frames.
 */

const SAMPLE_ROWS = 32;

/** Bytes a column of `n` values is expected to take, judged from `sample` (some of them, spread out). */
function estimateColumn(sample: readonly FieldValue[], n: number): number {
  if (n === 0 || sample.length === 0) return 1;
  const kind = columnKind(sample);
  const bitmap = sample.includes(null) ? (n + 7) >> 3 : 0;
  switch (kind) {
    case KIND_NULL:
      return 1;
    case KIND_I32:
      return 2 + bitmap + 4 * n;
    case KIND_F64:
      return 2 + bitmap + 8 * n;
    case KIND_STR: {
      const strings = sample.filter(isString);
      const distinct = new Set(strings);
      // All different in the sample: take every value as distinct; else as many as the sample suggests.
      const total = distinct.size === strings.length ? n : Math.min(n, Math.ceil((distinct.size / strings.length) * n));
      let jsonBytes = 0;
      for (const v of distinct) jsonBytes += Buffer.byteLength(JSON.stringify(v)) + 1;
      const width = total < 0xff ? 1 : total < 0xffff ? 2 : 4;
      return 10 + Math.ceil((jsonBytes / distinct.size) * total) + width * n;
    }
    default: {
      let jsonBytes = 0;
      for (const v of sample) jsonBytes += JSON.stringify(v).length + 1;
      return 5 + Math.ceil((jsonBytes / sample.length) * n);
    }
  }
}

/**
 * Roughly the bytes `ds` takes in a version-2 snapshot, for the free-space check before writing one:
 * exact for rows still encoded; else each column judged from up to 32 rows spread over the dataset, far
 * cheaper than encoding it.
 */
export function estimateDatasetBytes(ds: DatasetState): number {
  const fields = fieldOrder(ds.definition);
  const meta = 16 + JSON.stringify(metaOf(ds, ds.rows.size, fields)).length;
  const pending = ds.rows instanceof LazyRows ? ds.rows.pending : undefined;
  if (pending !== undefined) return meta + pending.length - pending.columnsStart;
  // Rows still encoded are judged by their encoding's size (JSON by position: more than the columns take),
  // not built for the sake of an estimate.
  let deferredBytes = 0;
  let n = ds.rows.size;
  let pairs: Iterable<[RowKey, DatasetRecord]> = ds.rows;
  if (ds.rows instanceof RowMap && ds.rows.hasDeferred) {
    const c = ds.rows.capture();
    for (const d of c.deferred) deferredBytes += Math.ceil(((d.end - d.start) / d.source.count) * d.source.bytes);
    n = c.keys.length;
    pairs = c.keys.map((k, i): [RowKey, DatasetRecord] => [k, c.records[i]!]);
  }
  const every = Math.max(1, Math.floor(n / SAMPLE_ROWS));
  const keys: FieldValue[] = [];
  const records: DatasetRecord[] = [];
  let i = 0;
  for (const [key, record] of pairs) {
    if (i++ % every !== 0) continue;
    keys.push(key);
    records.push(record);
  }
  let bytes = meta + deferredBytes + estimateColumn(keys, n);
  for (const f of fields) bytes += estimateColumn(records.map((r) => r[f] ?? null), n);
  return bytes;
}

import { recordShape, type DatasetState, type DatasetSummary, type FieldValue, type RecordShape } from '@pushbase/domain';

/*
 * The dataset frame of a version-2 snapshot, as both directions see it: the column kinds, the meta that
 * precedes the columns, which kind a column of values takes, and the compiled record shapes. The layout and
 * why it is so: docs/embedded-storage.md → Snapshot dataset frames. Writing: snapshot-encode.ts; reading:
 * snapshot-decode.ts; the free-space estimate: snapshot-estimate.ts.
 */

export const KIND_NULL = 0;
export const KIND_I32 = 1;
export const KIND_F64 = 2;
export const KIND_STR = 3;
export const KIND_JSON = 4;

export class SnapshotDecodeError extends Error {
  override readonly name = 'SnapshotDecodeError';
}

/** What a dataset frame holds besides its columns. */
export interface Meta extends DatasetSummary {
  readonly nextRow: number;
  readonly rows: number;
  readonly fields: readonly string[];
}

const summaryOf = (d: DatasetSummary): DatasetSummary => ({
  account: d.account,
  id: d.id,
  incarnation: d.incarnation,
  definition: d.definition,
  created_at: d.created_at,
  updated_at: d.updated_at,
});

export const metaOf = (d: Omit<DatasetState, 'rows'>, rows: number, fields: readonly string[]): Meta => ({ ...summaryOf(d), nextRow: d.nextRow, rows, fields });

/** A dataset's state from a frame's fields and its rows (either snapshot version). */
export const datasetOf = (d: Omit<DatasetState, 'rows'>, rows: DatasetState['rows']): DatasetState => ({ ...summaryOf(d), rows, nextRow: d.nextRow });

export const isString = (v: unknown): v is string => typeof v === 'string';
export const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

/** Whether a parsed dataset frame (the JSON of version 1, the meta of version 2) holds a dataset's fields. */
export function hasDatasetFields<T extends object>(d: T | null): d is T & Omit<DatasetState, 'rows'> {
  if (d === null || typeof d !== 'object') return false;
  const m = d as Partial<Omit<DatasetState, 'rows'>>;
  return (
    isString(m.account) &&
    isString(m.id) &&
    isString(m.incarnation) &&
    typeof m.definition === 'object' &&
    m.definition !== null &&
    isInt(m.created_at) &&
    isInt(m.updated_at) &&
    isInt(m.nextRow)
  );
}

const isInt32 = (v: number): boolean => (v | 0) === v && !Object.is(v, -0);

/** The kind a column of these values is written as: from the values, not the field's declared type. */
export function columnKind(values: readonly FieldValue[]): number {
  let numbers = 0;
  let strings = 0;
  let ints = 0;
  for (const v of values) {
    if (typeof v === 'number') {
      numbers++;
      if (isInt32(v)) ints++;
    } else if (typeof v === 'string') strings++;
    else if (v !== null) return KIND_JSON;
  }
  if (numbers > 0 && strings > 0) return KIND_JSON;
  if (strings > 0) return KIND_STR;
  if (numbers === 0) return KIND_NULL;
  return ints === numbers ? KIND_I32 : KIND_F64;
}

/**
 * Record shapes by field list, so each dataset definition's generated conversions are compiled once and
 * stay optimised, rather than made anew for every dataset written or decoded. A bounded cache (emptied
 * when full), not state: any entry is rebuilt from its key.
 */
const shapes = new Map<string, RecordShape>();
export function shapeOf(fields: readonly string[]): RecordShape {
  const key = JSON.stringify(fields);
  let shape = shapes.get(key);
  if (shape === undefined) {
    if (shapes.size >= 4096) shapes.clear();
    shape = recordShape(fields);
    shapes.set(key, shape);
  }
  return shape;
}

import type { DatasetRecord, FieldValue } from '@pushbase/domain';

/*
 * Records by position: a dataset's records as rows of values in one field order, written once beside them,
 * instead of one JSON object per record repeating every key. The event encoding (event-codec.ts) stores
 * records this way; any other format that stores many records of one dataset (a snapshot) should use this
 * module rather than a second copy.
 *
 *   fields = ["day", "units"]     rows = [["2024-01-01", 3], ["2024-01-02", 5]]
 *
 * Why it pays (bench/run.ts, 500-record appends of 7 fields): the encoded event is 40% smaller (42.7 KB
 * instead of 70.7 KB), so 40% less to write, fsync, send to Kafka and replay; JSON.parse of it takes a third
 * less time, and turning the rows back into objects with the accessors below costs less than that saves.
 *
 * The row ↔ record conversions are generated per field list (new Function) instead of looping over the
 * field names: a loop writes a different key at the same site for every field, which V8 handles as a
 * megamorphic keyed store (measured: 170 µs for 500 records parsed and built, against 135 µs generated and
 * 195 µs for JSON.parse of the object form). Generated code only ever sees names that passed FIELD_NAME —
 * the domain's field-key syntax (lower-case letter, then a-z 0-9 _), so never a quote, a backslash or
 * `__proto__` — as quoted property names; any other name takes the generic, slower path.
 */

/** The domain's field keys (services/domain/src/definition.ts): safe as quoted names in generated code. */
const FIELD_NAME = /^[a-z][a-z0-9_]{0,49}$/;

type ToRow = (record: DatasetRecord) => FieldValue[];
type ToRecord = (row: readonly FieldValue[]) => DatasetRecord;

interface Accessors {
  readonly toRow: ToRow;
  readonly toRecord: ToRecord;
}

/**
 * Generated accessors per field list. Field lists are per dataset definition, so there are few; the cache
 * is still bounded (cleared when full) so a stream of odd definitions cannot grow it without end. A cache,
 * not state: any entry can be rebuilt from its key.
 */
const accessors = new Map<string, Accessors>();
const MAX_CACHED = 4096;

function accessorsFor(fields: readonly string[]): Accessors {
  const key = fields.join(',');
  const known = accessors.get(key);
  if (known !== undefined) return known;
  const built = fields.every((f) => FIELD_NAME.test(f)) && new Set(fields).size === fields.length ? generated(fields) : generic(fields);
  if (accessors.size >= MAX_CACHED) accessors.clear();
  accessors.set(key, built);
  return built;
}

function generated(fields: readonly string[]): Accessors {
  const names = fields.map((f) => JSON.stringify(f));
  /* eslint-disable @typescript-eslint/no-implied-eval -- names are checked against FIELD_NAME above; see the note at the top */
  const toRow = new Function('r', `return [${names.map((n) => `r[${n}] ?? null`).join(',')}];`) as ToRow;
  const toRecord = new Function('v', `return {${names.map((n, i) => `${n}: v[${i}]`).join(',')}};`) as ToRecord;
  /* eslint-enable @typescript-eslint/no-implied-eval */
  return { toRow, toRecord };
}

function generic(fields: readonly string[]): Accessors {
  return {
    toRow: (r) => fields.map((f) => (Object.hasOwn(r, f) ? (r[f] ?? null) : null)),
    // defineProperty semantics (fromEntries), so a field named __proto__ is an own property like any other.
    toRecord: (v) => Object.fromEntries(fields.map((f, i) => [f, v[i]])) as DatasetRecord,
  };
}

/**
 * The field order of the domain's normalised records of one dataset: the first record's keys, since they
 * all hold exactly the dataset's fields. For records that may differ (another writer's), use allFieldsOf.
 */
export const fieldsOf = (records: readonly DatasetRecord[]): string[] => (records.length === 0 ? [] : Object.keys(records[0] as DatasetRecord));

/** Every key of any of the records, in the order first seen. */
export function allFieldsOf(records: readonly DatasetRecord[]): string[] {
  const seen = new Set<string>();
  for (const r of records) for (const k of Object.keys(r)) seen.add(k);
  return [...seen];
}

/**
 * The records as rows in `fields` order. A field a record lacks is null in its row (as a normalised record
 * has it); a key of a record that is not in `fields` is not written, so pass every key (fieldsOf does, for
 * the domain's normalised records, which all hold the same keys).
 */
export function toRows(fields: readonly string[], records: readonly DatasetRecord[]): FieldValue[][] {
  const { toRow } = accessorsFor(fields);
  const rows = new Array<FieldValue[]>(records.length);
  for (let i = 0; i < records.length; i++) rows[i] = toRow(records[i] as DatasetRecord);
  return rows;
}

/** Why `rows` is not a list of rows of `fields.length` values, or undefined when it is. */
export function rowsProblem(fields: readonly string[], rows: readonly unknown[]): string | undefined {
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (!Array.isArray(row) || row.length !== fields.length) return `row ${i} must be an array of ${fields.length} values`;
  }
  return undefined;
}

/** The rows as records with `fields` as keys, in that order. Rows are taken as checked (rowsProblem). */
export function toRecords(fields: readonly string[], rows: readonly (readonly FieldValue[])[]): DatasetRecord[] {
  const { toRecord } = accessorsFor(fields);
  const records = new Array<DatasetRecord>(rows.length);
  for (let i = 0; i < rows.length; i++) records[i] = toRecord(rows[i] as FieldValue[]);
  return records;
}

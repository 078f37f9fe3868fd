import * as os from 'node:os';
import { fieldOrder, RowMap, type DatasetRecord, type DatasetState, type DeferredRows, type EncodedRecords, type FieldValue, type RowKey } from '@pushbase/domain';
import { columnKind, KIND_F64, KIND_I32, KIND_NULL, KIND_STR, metaOf, shapeOf } from './snapshot-columns';
import { columnsOf, decodeRows, LazyRows, type EncodedRows } from './snapshot-decode';

/*
 * The encoder of a version-2 snapshot's dataset frames, and what a snapshot takes of a dataset to write
 * (captured synchronously, written later, maybe on the snapshot pool's thread). A dataset still encoded
 * in the previous snapshot is written as the same columns. Layout: docs/embedded-storage.md → Snapshot
 * dataset frames.
 */

/**
 * A dataset as captured for a snapshot: row keys and records index-aligned, oldest insertion first, then
 * (when `deferred` is there) the newer rows still encoded in their events (RowMap), built only as the
 * snapshot is written (completeRows), over many event-loop turns rather than all in the capture's one.
 */
export interface DatasetRows extends Omit<DatasetState, 'rows'> {
  readonly keys: readonly RowKey[];
  readonly records: readonly DatasetRecord[];
  readonly deferred?: readonly DeferredRows[];
}

/** A dataset as captured for a snapshot while its rows are still as a snapshot encoded them (LazyRows). */
export interface DatasetColumns extends Omit<DatasetState, 'rows'> {
  readonly encoded: EncodedRows;
}

export type CapturedDataset = DatasetRows | DatasetColumns;

/**
 * What a snapshot needs of a dataset, taken synchronously: copies of its row keys and record references
 * (records are immutable: the fold replaces them, never edits them), or, for rows never decoded since
 * the last load, the encoded columns themselves.
 */
export function captureDataset(ds: DatasetState): CapturedDataset {
  const { rows, ...meta } = ds;
  const pending = rows instanceof LazyRows ? rows.pending : undefined;
  if (pending !== undefined) {
    pending.source.retain(); // until the capture is written: releaseCaptured
    return { ...meta, encoded: pending };
  }
  if (rows instanceof RowMap && rows.hasDeferred) return { ...meta, ...rows.capture() };
  return { ...meta, keys: [...rows.keys()], records: [...rows.values()] };
}

/** A captured dataset's rows with its deferred ones built: keys and records only. */
export function completeRows(d: DatasetRows): DatasetRows {
  const { deferred, ...rows } = d;
  if (deferred === undefined) return d;
  const keys = [...d.keys];
  const records = [...d.records];
  for (const slice of deferred) {
    const built = slice.source.decode();
    if (built.length !== slice.source.count) throw new Error(`dataset ${d.account}/${d.id}: encoded records gave ${built.length} records, not ${slice.source.count}`);
    for (let i = slice.start; i < slice.end; i++) {
      keys.push(slice.first + i);
      records.push(built[i]!);
    }
  }
  return { ...rows, keys, records };
}

/** Lets go of the snapshot files the captured datasets still encoded in them read from. */
export function releaseCaptured(datasets: readonly CapturedDataset[]): void {
  for (const d of datasets) if (!('keys' in d)) d.encoded.source.release();
}

/** The row keys and records of a captured dataset, decoding them if they are still encoded. */
export function rowsOf(d: CapturedDataset): DatasetRows {
  if ('keys' in d) return completeRows(d);
  const { encoded, ...meta } = d;
  const rows = new Map<RowKey, DatasetRecord>();
  decodeRows(encoded, rows, (key, record) => rows.set(key, record));
  return { ...meta, keys: [...rows.keys()], records: [...rows.values()] };
}

/** An append-only byte buffer that doubles when full. */
class ByteWriter {
  private buf: Buffer;
  length = 0;
  constructor(initial: number) {
    this.buf = Buffer.allocUnsafe(Math.max(64, initial));
  }
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void {
    this.room(1);
    this.buf[this.length++] = v;
  }
  u32(v: number): void {
    this.room(4);
    this.length = this.buf.writeUInt32LE(v, this.length);
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  /** Reserves `n` bytes and returns their offset, for typed values written in place. */
  reserve(n: number): number {
    this.room(n);
    const at = this.length;
    this.length += n;
    return at;
  }
  get buffer(): Buffer {
    return this.buf;
  }
  result(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

const LITTLE_ENDIAN = os.endianness() === 'LE';

function nullBitmap(values: readonly FieldValue[]): Buffer | undefined {
  let bitmap: Buffer | undefined;
  for (let i = 0; i < values.length; i++) {
    if (values[i] !== null) continue;
    bitmap ??= Buffer.alloc((values.length + 7) >> 3);
    bitmap[i >> 3]! |= 1 << (i & 7);
  }
  return bitmap;
}

function writeColumn(w: ByteWriter, values: readonly FieldValue[]): void {
  const kind = columnKind(values);
  w.u8(kind);
  switch (kind) {
    case KIND_NULL:
      return;
    case KIND_I32:
    case KIND_F64: {
      const bitmap = nullBitmap(values);
      w.u8(bitmap === undefined ? 0 : 1);
      if (bitmap !== undefined) w.bytes(bitmap);
      // Filled as a typed array and copied in whole: far cheaper than a checked write call per value. The
      // format is little-endian, which typed arrays are on every platform Node runs on but a few; there,
      // value by value.
      const typed = kind === KIND_I32 ? new Int32Array(values.length) : new Float64Array(values.length);
      for (let i = 0; i < values.length; i++) typed[i] = (values[i] as number | null) ?? 0;
      if (LITTLE_ENDIAN) {
        w.bytes(new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength));
        return;
      }
      let at = w.reserve(typed.byteLength);
      const buf = w.buffer;
      for (const n of typed) at = kind === KIND_I32 ? buf.writeInt32LE(n, at) : buf.writeDoubleLE(n, at);
      return;
    }
    case KIND_STR: {
      const index = new Map<string, number>();
      const distinct: string[] = [];
      const codes = new Uint32Array(values.length);
      for (let i = 0; i < values.length; i++) {
        const v = values[i] as string | null;
        if (v === null) continue; // code 0
        let code = index.get(v);
        if (code === undefined) {
          distinct.push(v);
          index.set(v, (code = distinct.length));
        }
        codes[i] = code;
      }
      const bytes = Buffer.from(JSON.stringify(distinct), 'utf8');
      w.u32(distinct.length);
      w.u32(bytes.length);
      w.bytes(bytes);
      const width = distinct.length < 0xff ? 1 : distinct.length < 0xffff ? 2 : 4;
      w.u8(width);
      if (LITTLE_ENDIAN || width === 1) {
        const typed = width === 1 ? Uint8Array.from(codes) : width === 2 ? Uint16Array.from(codes) : codes;
        w.bytes(new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength));
        return;
      }
      let at = w.reserve(values.length * width);
      const buf = w.buffer;
      for (const code of codes) at = width === 2 ? buf.writeUInt16LE(code, at) : buf.writeUInt32LE(code, at);
      return;
    }
    default: {
      const json = Buffer.from(JSON.stringify(values), 'utf8');
      w.u32(json.length);
      w.bytes(json);
    }
  }
}

/** The frame payload of one dataset. */
export function encodeDataset(captured: CapturedDataset): Buffer {
  if (!('keys' in captured)) {
    const d = captured;
    // Never decoded since it was loaded: the same columns, under the dataset's meta as it is now.
    const meta = Buffer.from(JSON.stringify(metaOf(d, d.encoded.rows, d.encoded.fields)), 'utf8');
    const columns = columnsOf(d.encoded);
    const w = new ByteWriter(4 + meta.length + columns.length);
    w.u32(meta.length);
    w.bytes(meta);
    w.bytes(columns);
    return w.result();
  }
  const d = captured;
  const fields = fieldOrder(d.definition);
  const { keys, columns } = columnsOfRows(d, fields);
  const n = keys.length;
  const metaBytes = Buffer.from(JSON.stringify(metaOf(d, n, fields)), 'utf8');
  const w = new ByteWriter(metaBytes.length + 16 + n * (8 + fields.length * 8));
  w.u32(metaBytes.length);
  w.bytes(metaBytes);
  writeColumn(w, keys);
  for (const column of columns) writeColumn(w, column);
  return w.result();
}

/**
 * A captured dataset's row keys and its values field by field (one array per field of `fields`), read
 * straight from the records (RecordShape.intoColumns) and from the rows still encoded (their values by
 * position, EncodedRecords.decodeValues): no record is built to be written, which is most of what a
 * snapshot taken during ingest would otherwise cost.
 */
function columnsOfRows(d: DatasetRows, fields: readonly string[]): { keys: RowKey[]; columns: FieldValue[][] } {
  const n = d.records.length + (d.deferred ?? []).reduce((sum, s) => sum + s.end - s.start, 0);
  if (d.keys.length !== d.records.length) throw new Error(`dataset ${d.account}/${d.id}: ${d.keys.length} row keys for ${d.records.length} records`);
  const keys = d.keys.slice();
  const columns = fields.map(() => new Array<FieldValue>(n));
  // The domain's records hold every field of their dataset; anything else cannot be stored by position.
  const lacking = (i: number, record: DatasetRecord | undefined): Error => {
    const f = fields.find((name) => record?.[name] === undefined) ?? fields[0];
    return new Error(`dataset ${d.account}/${d.id}: record ${i} has no field "${f}"`);
  };
  const bad = shapeOf(fields).intoColumns(d.records, columns, 0);
  if (bad >= 0) throw lacking(bad, d.records[bad]);
  let at = d.records.length;
  for (const slice of d.deferred ?? []) {
    const { fields: order, rows } = valuesOf(slice.source);
    if (rows.length !== slice.source.count) throw new Error(`dataset ${d.account}/${d.id}: encoded records gave ${rows.length} records, not ${slice.source.count}`);
    const from = fields.map((f) => order.indexOf(f));
    const missing = from.indexOf(-1);
    if (missing >= 0 && slice.end > slice.start) throw lacking(at, { ...Object.fromEntries(order.map((f) => [f, null])) });
    for (let i = slice.start; i < slice.end; i++) {
      const row = rows[i]!;
      for (let j = 0; j < from.length; j++) columns[j]![at] = row[from[j]!]!;
      keys.push(slice.first + i);
      at++;
    }
  }
  return { keys, columns };
}

const valuesOf = (source: EncodedRecords): { readonly fields: readonly string[]; readonly rows: readonly (readonly FieldValue[])[] } => {
  if (source.decodeValues !== undefined) return source.decodeValues();
  const records = source.decode();
  const fields = records.length === 0 ? [] : Object.keys(records[0]!);
  const shape = shapeOf(fields);
  return { fields, rows: records.map((r) => shape.toValues(r)) };
};

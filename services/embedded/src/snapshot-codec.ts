import * as fs from 'node:fs';
import * as os from 'node:os';
import { crc32 } from 'node:zlib';
import { fieldOrder, recordShape, RowMap, type RecordShape, type DatasetDefinition, type DatasetRecord, type DatasetState, type DeferredRows, type EncodedRecords, type FieldValue, type RowKey } from '@pushbase/domain';
import type { FrameAt } from './frames';

/*
 * One dataset of a version-2 snapshot, in binary: its records by position against the dataset's field
 * order, column by column, typed, with no key repeated per record. (Version 1 stored every record as a
 * JSON object: the same seven keys five million times, and a restart spent its time in JSON.parse.)
 *
 *   [u32 meta bytes][meta: UTF-8 JSON {account,id,incarnation,definition,created_at,updated_at,nextRow,
 *                                     rows, fields}]
 *   [column: the row keys]  [column: fields[0]] … [column: fields[n-1]]        — `rows` values each
 *
 * `fields` is the field order the columns follow, written out so the frame describes itself. A column is
 *   [u8 kind] then
 *   NULL  nothing: every value is null
 *   I32   [u8 has nulls][null bitmap, ⌈rows/8⌉ bytes, if it has][rows × i32 LE]   (integers, no -0)
 *   F64   [u8 has nulls][null bitmap if it has][rows × f64 LE]
 *   STR   [u32 distinct][u32 bytes][the distinct values: a UTF-8 JSON array of strings]
 *         [u8 index width: 1, 2 or 4][rows × index LE]
 *         — index 0 is null, k is the k-th distinct value: a date or a region repeated on every row is
 *         stored, decoded and held in memory once. JSON for the strings themselves: one native call
 *         decodes them all, each into a string of its own (slices of one decoded text would keep the
 *         whole text alive and cost more memory than they save), and it carries any string exactly, lone
 *         surrogates included.
 *   JSON  [u32 bytes][a JSON array of the rows' values]   (a column mixing numbers and strings: never
 *         written for records the domain decided, kept so any value survives)
 * The kind is chosen from the values, not from the field's declared type, so a record that breaks the
 * definition is still stored exactly rather than coerced. Null bitmaps: bit i%8 of byte i/8 set = null.
 * Integrity is the frame's crc32 (snapshot.ts); decoding still checks every length against the frame.
 */

const KIND_NULL = 0;
const KIND_I32 = 1;
const KIND_F64 = 2;
const KIND_STR = 3;
const KIND_JSON = 4;

export class SnapshotDecodeError extends Error {
  override readonly name = 'SnapshotDecodeError';
}

/** What a dataset frame holds besides its columns. */
interface Meta {
  readonly account: string;
  readonly id: string;
  readonly incarnation: string;
  readonly definition: DatasetDefinition;
  readonly created_at: number;
  readonly updated_at: number;
  readonly nextRow: number;
  readonly rows: number;
  readonly fields: readonly string[];
}

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

const metaOf = (d: Omit<DatasetState, 'rows'>, rows: number, fields: readonly string[]): Meta => ({
  account: d.account,
  id: d.id,
  incarnation: d.incarnation,
  definition: d.definition,
  created_at: d.created_at,
  updated_at: d.updated_at,
  nextRow: d.nextRow,
  rows,
  fields,
});

// ── Writing ──────────────────────────────────────────────────────────────────────────────────────────

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

const isInt32 = (v: number): boolean => (v | 0) === v && !Object.is(v, -0);

function nullBitmap(values: readonly FieldValue[]): Buffer | undefined {
  let bitmap: Buffer | undefined;
  for (let i = 0; i < values.length; i++) {
    if (values[i] !== null) continue;
    bitmap ??= Buffer.alloc((values.length + 7) >> 3);
    bitmap[i >> 3]! |= 1 << (i & 7);
  }
  return bitmap;
}

function columnKind(values: readonly FieldValue[]): number {
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

/**
 * Record shapes by field list, so each dataset definition's generated conversions are compiled once and
 * stay optimised, rather than made anew for every dataset written or decoded. A bounded cache (emptied
 * when full), not state: any entry is rebuilt from its key.
 */
const shapes = new Map<string, RecordShape>();
function shapeOf(fields: readonly string[]): RecordShape {
  const key = JSON.stringify(fields);
  let shape = shapes.get(key);
  if (shape === undefined) {
    if (shapes.size >= 4096) shapes.clear();
    shape = recordShape(fields);
    shapes.set(key, shape);
  }
  return shape;
}

// ── Reading ──────────────────────────────────────────────────────────────────────────────────────────

/** Reads a frame's bytes front to back; every read is checked against the frame's end. */
class ByteReader {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  private need(n: number, what: string): number {
    if (n < 0 || this.pos + n > this.buf.length) throw new SnapshotDecodeError(`${what} runs past the end of the frame`);
    const at = this.pos;
    this.pos += n;
    return at;
  }
  u8(what: string): number {
    return this.buf[this.need(1, what)]!;
  }
  u32(what: string): number {
    return this.buf.readUInt32LE(this.need(4, what));
  }
  /** A view of the next `n` bytes. */
  take(n: number, what: string): Buffer {
    const at = this.need(n, what);
    return this.buf.subarray(at, at + n);
  }
}

/** One column, checked, ready to be read row by row. */
interface Column {
  readonly kind: number;
  readonly buf: Buffer;
  /** Where its values (numbers, or value indexes) start in `buf`, and the bytes of each. */
  readonly at: number;
  readonly width: number;
  readonly nulls: Buffer | undefined;
  /** STR: index → value (0: null); JSON: the values. Only when opened to decode. */
  readonly values: readonly FieldValue[];
}

/**
 * Walks one column, checking it against the frame (lengths, kinds, value indexes, nulls where none may
 * be), and returns where its values are. With `decode` it also parses what values need parsing (a string
 * column's distinct values); without, it allocates nothing: the check at load.
 */
function openColumn(r: ByteReader, rows: number, what: string, decode: boolean, nullable = true): Column {
  const kind = r.u8(what);
  const noNull = (): SnapshotDecodeError => new SnapshotDecodeError(`${what}: holds a null`);
  const buf = r.buf;
  switch (kind) {
    case KIND_NULL:
      if (!nullable && rows > 0) throw noNull();
      return { kind, buf, at: r.pos, width: 0, nulls: undefined, values: [] };
    case KIND_I32:
    case KIND_F64: {
      const hasNulls = r.u8(what);
      if (hasNulls > 1) throw new SnapshotDecodeError(`${what}: bad null flag ${hasNulls}`);
      if (hasNulls === 1 && !nullable) throw noNull();
      const nulls = hasNulls === 1 ? r.take((rows + 7) >> 3, what) : undefined;
      const width = kind === KIND_I32 ? 4 : 8;
      const at = r.pos;
      r.take(rows * width, what);
      return { kind, buf, at, width, nulls, values: [] };
    }
    case KIND_STR: {
      const count = r.u32(what);
      const json = r.take(r.u32(what), what);
      const values: (string | null)[] = [null];
      if (decode) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(json.toString('utf8'));
        } catch {
          throw new SnapshotDecodeError(`${what}: the distinct values are not JSON`);
        }
        if (!Array.isArray(parsed) || parsed.length !== count || !parsed.every(isString)) {
          throw new SnapshotDecodeError(`${what}: the distinct values are not ${count} strings`);
        }
        for (const v of parsed) values.push(v);
      }
      const width = r.u8(what);
      if (width !== 1 && width !== 2 && width !== 4) throw new SnapshotDecodeError(`${what}: bad index width ${width}`);
      const column = { kind, buf, at: r.pos, width, nulls: undefined, values };
      r.take(rows * width, what);
      for (let i = 0; i < rows; i++) {
        const code = indexAt(column, i);
        if (code > count) throw new SnapshotDecodeError(`${what}: value index ${code} of ${count}`);
        if (code === 0 && !nullable) throw noNull();
      }
      return column;
    }
    case KIND_JSON: {
      let parsed: unknown;
      try {
        parsed = JSON.parse(r.take(r.u32(what), what).toString('utf8'));
      } catch {
        throw new SnapshotDecodeError(`${what}: not JSON`);
      }
      if (!Array.isArray(parsed) || parsed.length !== rows) throw new SnapshotDecodeError(`${what}: not a JSON array of ${rows} values`);
      if (!nullable && parsed.includes(null)) throw noNull();
      return { kind, buf, at: r.pos, width: 0, nulls: undefined, values: parsed as FieldValue[] };
    }
    default:
      throw new SnapshotDecodeError(`${what}: unknown column kind ${kind}`);
  }
}

const indexAt = (c: Column, i: number): number => {
  const at = c.at + i * c.width;
  return c.width === 1 ? c.buf[at]! : c.width === 2 ? c.buf.readUInt16LE(at) : c.buf.readUInt32LE(at);
};

/** Row `i`'s value in a column opened to decode. Read straight from the frame's bytes: no copies. */
function valueAt(c: Column, i: number): FieldValue {
  switch (c.kind) {
    case KIND_I32:
    case KIND_F64:
      if (c.nulls !== undefined && (c.nulls[i >> 3]! & (1 << (i & 7))) !== 0) return null;
      return c.kind === KIND_I32 ? c.buf.readInt32LE(c.at + i * 4) : c.buf.readDoubleLE(c.at + i * 8);
    case KIND_STR:
      return c.values[indexAt(c, i)]!;
    case KIND_JSON:
      return c.values[i]!;
    default:
      return null;
  }
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

function readMeta(r: ByteReader): Meta {
  const bytes = r.take(r.u32('meta length'), 'meta');
  let m: Partial<Meta> | null;
  try {
    m = JSON.parse(bytes.toString('utf8')) as Partial<Meta> | null;
  } catch {
    throw new SnapshotDecodeError('meta is not JSON');
  }
  if (
    m === null ||
    typeof m !== 'object' ||
    !isString(m.account) ||
    !isString(m.id) ||
    !isString(m.incarnation) ||
    typeof m.definition !== 'object' ||
    m.definition === null ||
    !isInt(m.created_at) ||
    !isInt(m.updated_at) ||
    !isInt(m.nextRow) ||
    !isInt(m.rows) ||
    m.rows < 0 ||
    !Array.isArray(m.fields) ||
    !m.fields.every(isString)
  ) {
    throw new SnapshotDecodeError('bad meta fields');
  }
  return m as Meta;
}

/**
 * A snapshot file that datasets still encoded in it read their columns from, open while any of them does.
 * Reading them back from the file, rather than keeping a copy of the encoded bytes in memory, keeps those
 * bytes out of the RSS (a third of the state again, which a server that ends up decoding every dataset
 * would otherwise carry as well). References are counted: each LazyRows
 * still encoded, and each capture of one until its snapshot is written; the last release closes the file,
 * and so does close() when the store stops. An open file stays readable after a compaction deletes it.
 */
export class SnapshotSource {
  private refs = 0;
  private fd: number | undefined;
  /** Reused by every read: decoding all datasets would otherwise leave their bytes again as garbage. */
  private scratch = Buffer.alloc(0);

  constructor(
    readonly file: string,
    fd: number,
  ) {
    this.fd = fd;
  }

  retain(): void {
    this.refs += 1;
  }

  release(): void {
    this.refs -= 1;
    if (this.refs <= 0) this.close();
  }

  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    this.scratch = Buffer.alloc(0);
    fs.closeSync(fd);
  }

  get isOpen(): boolean {
    return this.fd !== undefined;
  }

  /**
   * A frame's payload, read again and checked against the crc it had at load. Synchronous: it runs inside
   * a Map method on first use of a dataset, a fraction of a millisecond for one dataset's columns. The
   * bytes are valid until the next call (one buffer serves every read).
   */
  payload(offset: number, length: number, crc: number): Buffer {
    if (this.fd === undefined) throw new Error(`snapshot ${this.file} is closed`);
    if (this.scratch.length < length) this.scratch = Buffer.allocUnsafe(Math.max(length, this.scratch.length * 2));
    const buf = this.scratch.subarray(0, length);
    let filled = 0;
    while (filled < length) {
      const n = fs.readSync(this.fd, buf, filled, length - filled, offset + filled);
      if (n === 0) throw new Error(`snapshot ${this.file} ends before byte ${offset + length}`);
      filled += n;
    }
    if (crc32(buf) !== crc) throw new Error(`snapshot ${this.file} changed since it was loaded: crc mismatch at byte ${offset}`);
    return buf;
  }
}

/** The columns of a dataset frame, still encoded in its snapshot file: where, and what they hold. */
export interface EncodedRows {
  readonly rows: number;
  readonly fields: readonly string[];
  readonly source: SnapshotSource;
  /** The frame's payload in the file, its crc32, and where its columns start in it (after the meta). */
  readonly offset: number;
  readonly length: number;
  readonly crc: number;
  readonly columnsStart: number;
}

const columnsOf = (e: EncodedRows): Buffer => e.source.payload(e.offset, e.length, e.crc).subarray(e.columnsStart);

/**
 * Builds the records row by row, each made at once from its values (RecordShape.fromValues), so decoding
 * a dataset leaves no garbage but its distinct-value lists: no arrays of keys, records or values per
 * column in between. Millions of records are decoded this way when every dataset ends up used, and what
 * a decode leaves behind adds to the peak RSS until the next collection.
 */
function decodeRows(e: EncodedRows, into: Map<RowKey, DatasetRecord>, set: (key: RowKey, record: DatasetRecord) => void): void {
  const r = new ByteReader(columnsOf(e));
  const keys = openColumn(r, e.rows, 'row keys', true, false);
  const columns = e.fields.map((f) => openColumn(r, e.rows, `field ${f}`, true));
  const shape = shapeOf(e.fields);
  const values = new Array<FieldValue>(columns.length);
  for (let i = 0; i < e.rows; i++) {
    for (let f = 0; f < columns.length; f++) values[f] = valueAt(columns[f]!, i);
    set(valueAt(keys, i) as RowKey, shape.fromValues(values));
  }
  if (into.size !== e.rows) throw new SnapshotDecodeError('duplicate row keys');
}

/**
 * A dataset's row map that decodes itself from the snapshot on first use. A restart then costs reading
 * and checking the snapshot, not building millions of records, and a dataset nobody reads or writes is
 * never built at all: it is written into the next snapshot as the same encoded columns. `size` answers
 * without decoding (listings and totals need only counts); every other use decodes first, once, and from
 * then on this answers as an ordinary RowMap (its reference to the snapshot file released).
 *
 * The decoded rows go into a RowMap made at decode time (`built`), to which every method then forwards,
 * not into this map's own table. V8 grows a Map's hash table by allocating the larger one in the
 * generation the current one is in, and this map's (empty) table was promoted to the old generation long
 * before the decode, while the restart ran: every intermediate table of a 5000-row dataset then became
 * old-generation garbage that only a full collection frees, ~210 MiB for 5 million rows decoded in a burst
 * (a sampling heap profile counting what major GCs collect), which pushed the peak RSS above format 1's.
 * A Map made at decode time grows in the young generation, where the tables it outgrows die cheaply.
 * So this Map's own storage stays empty: anything reading it directly (Map.prototype methods called on it,
 * structuredClone, util.inspect) sees no rows. Nothing does; use the methods.
 *
 * The frame was checked whole at load (crc32, and every column walked against its length, kinds and
 * value indexes), and is checked against the same crc when read again, so decoding cannot meet a damaged
 * byte; should it fail anyway (the file damaged since), it throws rather than serve a partial dataset.
 */
export class LazyRows extends RowMap {
  private encoded: EncodedRows | undefined;
  private built: RowMap | undefined;

  constructor(encoded: EncodedRows) {
    super();
    this.encoded = encoded;
    encoded.source.retain();
  }

  /** The still-encoded columns, or undefined once decoded. */
  get pending(): EncodedRows | undefined {
    return this.encoded;
  }

  /** The rows, decoded first if they are still encoded. */
  private rows(): RowMap {
    if (this.built !== undefined) return this.built;
    const e = this.encoded!;
    const built = new RowMap();
    try {
      decodeRows(e, built, (key, record) => built.set(key, record));
    } catch (err) {
      throw new Error(`cannot decode a dataset of snapshot ${e.source.file}: ${err instanceof Error ? err.message : String(err)}`);
    }
    this.built = built;
    this.encoded = undefined;
    e.source.release();
    return built;
  }

  override get size(): number {
    return this.encoded?.rows ?? this.built?.size ?? 0;
  }
  // Rows appended or evicted come after, or before, the snapshot's: decode those first.
  override appendEncoded(first: number, source: EncodedRecords): void {
    this.rows().appendEncoded(first, source);
  }
  override deleteOldest(n: number): void {
    this.rows().deleteOldest(n);
  }
  override get hasDeferred(): boolean {
    return this.built?.hasDeferred ?? false;
  }
  override capture(): { keys: RowKey[]; records: DatasetRecord[]; deferred: DeferredRows[] } {
    return this.rows().capture();
  }
  override get(key: RowKey): DatasetRecord | undefined {
    return this.rows().get(key);
  }
  override has(key: RowKey): boolean {
    return this.rows().has(key);
  }
  override set(key: RowKey, value: DatasetRecord): this {
    this.rows().set(key, value);
    return this;
  }
  override delete(key: RowKey): boolean {
    return this.rows().delete(key);
  }
  override clear(): void {
    this.encoded?.source.release();
    this.encoded = undefined;
    this.built = new RowMap();
  }
  override forEach(fn: (value: DatasetRecord, key: RowKey, map: Map<RowKey, DatasetRecord>) => void, thisArg?: unknown): void {
    this.rows().forEach((value, key) => fn.call(thisArg, value, key, this));
  }
  override keys(): MapIterator<RowKey> {
    return this.rows().keys();
  }
  override values(): MapIterator<DatasetRecord> {
    return this.rows().values();
  }
  override entries(): MapIterator<[RowKey, DatasetRecord]> {
    return this.rows().entries();
  }
  override [Symbol.iterator](): MapIterator<[RowKey, DatasetRecord]> {
    return this.entries();
  }
}

/**
 * A dataset from its frame payload, its rows left encoded in `source` (LazyRows) after checking every
 * column against the frame; throws SnapshotDecodeError when the payload is not a dataset frame.
 */
export function decodeDataset(payload: Buffer, at: FrameAt, source: SnapshotSource): DatasetState {
  const r = new ByteReader(payload);
  const m = readMeta(r);
  const start = r.pos;
  openColumn(r, m.rows, 'row keys', false, false);
  for (const f of m.fields) openColumn(r, m.rows, `field ${f}`, false);
  if (r.pos !== payload.length) throw new SnapshotDecodeError(`${payload.length - r.pos} bytes follow the last column`);
  return {
    account: m.account,
    id: m.id,
    incarnation: m.incarnation,
    definition: m.definition,
    created_at: m.created_at,
    updated_at: m.updated_at,
    rows: new LazyRows({ rows: m.rows, fields: m.fields, source, offset: at.offset, length: payload.length, crc: at.crc, columnsStart: start }),
    nextRow: m.nextRow,
  };
}

// ── Size estimate ────────────────────────────────────────────────────────────────────────────────────

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
 * exact for rows still encoded; else each column judged from up to 32 rows spread over the dataset. Well
 * under a millisecond per dataset, where encoding it would cost the write itself.
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

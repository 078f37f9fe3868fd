import * as fs from 'node:fs';
import { crc32 } from 'node:zlib';
import { RowMap, type DatasetRecord, type DatasetState, type DeferredRows, type EncodedRecords, type FieldValue, type RowKey } from '@pushbase/domain';
import type { FrameAt } from './frames';
import { datasetOf, hasDatasetFields, isInt, isString, KIND_F64, KIND_I32, KIND_JSON, KIND_NULL, KIND_STR, shapeOf, SnapshotDecodeError, type Meta } from './snapshot-columns';

/*
 * The lazy decoder of a version-2 snapshot's dataset frames: at load every column is checked against its
 * frame but nothing is built; a dataset's records are built from the snapshot file (read again) when it is
 * first used. Why it works this way: docs/embedded-storage.md → Snapshot dataset frames.
 */

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

function readMeta(r: ByteReader): Meta {
  const bytes = r.take(r.u32('meta length'), 'meta');
  let m: Partial<Meta> | null;
  try {
    m = JSON.parse(bytes.toString('utf8')) as Partial<Meta> | null;
  } catch {
    throw new SnapshotDecodeError('meta is not JSON');
  }
  if (!hasDatasetFields(m) || !isInt(m.rows) || m.rows < 0 || !Array.isArray(m.fields) || !m.fields.every(isString)) {
    throw new SnapshotDecodeError('bad meta fields');
  }
  return m as Meta;
}

/**
 * A snapshot file that datasets still encoded in it read their columns from, open while any of them does
 * (read back rather than copied into memory: docs/embedded-storage.md → Snapshot dataset frames).
 * References are counted: each LazyRows still encoded, and each capture of one until its snapshot is
 * written; the last release closes the file, and so does close() when the store stops. An open file stays
 * readable after a compaction deletes it.
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

export const columnsOf = (e: EncodedRows): Buffer => e.source.payload(e.offset, e.length, e.crc).subarray(e.columnsStart);

/**
 * Builds the records row by row, each made at once from its values (RecordShape.fromValues), so decoding
 * a dataset leaves no garbage but its distinct-value lists: what a decode leaves behind adds to the peak
 * RSS until the next collection.
 */
export function decodeRows(e: EncodedRows, into: Map<RowKey, DatasetRecord>, set: (key: RowKey, record: DatasetRecord) => void): void {
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
 * A dataset's row map that decodes itself from the snapshot on first use. `size` answers without decoding
 * (listings and totals need only counts); every other use decodes once, and from then on this answers as
 * an ordinary RowMap (the snapshot file released). A dataset never used is written into the next snapshot
 * as the same encoded columns. The rows go into a RowMap made at decode time (`built`), to which every
 * method forwards, never into this map's own table, which stays empty: Map.prototype methods called on it,
 * structuredClone or util.inspect see no rows (nothing does that; use the methods). Why, and why a failed
 * decode throws rather than serve a partial dataset: docs/embedded-storage.md → Snapshot dataset frames.
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
  return datasetOf(m, new LazyRows({ rows: m.rows, fields: m.fields, source, offset: at.offset, length: payload.length, crc: at.crc, columnsStart: start }));
}

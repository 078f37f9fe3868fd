import type { RecordsAppended, RecordsReplaced } from './events';
import type { DatasetRecord, FieldValue } from './types';

/*
 * Records still encoded, and the row map that can hold them so. An event decided on another thread arrives
 * as bytes (its log frame), and building its records as objects on the folding thread costs about as much
 * as parsing the body did (docs/performance.md → Measurements behind the code), for records mostly never
 * read. So such an event carries its records encoded (EncodedRecords), built only when read, and a RowMap
 * holds appended rows as slices of those encodings. Everything here is pure: decoding is the encoding's.
 */

/**
 * A row's key: the unique key (a string) under unique_by, else the row's position in the dataset's
 * history (a number, which a Map holds without allocating).
 */
export type RowKey = string | number;

/** The records of one event, still encoded. */
export interface EncodedRecords {
  readonly count: number;
  /** Bytes the encoding takes: a size estimate of the records without building them. */
  readonly bytes: number;
  /** The records, built anew on each call (deterministic: the same records every time), `count` of them. */
  decode(): readonly DatasetRecord[];
  /**
   * The same records by position, without building them: each row holds the values of `fields` in that
   * order. For readers that want values, not records (a snapshot's columns). Optional: decode() serves too.
   */
  decodeValues?(): { readonly fields: readonly string[]; readonly rows: readonly (readonly FieldValue[])[] };
}

const ENCODED = Symbol('pushbase.encodedRecords');

type RecordsEvent = RecordsAppended | RecordsReplaced;

/**
 * An event whose `records` are built from `encoded` when first read (then kept), and which the fold can
 * hand to a RowMap without reading them. Every other reader sees an ordinary event: `records` is an
 * enumerable property (JSON.stringify and spreading read it), the encoding hides under a symbol.
 */
export function withEncodedRecords<E extends RecordsEvent>(head: Omit<E, 'records'>, encoded: EncodedRecords): E {
  const event = { ...head } as Record<PropertyKey, unknown>;
  Object.defineProperty(event, ENCODED, { value: encoded, enumerable: false });
  Object.defineProperty(event, 'records', {
    enumerable: true,
    configurable: true,
    get(this: Record<PropertyKey, unknown>): readonly DatasetRecord[] {
      const records = encoded.decode();
      Object.defineProperty(this, 'records', { value: records, enumerable: true, configurable: true });
      return records;
    },
  });
  return event as unknown as E;
}

/** The still-encoded records of an event made by withEncodedRecords whose records nobody has read yet. */
export function encodedRecordsOf(event: RecordsEvent): EncodedRecords | undefined {
  const encoded = (event as unknown as Record<PropertyKey, unknown>)[ENCODED] as EncodedRecords | undefined;
  if (encoded === undefined) return undefined;
  // Once read, the records are objects anyway: storing those is cheaper than building them again.
  const desc = Object.getOwnPropertyDescriptor(event, 'records');
  return desc?.get === undefined ? undefined : encoded;
}

/** What a RowMap noted while tracked: the keys set and the keys deleted, each in the order it happened. */
export interface RowChanges {
  readonly set: RowKey[];
  readonly deleted: RowKey[];
}

/** Rows keyed first…first+count-1, of which [start, end) are still held. */
interface Deferred {
  readonly first: number;
  start: number;
  readonly end: number;
  readonly source: EncodedRecords;
}

/** A slice of an event's encoded records, as a snapshot captures it: rows first+start … first+end-1. */
export interface DeferredRows {
  readonly first: number;
  readonly start: number;
  readonly end: number;
  readonly source: EncodedRecords;
}

/**
 * A dataset's rows (a Map, insertion order = age), where the newest rows may still be encoded: slices of
 * events' EncodedRecords appended whole (appendEncoded) and dropped oldest first (deleteOldest), keyed by
 * position. Counting, appending and evicting the oldest rows need no records; any other use builds the
 * deferred records, in order, after the ones already built, and from then on this is an ordinary Map.
 */
export class RowMap extends Map<RowKey, DatasetRecord> {
  private deferred: Deferred[] = [];
  private deferredCount = 0;
  private journal: RowChanges | undefined;

  /**
   * From now on, notes in `changes` every key set and every key deleted (in the order it happens), until
   * called again (with undefined to stop). For a reader that wants what one fold step changed without
   * comparing the whole map before and after (the projector, on 5000-row datasets).
   */
  track(changes: RowChanges | undefined): void {
    this.journal = changes;
  }

  override get size(): number {
    return super.size + this.deferredCount;
  }

  /** Appends `source`'s records under the keys first, first+1, …, none of which the map holds. */
  appendEncoded(first: number, source: EncodedRecords): void {
    if (source.count === 0) return;
    if (this.journal !== undefined) for (let i = 0; i < source.count; i++) this.journal.set.push(first + i);
    this.deferred.push({ first, start: 0, end: source.count, source });
    this.deferredCount += source.count;
  }

  /** Deletes the `n` oldest rows without building any record. */
  deleteOldest(n: number): void {
    let left = n;
    if (left <= 0) return;
    for (const key of super.keys()) {
      super.delete(key);
      this.journal?.deleted.push(key);
      if (--left === 0) return;
    }
    while (left > 0 && this.deferred.length > 0) {
      const d = this.deferred[0]!;
      const take = Math.min(left, d.end - d.start);
      if (this.journal !== undefined) for (let i = 0; i < take; i++) this.journal.deleted.push(d.first + d.start + i);
      d.start += take;
      this.deferredCount -= take;
      left -= take;
      if (d.start === d.end) this.deferred.shift();
    }
  }

  /** Whether some rows are still encoded. */
  get hasDeferred(): boolean {
    return this.deferred.length > 0;
  }

  /**
   * A copy of the built rows and of the slices still encoded, oldest first, without building anything:
   * what a snapshot captures synchronously (encoded records are immutable, so the slices stay valid).
   */
  capture(): { keys: RowKey[]; records: DatasetRecord[]; deferred: DeferredRows[] } {
    return { keys: [...super.keys()], records: [...super.values()], deferred: this.deferred.map((d) => ({ first: d.first, start: d.start, end: d.end, source: d.source })) };
  }

  /** Builds every deferred record; afterwards the map is an ordinary Map. */
  protected materialise(): void {
    if (this.deferred.length === 0) return;
    const decoded = this.deferred.map((d) => {
      const records = d.source.decode();
      if (records.length !== d.source.count) throw new Error(`encoded records gave ${records.length} records, not ${d.source.count}`);
      return records;
    });
    const deferred = this.deferred;
    this.deferred = [];
    this.deferredCount = 0;
    for (let s = 0; s < deferred.length; s++) {
      const d = deferred[s]!;
      const records = decoded[s]!;
      for (let i = d.start; i < d.end; i++) super.set(d.first + i, records[i]!);
    }
  }

  override get(key: RowKey): DatasetRecord | undefined {
    this.materialise();
    return super.get(key);
  }
  override has(key: RowKey): boolean {
    this.materialise();
    return super.has(key);
  }
  override set(key: RowKey, value: DatasetRecord): this {
    this.materialise();
    this.journal?.set.push(key);
    return super.set(key, value);
  }
  override delete(key: RowKey): boolean {
    this.materialise();
    const had = super.delete(key);
    if (had) this.journal?.deleted.push(key);
    return had;
  }
  override clear(): void {
    if (this.journal !== undefined) for (const key of this.keys()) this.journal.deleted.push(key);
    this.deferred = [];
    this.deferredCount = 0;
    super.clear();
  }
  override forEach(fn: (value: DatasetRecord, key: RowKey, map: Map<RowKey, DatasetRecord>) => void, thisArg?: unknown): void {
    this.materialise();
    super.forEach(fn, thisArg);
  }
  override keys(): MapIterator<RowKey> {
    this.materialise();
    return super.keys();
  }
  override values(): MapIterator<DatasetRecord> {
    this.materialise();
    return super.values();
  }
  override entries(): MapIterator<[RowKey, DatasetRecord]> {
    this.materialise();
    return super.entries();
  }
  override [Symbol.iterator](): MapIterator<[RowKey, DatasetRecord]> {
    return this.entries();
  }
}

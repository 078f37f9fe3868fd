import {
  EVENT_SCHEMA_VERSION,
  recordShape,
  withEncodedRecords,
  type EncodedRecords,
  type DatasetDefined,
  type DatasetDeleted,
  type DatasetEvent,
  type DatasetRecord,
  type FieldValue,
  type RecordShape,
  type RecordsAppended,
  type RecordsReplaced,
} from '@pushbase/domain';

/*
 * The event envelope, one codec for every log adapter (the file log's frames, Kafka's messages, replay):
 * schema_version 2 stores records by position (`fields` once, then `rows`) and is what is written; version 1
 * (records as objects) is still read through the upcaster. Decoding checks the envelope and the payload's
 * shape, not every record, and an event it cannot read is an error, never skipped. The encoding and why:
 * docs/architecture.md → The event encoding.
 * An event may carry `idempotency` (the write's Idempotency-Key and its request's fingerprint), optional and
 * without a new schema_version: docs/architecture.md → The event encoding says why.
 */

/** An event this reader cannot understand. The log position, when known, is in the message. */
export class EventDecodeError extends Error {
  override readonly name = 'EventDecodeError';
}

type RawEvent = Record<string, unknown>;

/**
 * Lifts an event of version `n` (the key it is registered under) to version `n + 1`, as stored (the raw
 * JSON value). Registered when EVENT_SCHEMA_VERSION is bumped, so events written by older writers keep
 * being read; a chain of them lifts any older version to the current one.
 */
export type Upcaster = (event: RawEvent) => RawEvent;

export interface EventCodecOptions {
  /** The version this reader folds. Default: the domain's EVENT_SCHEMA_VERSION. */
  readonly currentVersion?: number;
  /** Upcasters by the version they lift from. Default: EVENT_UPCASTERS. */
  readonly upcasters?: Readonly<Record<number, Upcaster>>;
}

/**
 * Record shapes by field list. Field lists are per dataset definition, so there are few; the cache is still
 * bounded (emptied when full) so a stream of odd ones cannot grow it without end. A cache, not state: any
 * entry is rebuilt from its key.
 */
const shapes = new Map<string, RecordShape>();
const MAX_SHAPES = 4096;

function shapeOf(fields: readonly string[]): RecordShape {
  // JSON, not join(','): a field name may hold a comma, and ["a,b"] is not ["a", "b"].
  const key = JSON.stringify(fields);
  const known = shapes.get(key);
  if (known !== undefined) return known;
  if (shapes.size >= MAX_SHAPES) shapes.clear();
  const shape = recordShape([...fields]);
  shapes.set(key, shape);
  return shape;
}

/**
 * The field order of the domain's normalised records of one dataset: the first record's keys, since they
 * all hold exactly the dataset's fields.
 */
const fieldsOf = (records: readonly DatasetRecord[]): string[] => (records.length === 0 ? [] : Object.keys(records[0] as DatasetRecord));

function toRows(fields: readonly string[], records: readonly DatasetRecord[]): FieldValue[][] {
  const shape = shapeOf(fields);
  const rows = new Array<FieldValue[]>(records.length);
  for (let i = 0; i < records.length; i++) rows[i] = shape.toValues(records[i] as DatasetRecord);
  return rows;
}

function toRecords(fields: readonly string[], rows: readonly (readonly FieldValue[])[]): DatasetRecord[] {
  const shape = shapeOf(fields);
  const records = new Array<DatasetRecord>(rows.length);
  for (let i = 0; i < rows.length; i++) records[i] = shape.fromValues(rows[i] as FieldValue[]);
  return records;
}

const isRecord = (v: unknown): v is DatasetRecord => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Version 1 → 2: records as objects → records by position. The fields are every key the records hold (the
 * domain wrote them normalised, all with the same keys; a record without one of them reads as null there,
 * as a normalised record would hold it), so nothing a version 1 event held is lost.
 */
function recordsByPosition(event: RawEvent): RawEvent {
  if (event.type !== 'RecordsAppended' && event.type !== 'RecordsReplaced') return { ...event, schema_version: 2 };
  const { records, ...rest } = event;
  if (!Array.isArray(records) || !records.every(isRecord)) {
    throw new EventDecodeError(`${String(event.type)}: records must be an array of objects, not ${describe(records)}`);
  }
  const seen = new Set<string>();
  for (const r of records) for (const k of Object.keys(r)) seen.add(k);
  const fields = [...seen];
  return { ...rest, schema_version: 2, fields, rows: toRows(fields, records) };
}

/** The upcasters of every version this pushbase has written, by the version they lift from. */
export const EVENT_UPCASTERS: Readonly<Record<number, Upcaster>> = Object.freeze({ 1: recordsByPosition });

const EVENT_TYPES: ReadonlySet<string> = new Set<DatasetEvent['type']>(['DatasetDefined', 'RecordsAppended', 'RecordsReplaced', 'DatasetDeleted']);

const isObject = (v: unknown): v is RawEvent => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An event as it is stored: the current schema_version whatever the in-memory event says (the in-memory
 * shape is the same for every version), records by position.
 */
function toWire(event: DatasetEvent): RawEvent {
  const envelope = {
    type: event.type,
    schema_version: EVENT_SCHEMA_VERSION,
    account: event.account,
    dataset: event.dataset,
    incarnation: event.incarnation,
    at: event.at,
    ...(event.idempotency === undefined ? {} : { idempotency: { key: event.idempotency.key, fingerprint: event.idempotency.fingerprint } }),
  };
  switch (event.type) {
    case 'DatasetDefined':
      return { ...envelope, definition: event.definition };
    case 'RecordsAppended': {
      const fields = fieldsOf(event.records);
      return { ...envelope, fields, rows: toRows(fields, event.records), delete_by: event.delete_by };
    }
    case 'RecordsReplaced': {
      const fields = fieldsOf(event.records);
      return { ...envelope, fields, rows: toRows(fields, event.records) };
    }
    case 'DatasetDeleted':
      return envelope;
  }
}

export function encodeEvent(event: DatasetEvent): Buffer {
  return Buffer.from(JSON.stringify(toWire(event)), 'utf8');
}

/** The events of one append as one JSON array: the file log's frame payload. */
export function encodeEventBatch(events: readonly DatasetEvent[]): Buffer {
  return Buffer.from(encodeEventBatchText(events), 'utf8');
}

/** encodeEventBatch as a string (for an encoder of its own, e.g. TextEncoder into a transferable buffer). */
export const encodeEventBatchText = (events: readonly DatasetEvent[]): string => JSON.stringify(events.map(toWire));

/** One event from its UTF-8 JSON (a Kafka message's value), upcast to the current version. */
export function decodeEvent(bytes: Uint8Array | string, options: EventCodecOptions = {}): DatasetEvent {
  return decodeEventValue(parseJson(bytes), options);
}

/** The events of one file-log frame: a JSON array of events. */
export function decodeEventBatch(bytes: Uint8Array | string, options: EventCodecOptions = {}): DatasetEvent[] {
  return decodeWireBatch(bytes, options).map(fromWire);
}

/** A batch's events, checked and upcast, as stored: records by position. */
function decodeWireBatch(bytes: Uint8Array | string, options: EventCodecOptions): RawEvent[] {
  const parsed = parseJson(bytes);
  if (!Array.isArray(parsed)) throw new EventDecodeError(`an event batch must be a JSON array, not ${kind(parsed)}`);
  return parsed.map((value, i) => {
    try {
      return checkedWire(value, options);
    } catch (err) {
      if (err instanceof EventDecodeError) throw new EventDecodeError(`event ${i} of the batch: ${err.message}`);
      throw err;
    }
  });
}

/** An already parsed event, upcast to the current version. */
export function decodeEventValue(value: unknown, options: EventCodecOptions = {}): DatasetEvent {
  return fromWire(checkedWire(value, options));
}

/** An already parsed event, upcast to the current version and checked, as stored. */
function checkedWire(value: unknown, options: EventCodecOptions): RawEvent {
  const current = options.currentVersion ?? EVENT_SCHEMA_VERSION;
  const upcasters = options.upcasters ?? EVENT_UPCASTERS;
  if (!isObject(value)) throw new EventDecodeError(`an event must be a JSON object, not ${kind(value)}`);
  let event = value;
  let version = event.schema_version;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) {
    throw new EventDecodeError(`the event has no valid schema_version (${describe(version)})`);
  }
  if (version > current) {
    throw new EventDecodeError(
      `the event has schema_version ${version}, newer than this reader knows (${current}); a newer pushbase wrote it: ` +
        'upgrade this reader before it reads on (the event is not skipped)',
    );
  }
  while (version < current) {
    const upcast = upcasters[version];
    if (upcast === undefined) throw new EventDecodeError(`no upcaster from schema_version ${version} to ${version + 1}`);
    event = upcast(event);
    if (event.schema_version !== version + 1) {
      throw new EventDecodeError(`the upcaster from schema_version ${version} gave version ${describe(event.schema_version)}, not ${version + 1}`);
    }
    version += 1;
  }
  checkShape(event);
  return event;
}

/** The in-memory event of a checked current-version event: its rows back into records. */
function fromWire(e: RawEvent): DatasetEvent {
  if (e.type !== 'RecordsAppended' && e.type !== 'RecordsReplaced') return e as unknown as DatasetEvent;
  const { fields, rows, ...rest } = e as RawEvent & { fields: string[]; rows: FieldValue[][] };
  return { ...rest, records: toRecords(fields, rows) } as unknown as DatasetEvent;
}

function checkShape(e: RawEvent): void {
  const type = e.type;
  if (typeof type !== 'string' || !EVENT_TYPES.has(type)) throw new EventDecodeError(`unknown event type ${describe(type)}`);
  for (const field of ['account', 'dataset', 'incarnation'] as const) {
    if (typeof e[field] !== 'string' || e[field] === '') throw new EventDecodeError(`${type}: ${field} must be a non-empty string, not ${describe(e[field])}`);
  }
  if (typeof e.at !== 'number' || !Number.isFinite(e.at)) throw new EventDecodeError(`${type}: at must be a number, not ${describe(e.at)}`);
  const mark = e.idempotency;
  if (mark !== undefined && (!isObject(mark) || typeof mark.key !== 'string' || mark.key === '' || typeof mark.fingerprint !== 'string' || mark.fingerprint === '')) {
    throw new EventDecodeError(`${type}: idempotency must be an object with a key and a fingerprint, not ${describe(mark)}`);
  }
  switch (type as DatasetEvent['type']) {
    case 'DatasetDefined': {
      const definition = e.definition;
      if (!isObject(definition) || !isObject(definition.fields) || !Array.isArray(definition.unique_by)) {
        throw new EventDecodeError(`DatasetDefined: definition must be an object with fields and unique_by`);
      }
      return;
    }
    case 'RecordsAppended':
      checkRows(type, e);
      if (e.delete_by !== null && typeof e.delete_by !== 'string') {
        throw new EventDecodeError(`RecordsAppended: delete_by must be a field name or null, not ${describe(e.delete_by)}`);
      }
      return;
    case 'RecordsReplaced':
      checkRows(type, e);
      return;
    case 'DatasetDeleted':
      return;
  }
}

function checkRows(type: string, e: RawEvent): void {
  const { fields, rows } = e;
  if (!Array.isArray(fields) || !fields.every((f) => typeof f === 'string' && f !== '') || new Set(fields).size !== fields.length) {
    throw new EventDecodeError(`${type}: fields must be an array of distinct field names, not ${describe(fields)}`);
  }
  if (!Array.isArray(rows)) throw new EventDecodeError(`${type}: rows must be an array, not ${describe(rows)}`);
  for (let i = 0; i < rows.length; i++) {
    const row: unknown = rows[i];
    if (!Array.isArray(row) || row.length !== fields.length) throw new EventDecodeError(`${type}: row ${i} must be an array of ${fields.length} values`);
  }
}

/**
 * An event without its records, as the thread that encoded it describes it to the thread that folds it:
 * events with records carry their number instead (a few hundred bytes to pass, not the records).
 */
export type EventHead =
  | DatasetDefined
  | DatasetDeleted
  | (Omit<RecordsAppended, 'records'> & { readonly count: number })
  | (Omit<RecordsReplaced, 'records'> & { readonly count: number });

export function eventHeads(events: readonly DatasetEvent[]): EventHead[] {
  return events.map((e) => {
    if (e.type !== 'RecordsAppended' && e.type !== 'RecordsReplaced') return e;
    const { records, ...head } = e;
    return { ...head, count: records.length };
  });
}

/**
 * The events of one encoded batch (encodeEventBatch's bytes, or its text) from their heads, without
 * decoding it: each event's records are decoded from `encoded` only when read (withEncodedRecords), and a
 * dataset's rows may keep them encoded until then (the domain's RowMap). `encoded` is held, so bytes must
 * not change; text is what to hold for long (it lives on the JS heap, where the collector sizes itself).
 */
export function eventsFromEncodedBatch(encoded: Uint8Array | string, heads: readonly EventHead[]): DatasetEvent[] {
  return heads.map((h, i) => {
    if (h.type !== 'RecordsAppended' && h.type !== 'RecordsReplaced') return h;
    const { count, ...head } = h;
    const records = new BatchRecords(encoded, i, h.type, count);
    return h.type === 'RecordsAppended'
      ? withEncodedRecords<RecordsAppended>(head as Omit<RecordsAppended, 'records'>, records)
      : withEncodedRecords<RecordsReplaced>(head as Omit<RecordsReplaced, 'records'>, records);
  });
}

/**
 * The records of event `index` of an encoded batch, decoded on demand. Plain data (the batch, the index,
 * what the head said), so it can be rebuilt on another thread from those: `new BatchRecords(...)`.
 */
export class BatchRecords implements EncodedRecords {
  readonly bytes: number;

  constructor(
    readonly encoded: Uint8Array | string,
    readonly index: number,
    readonly type: 'RecordsAppended' | 'RecordsReplaced',
    readonly count: number,
  ) {
    this.bytes = typeof encoded === 'string' ? encoded.length : encoded.byteLength;
  }

  decodeValues(): { fields: string[]; rows: FieldValue[][] } {
    const event = decodeWireBatch(this.encoded, {})[this.index] as (RawEvent & { fields: string[]; rows: FieldValue[][] }) | undefined;
    if (event === undefined || event.type !== this.type || event.rows.length !== this.count) {
      throw new EventDecodeError(`event ${this.index} of the batch is not the ${this.type} of ${this.count} records its head says`);
    }
    return event;
  }

  decode(): readonly DatasetRecord[] {
    const { fields, rows } = this.decodeValues();
    return toRecords(fields, rows);
  }
}

function parseJson(bytes: Uint8Array | string): unknown {
  const text = typeof bytes === 'string' ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new EventDecodeError(`not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
}

const kind = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);
const describe = (v: unknown): string =>
  typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : typeof v === 'number' ? String(v) : kind(v);

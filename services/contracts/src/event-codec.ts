import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';

/*
 * The event envelope, one codec for every log adapter (the file log's frames, Kafka's messages, replay):
 *
 *   { "type", "schema_version", "account", "dataset", "incarnation", "at", …the type's payload fields }
 *
 * i.e. an event is stored as its own JSON, exactly as the domain declares it (services/domain/src/events.ts):
 * the envelope fields and the payload (`definition`, `records`, `delete_by`) side by side. The file log
 * stores a JSON array of the events of one append per frame; Kafka stores one event per message.
 *
 * Decoding checks the envelope and the payload's shape, not every record: events are written only after
 * the domain decided them (records validated and normalised), so re-validating 500 records on every replay
 * would cost a second copy of the rules for nothing. What decoding must catch is what a writer of another
 * version could put there: an unknown `type`, a `schema_version` this reader does not know, a missing field.
 * Such an event is an error naming what is wrong, never skipped: every later event of its dataset depends
 * on it (the fold is order-dependent), so dropping one would silently corrupt the dataset.
 */

/** An event this reader cannot understand. The log position, when known, is in the message. */
export class EventDecodeError extends Error {
  override readonly name = 'EventDecodeError';
}

type RawEvent = Record<string, unknown>;

/**
 * Lifts an event of version `n` (the key it is registered under) to version `n + 1`. Registered when
 * EVENT_SCHEMA_VERSION is bumped, so events written by older writers keep being read; a chain of them
 * lifts any older version to the current one.
 */
export type Upcaster = (event: RawEvent) => RawEvent;

export interface EventCodecOptions {
  /** The version this reader folds. Default: the domain's EVENT_SCHEMA_VERSION. */
  readonly currentVersion?: number;
  /** Upcasters by the version they lift from. Default none: version 1 is the only one ever written. */
  readonly upcasters?: Readonly<Record<number, Upcaster>>;
}

const EVENT_TYPES: ReadonlySet<string> = new Set<DatasetEvent['type']>(['DatasetDefined', 'RecordsAppended', 'RecordsReplaced', 'DatasetDeleted']);

const isObject = (v: unknown): v is RawEvent => typeof v === 'object' && v !== null && !Array.isArray(v);

export function encodeEvent(event: DatasetEvent): Buffer {
  return Buffer.from(JSON.stringify(event), 'utf8');
}

/** The events of one append as one JSON array: the file log's frame payload. */
export function encodeEventBatch(events: readonly DatasetEvent[]): Buffer {
  return Buffer.from(JSON.stringify(events), 'utf8');
}

/** One event from its UTF-8 JSON (a Kafka message's value), upcast to the current version. */
export function decodeEvent(bytes: Uint8Array | string, options: EventCodecOptions = {}): DatasetEvent {
  return decodeEventValue(parseJson(bytes), options);
}

/** The events of one file-log frame: a JSON array of events. */
export function decodeEventBatch(bytes: Uint8Array | string, options: EventCodecOptions = {}): DatasetEvent[] {
  const parsed = parseJson(bytes);
  if (!Array.isArray(parsed)) throw new EventDecodeError(`an event batch must be a JSON array, not ${kind(parsed)}`);
  return parsed.map((value, i) => {
    try {
      return decodeEventValue(value, options);
    } catch (err) {
      if (err instanceof EventDecodeError) throw new EventDecodeError(`event ${i} of the batch: ${err.message}`);
      throw err;
    }
  });
}

/** An already parsed event, upcast to the current version. */
export function decodeEventValue(value: unknown, options: EventCodecOptions = {}): DatasetEvent {
  const current = options.currentVersion ?? EVENT_SCHEMA_VERSION;
  const upcasters = options.upcasters ?? {};
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
  return event as unknown as DatasetEvent;
}

function checkShape(e: RawEvent): void {
  const type = e.type;
  if (typeof type !== 'string' || !EVENT_TYPES.has(type)) throw new EventDecodeError(`unknown event type ${describe(type)}`);
  for (const field of ['account', 'dataset', 'incarnation'] as const) {
    if (typeof e[field] !== 'string' || e[field] === '') throw new EventDecodeError(`${type}: ${field} must be a non-empty string, not ${describe(e[field])}`);
  }
  if (typeof e.at !== 'number' || !Number.isFinite(e.at)) throw new EventDecodeError(`${type}: at must be a number, not ${describe(e.at)}`);
  switch (type as DatasetEvent['type']) {
    case 'DatasetDefined': {
      const definition = e.definition;
      if (!isObject(definition) || !isObject(definition.fields) || !Array.isArray(definition.unique_by)) {
        throw new EventDecodeError(`DatasetDefined: definition must be an object with fields and unique_by`);
      }
      return;
    }
    case 'RecordsAppended':
      if (!Array.isArray(e.records)) throw new EventDecodeError(`RecordsAppended: records must be an array, not ${describe(e.records)}`);
      if (e.delete_by !== null && typeof e.delete_by !== 'string') {
        throw new EventDecodeError(`RecordsAppended: delete_by must be a field name or null, not ${describe(e.delete_by)}`);
      }
      return;
    case 'RecordsReplaced':
      if (!Array.isArray(e.records)) throw new EventDecodeError(`RecordsReplaced: records must be an array, not ${describe(e.records)}`);
      return;
    case 'DatasetDeleted':
      return;
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

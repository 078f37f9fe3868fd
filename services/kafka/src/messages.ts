import { decodeEvent, encodeEvent, EventDecodeError, type EventCodecOptions, type PositionedEvent } from '@pushbase/contracts';
import { DomainError, streamKey, type DatasetEvent } from '@pushbase/domain';
import { Partitioners, type PartitionMetadata } from 'kafkajs';

/*
 * One dataset event per Kafka message: key `account/dataset` (streamKey), so one dataset's events share a
 * partition and keep their order; value the event's envelope (services/contracts/src/event-codec.ts), the
 * same JSON the file log stores; headers `pushbase-append: "<index>/<count>"` on the events of a
 * several-event append, and the trace context while tracing is on. Why: docs/architecture.md → The Kafka
 * EventLog.
 */

export const APPEND_HEADER = 'pushbase-append';

export interface OutgoingMessage {
  readonly key: string;
  readonly value: Buffer;
  readonly headers?: Readonly<Record<string, string>>;
}

const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** A message with the partition the appender chose for it. */
export type PlacedMessage = OutgoingMessage & { readonly partition: number };

/** A produce's answer: each partition's first offset. */
export type BaseOffsets = readonly { partition: number; baseOffset: number }[];

/**
 * The messages of one append. All its events must belong to one dataset: Kafka stores a produce request's
 * messages for one partition as one record batch, atomically, but nothing is atomic across partitions
 * (short of transactions), and the port promises an append is stored whole or not at all.
 * `encoded` is encodeEventBatch(events) made in a worker thread (the file log's frame): for the usual single
 * event its value is that array's inside, sliced without a copy.
 */
export function appendMessages(events: readonly DatasetEvent[], encoded?: Uint8Array): OutgoingMessage[] {
  const first = events[0];
  if (first === undefined) throw new Error('An append needs at least one event');
  const key = streamKey(first.account, first.dataset);
  for (const e of events) {
    if (streamKey(e.account, e.dataset) !== key) {
      throw new Error(`The events of one append must belong to one dataset (${key}), not also ${streamKey(e.account, e.dataset)}`);
    }
  }
  if (events.length === 1) {
    const sliced = encoded === undefined ? undefined : singleEventValue(encoded);
    return [{ key, value: sliced ?? encodeEvent(first) }];
  }
  return events.map((e, i) => ({ key, value: encodeEvent(e), headers: { [APPEND_HEADER]: `${i}/${events.length}` } }));
}

/** `[<event>]` → `<event>` as a view, or undefined when `encoded` is not a one-element array's JSON. */
function singleEventValue(encoded: Uint8Array): Buffer | undefined {
  const n = encoded.byteLength;
  if (n < 4 || encoded[0] !== OPEN_BRACKET || encoded[n - 1] !== CLOSE_BRACKET || encoded[1] !== 0x7b /* { */) return undefined;
  return Buffer.from(encoded.buffer, encoded.byteOffset + 1, n - 2);
}

/** The partition Kafka's Java client (and kafkajs's default partitioner) picks for `key`: murmur2 mod n. */
export function partitionerFor(partitions: number): (key: string) => number {
  const choose = Partitioners.DefaultPartitioner();
  // Keyed messages only look at how many partitions there are.
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 0 }) as PartitionMetadata);
  return (key) => choose({ topic: '', partitionMetadata, message: { key, value: null } });
}

/** A message the reader cannot turn into an event. Never skipped: the consumer stops on it. */
export class PoisonEventError extends Error {
  override readonly name = 'PoisonEventError';
  /** kafkajs reads this: do not retry, do not restart. */
  readonly retriable = false;
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: string,
    readonly reason: string,
  ) {
    super(
      `Event at ${topic}/${partition}@${offset} cannot be read: ${reason}. The consumer stops here rather than skip it ` +
        '(every later event of its dataset, or of its account on the accounts topic, depends on it); fix the reader, or the message, and restart.',
    );
  }
}

/**
 * Kafka offsets are int64; a JS number holds every integer below 2^53 exactly. At a million events a second
 * into one partition that is 285 years, so positions as numbers are safe; one beyond would be refused here
 * loudly rather than rounded.
 */
export function offsetNumber(offset: string): number {
  const n = Number(offset);
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`Kafka offset ${offset} is not a safe integer`);
  return n;
}

/** An event with where it sits in the log and in its append. */
export interface ConsumedEvent extends PositionedEvent {
  /** Its place among the events of one append: `{ index: 0, count: 1 }` for the usual single event. */
  readonly append: { readonly index: number; readonly count: number };
  /** The trace context of the append that wrote it, when it was written while tracing was on. */
  readonly trace?: Readonly<Record<string, string>>;
}

export interface IncomingMessage {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly offset: string;
  readonly headers?: Readonly<Record<string, Buffer | string | (Buffer | string)[] | undefined>>;
}

const SINGLE = Object.freeze({ index: 0, count: 1 });

/** Decodes one message; throws PoisonEventError for anything that is not a well-formed event of its key. */
export function decodeMessage(topic: string, partition: number, message: IncomingMessage, codec: EventCodecOptions = {}): ConsumedEvent {
  const poison = (reason: string): PoisonEventError => new PoisonEventError(topic, partition, message.offset, reason);
  const offset = offsetNumber(message.offset);
  if (message.value === null) throw poison('the message has no value');
  let event: DatasetEvent;
  try {
    event = decodeEvent(message.value, codec);
  } catch (err) {
    if (err instanceof EventDecodeError) throw poison(err.message);
    throw err;
  }
  const key = streamKey(event.account, event.dataset);
  if (message.key === null || message.key.toString('utf8') !== key) {
    // Keyed elsewhere, it may sit in another partition than its dataset's other events: order is lost.
    throw poison(`its key ${message.key === null ? 'is missing' : JSON.stringify(message.key.toString('utf8'))}, not ${JSON.stringify(key)}`);
  }
  const header = message.headers?.[APPEND_HEADER];
  let append: ConsumedEvent['append'] = SINGLE;
  if (header !== undefined) {
    const m = /^(\d+)\/(\d+)$/.exec(Array.isArray(header) ? String(header[0]) : String(header));
    const index = Number(m?.[1]);
    const count = Number(m?.[2]);
    if (m === null || !(index < count)) throw poison(`its ${APPEND_HEADER} header is not index/count`);
    append = { index, count };
  }
  const trace = traceOf(message.headers);
  return trace === undefined ? { event, position: { partition, offset }, append } : { event, position: { partition, offset }, append, trace };
}

/** The W3C trace context of the append that wrote the message (its `traceparent` and `tracestate` headers). */
function traceOf(headers: IncomingMessage['headers']): Record<string, string> | undefined {
  const parent = headers?.traceparent;
  if (parent === undefined) return undefined;
  const text = (v: Buffer | string | (Buffer | string)[]): string => String(Array.isArray(v) ? v[0] : v);
  const state = headers?.tracestate;
  return state === undefined ? { traceparent: text(parent) } : { traceparent: text(parent), tracestate: text(state) };
}

/** What an append that cannot be stored gets: the log could not take it now. */
export const unavailable = (message: string): DomainError => new DomainError('unavailable', message);

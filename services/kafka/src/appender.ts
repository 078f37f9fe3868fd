import type { EventAppender, StreamPosition } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import { Partitioners, type Producer } from 'kafkajs';
import { createKafka, type KafkaConnection } from './connection';
import { appendMessages, offsetNumber, partitionerFor, unavailable, type OutgoingMessage } from './messages';
import { DEFAULT_MAX_MESSAGE_BYTES } from './topic';

/*
 * The write half of the Kafka event log (EventAppender): what the schema and record services use.
 *
 * Linger and group commit. An append is queued; the first append into an empty queue starts a short timer
 * (`lingerMs`), and when it fires everything queued goes out in ONE sendBatch — one produce request, one
 * record batch per partition. While that request is in flight, new appends queue up and go out together the
 * moment it completes. So under load one round trip carries the appends of many concurrent requests, and
 * throughput follows the batch size, not the round-trip time; an idle appender adds only `lingerMs`.
 *
 * What ordering and exactly-once rest on (kafkajs 2.2, read in its producer source):
 *  - The producer is idempotent (a producer id; each partition's record batches carry sequence numbers) and
 *    every request uses acks=all (-1): the broker answers only once all in-sync replicas hold the batch, and
 *    it rejects a batch out of sequence and answers a batch it already wrote (it remembers the last five per
 *    partition) with the original offset instead of writing it twice.
 *  - ONE sendBatch in flight per appender, by construction (the queue above), and maxInFlightRequests 1. This
 *    is what makes kafkajs's retries safe: on a failed attempt kafkajs rolls the partition's sequence back
 *    and the retry re-sends the same messages with the same sequence numbers, so a retry of a batch the
 *    broker did write is deduplicated. With two sendBatch calls in flight, the second could take those
 *    sequence numbers in between, and the broker would then take ITS messages for duplicates of the first's:
 *    acknowledged, never stored. (kafkajs's per-broker lock serialises requests, not this gap.)
 *  - Within a sendBatch, kafkajs groups messages per partition in the order given, so one dataset's events
 *    keep queue order, i.e. the order of the append() calls.
 *  - A sendBatch that fails after kafkajs's (bounded) retries leaves the producer's sequence numbers in an
 *    unknown state relative to the broker, so that producer is discarded and the next batch goes out on a
 *    new one, with a new producer id whose sequences start afresh.
 * Retries are bounded (KafkaConnection.retry) rather than kafkajs's idempotent default of "forever": a write
 * must answer within `appendTimeoutMs` either way, and an unbounded retry loop would hold every later
 * append behind it.
 *
 * Failure. Every append of a failed batch, and every append still unacknowledged at its deadline, rejects
 * with DomainError `unavailable`. Known gap (issue 7): a request that timed out may still have been written
 * by the broker, so "unavailable" can be said of an event that is in the log and that readers will apply.
 */

export interface KafkaEventAppenderOptions {
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** How long the first append into an empty queue waits for others to share its request. Default 5 ms. */
  readonly lingerMs?: number;
  /** A batch goes out as soon as this many bytes are queued, and no request carries more (unless one append alone is larger). Default 4 MiB. */
  readonly maxBatchBytes?: number;
  /** The topic's max.message.bytes; a larger append is refused as invalid. Default 16 MiB, as ensureTopic creates it. */
  readonly maxMessageBytes?: number;
  /** From append() to the broker's acknowledgment; later, the append rejects as unavailable. Default 30000 ms. */
  readonly appendTimeoutMs?: number;
  /** Test seam: how a producer is made. Default: a kafkajs idempotent producer. */
  readonly session?: () => ProduceSession;
  /** Called with every kafkajs producer made, e.g. to listen to its instrumentation events. */
  readonly onProducer?: (producer: Producer) => void;
}

/** What the appender needs from a producer. */
export interface ProduceSession {
  /** Connects; resolves with the topic's partition count. */
  connect(): Promise<number>;
  /** Sends the messages (partition already chosen) in one request; resolves with each partition's first offset. */
  send(messages: readonly (OutgoingMessage & { readonly partition: number })[]): Promise<readonly { partition: number; baseOffset: number }[]>;
  disconnect(): Promise<void>;
}

interface Pending {
  readonly messages: readonly OutgoingMessage[];
  readonly bytes: number;
  readonly resolve: (positions: StreamPosition[]) => void;
  readonly reject: (err: Error) => void;
  settled: boolean;
  deadline?: NodeJS.Timeout;
}

interface Session {
  readonly session: ProduceSession;
  readonly partitionOf: (key: string) => number;
}

/** Per-message framing the broker adds around key and value; only to keep batches under the limits. */
const MESSAGE_OVERHEAD_BYTES = 64;

export interface AppenderStats {
  /** sendBatch calls (produce requests) made. */
  readonly requests: number;
  /** Appends acknowledged. */
  readonly appends: number;
  /** Messages (events) acknowledged. */
  readonly messages: number;
}

export class KafkaEventAppender implements EventAppender {
  private readonly topic: string;
  private readonly lingerMs: number;
  private readonly maxBatchBytes: number;
  private readonly maxMessageBytes: number;
  private readonly appendTimeoutMs: number;
  private readonly makeSession: () => ProduceSession;
  private queue: Pending[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private current: Session | undefined;
  private closing: Promise<void> | undefined;
  private counts = { requests: 0, appends: 0, messages: 0 };

  constructor(options: KafkaEventAppenderOptions) {
    this.topic = options.topic;
    this.lingerMs = options.lingerMs ?? 5;
    this.maxBatchBytes = options.maxBatchBytes ?? 4 * 1024 * 1024;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.appendTimeoutMs = options.appendTimeoutMs ?? 30_000;
    this.makeSession = options.session ?? (() => kafkaSession(options));
  }

  append(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<void> {
    return this.appendAt(events, encoded).then(() => undefined);
  }

  /** As append(), resolving with where each event was stored. */
  appendAt(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<StreamPosition[]> {
    if (this.closing) return Promise.reject(unavailable('The event appender is closed'));
    let messages: OutgoingMessage[];
    try {
      messages = appendMessages(events, encoded);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    let bytes = 0;
    for (const m of messages) {
      const size = m.key.length + m.value.length + MESSAGE_OVERHEAD_BYTES;
      if (size > this.maxMessageBytes) {
        // No retry could succeed, so this is the request's fault, not an outage (the body limit prevents it).
        return Promise.reject(new DomainError('invalid', `The event is ${m.value.length} bytes, over the event log's limit of ${this.maxMessageBytes}`));
      }
      bytes += size;
    }
    return new Promise<StreamPosition[]>((resolve, reject) => {
      const pending: Pending = { messages, bytes, resolve, reject, settled: false };
      pending.deadline = setTimeout(() => {
        this.settle(pending, unavailable(`Kafka did not acknowledge the write within ${this.appendTimeoutMs} ms`));
        // Not sent yet: it never will be. (In flight: the outcome is unknown; see the note at the top.)
        const at = this.queue.indexOf(pending);
        if (at >= 0) {
          this.queue.splice(at, 1);
          this.queuedBytes -= pending.bytes;
        }
      }, this.appendTimeoutMs);
      this.queue.push(pending);
      this.queuedBytes += bytes;
      this.schedule();
    });
  }

  stats(): AppenderStats {
    return { ...this.counts };
  }

  /** Sends what is queued at once, waits for every append in flight, disconnects. Later appends reject. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.timer !== undefined) {
        clearTimeout(this.timer);
        this.timer = undefined;
        this.startSending();
      }
      while (this.sending) await this.sending;
      const current = this.current;
      this.current = undefined;
      await current?.session.disconnect();
    })();
    return this.closing;
  }

  private schedule(): void {
    if (this.sending) return; // the running send loop takes it next
    if (this.queuedBytes >= this.maxBatchBytes || this.closing) {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      this.startSending();
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.startSending();
      }, this.lingerMs);
    }
  }

  private startSending(): void {
    this.sending ??= this.sendQueued();
  }

  /** One request at a time, until the queue is empty (appends that arrive meanwhile go in the next one). */
  private async sendQueued(): Promise<void> {
    await Promise.resolve(); // so that `sending` is set before the loop can clear it
    while (this.queue.length > 0) {
      const batch = this.takeBatch();
      try {
        await this.sendBatch(batch);
      } catch (err) {
        // A bug rather than an outage, but the appends must hear of it now, not at their deadline.
        for (const p of batch) this.settle(p, err instanceof Error ? err : new Error(String(err)));
      }
    }
    // Cleared synchronously after seeing the queue empty: an append queued from here on finds `sending`
    // unset and starts the next round. (Cleared a microtask later, an append made as the last one resolved
    // would find it still set, rely on this loop, and wait for its deadline.)
    this.sending = undefined;
  }

  private takeBatch(): Pending[] {
    let bytes = 0;
    let n = 0;
    for (const p of this.queue) {
      if (n > 0 && bytes + p.bytes > this.maxBatchBytes) break;
      bytes += p.bytes;
      n += 1;
    }
    this.queuedBytes -= bytes;
    return this.queue.splice(0, n);
  }

  private async sendBatch(batch: Pending[]): Promise<void> {
    const live = batch.filter((p) => !p.settled);
    if (live.length === 0) return;
    let session: Session;
    try {
      session = await this.session();
    } catch (err) {
      for (const p of live) this.settle(p, unavailable(`Kafka cannot be reached: ${errorText(err)}`));
      return;
    }
    const messages = live.flatMap((p) => p.messages.map((m) => ({ ...m, partition: session.partitionOf(m.key) })));
    let acks: readonly { partition: number; baseOffset: number }[];
    try {
      this.counts.requests += 1;
      acks = await session.session.send(messages);
    } catch (err) {
      for (const p of live) this.settle(p, unavailable(`Kafka did not take the write: ${errorText(err)}`));
      // Its sequence numbers may disagree with the broker's now: the next batch goes out on a new producer.
      if (this.current === session) this.current = undefined;
      void session.session.disconnect().catch(() => undefined);
      return;
    }
    // Offsets: a partition's messages are stored in the order sent, from its base offset on.
    const next = new Map(acks.map((a) => [a.partition, a.baseOffset]));
    for (const p of live) {
      const positions: StreamPosition[] = [];
      for (const m of p.messages) {
        const partition = session.partitionOf(m.key);
        const offset = next.get(partition);
        if (offset === undefined) {
          positions.length = 0;
          break;
        }
        next.set(partition, offset + 1);
        positions.push({ partition, offset });
      }
      if (positions.length === p.messages.length) {
        if (p.settled) continue; // timed out meanwhile: told unavailable, yet stored (issue 7)
        this.counts.appends += 1;
        this.counts.messages += p.messages.length;
        this.settle(p, positions);
      } else {
        this.settle(p, unavailable('Kafka acknowledged the request without the partition of this write'));
      }
    }
  }

  private async session(): Promise<Session> {
    if (this.current) return this.current;
    const session = this.makeSession();
    try {
      const partitions = await session.connect();
      this.current = { session, partitionOf: partitionerFor(partitions) };
      return this.current;
    } catch (err) {
      await session.disconnect().catch(() => undefined);
      throw err;
    }
  }

  private settle(p: Pending, outcome: StreamPosition[] | Error): void {
    if (p.settled) return;
    p.settled = true;
    clearTimeout(p.deadline);
    if (outcome instanceof Error) p.reject(outcome);
    else p.resolve(outcome);
  }
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The real session: a kafkajs idempotent producer, plus an admin client to read the partition count once. */
function kafkaSession(options: KafkaEventAppenderOptions): ProduceSession {
  const kafka = createKafka(options.connection);
  const producer = kafka.producer({
    // Named, so kafkajs does not warn about its v2 default; the same murmur2 choice as partitionerFor.
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    // Bounded (see the note at the top); kafkajs warns that this weakens its guarantee, which holds here
    // because a producer whose retries ran out is never used again.
    retry: {
      retries: options.connection.retry?.retries ?? 5,
      initialRetryTime: options.connection.retry?.initialRetryTimeMs ?? 200,
      maxRetryTime: options.connection.retry?.maxRetryTimeMs ?? 3000,
    },
  });
  options.onProducer?.(producer);
  return {
    async connect() {
      await producer.connect();
      const admin = kafka.admin();
      await admin.connect();
      try {
        const metadata = await admin.fetchTopicMetadata({ topics: [options.topic] });
        const partitions = metadata.topics.find((t) => t.name === options.topic)?.partitions.length ?? 0;
        if (partitions === 0) throw new Error(`topic ${options.topic} has no partitions`);
        return partitions;
      } finally {
        await admin.disconnect();
      }
    },
    async send(messages) {
      const metadata = await producer.sendBatch({ acks: -1, topicMessages: [{ topic: options.topic, messages: [...messages] }] });
      return metadata.map((m) => ({ partition: m.partition, baseOffset: offsetNumber(m.baseOffset ?? '') }));
    },
    disconnect: () => producer.disconnect(),
  };
}

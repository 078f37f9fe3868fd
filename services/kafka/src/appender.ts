import type { EventAppender, StreamPosition } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import type { AppendOutcome, KafkaAppenderMetrics } from '@pushbase/metrics';
import { context, failSpan, NOT_TRACED, pushbaseTracer, SpanKind, trace, traceHeaders, type Link, type Span } from '@pushbase/telemetry';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { createKafka, type KafkaConnection } from './connection';
import { appendMessages, partitionerFor, unavailable, type OutgoingMessage } from './messages';
import { DEFAULT_MAX_MESSAGE_BYTES } from './topic';
import { IdempotentProducer } from './idempotent-producer';
import { TransactionalProducer } from './transactional-producer';
import { errorText, outcomeUnknown, type AppenderCounts, type AppendQueue, type Pending, type ProduceSession, type SendBatch, type Session } from './append-batch';
import { sendConfirmed } from './send-confirmed';
import { sendTransaction } from './send-transaction';

export { outcomeUnknown, type ProduceSession } from './append-batch';

/*
 * The write half of the Kafka event log (EventAppender), for the schema and record services: appends
 * queued while a batch is in flight go out together as the next batch (group commit), in one of two modes,
 * `transactional` or `idempotent`; either way an append is told `unavailable` only when its events will
 * never be stored. This file is the queue (batches, deadlines, the producer in use, close); how a batch is
 * sent and its outcome learned is the mode's: send-transaction.ts, send-confirmed.ts. Why each rule holds:
 * docs/architecture.md → The Kafka appender.
 */

export interface KafkaEventAppenderOptions {
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** How an append's outcome is made exact (see the top). Default `transactional`. */
  readonly mode?: AppenderMode;
  /** How long the first append into an empty queue waits for others to share its request. Default 5 ms. */
  readonly lingerMs?: number;
  /**
   * A batch goes out as soon as this many bytes are queued, and no request carries more (unless one append
   * alone is larger). Default 4 MiB. Keep it below the topic's max.message.bytes: one partition's share of a
   * request is one record batch, which the broker refuses whole when it is larger.
   */
  readonly maxBatchBytes?: number;
  /** The topic's max.message.bytes; a larger append is refused as invalid. Default 16 MiB, as ensureTopic creates it. */
  readonly maxMessageBytes?: number;
  /**
   * Idempotent mode: how long the broker may wait for the in-sync replicas before answering a produce.
   * Default 5000 ms; keep it under the connection's request timeout.
   */
  readonly produceTimeoutMs?: number;
  /**
   * From append() to its outcome. Transactional: an append not yet committing by then rejects as
   * `unavailable` (its transaction is not committed), one whose commit is unconfirmed as `outcome_unknown`.
   * Idempotent: an append whose produce request was never written rejects as `unavailable`, one whose
   * batch is not acknowledged (confirmations included) as `outcome_unknown`. Default 30000 ms.
   */
  readonly appendTimeoutMs?: number;
  /**
   * Transactional mode: the producer's transactional id, stable per service instance, unique among live
   * appenders. Default: the host name and a random suffix (unique, but a restart then cannot fence its
   * predecessor).
   */
  readonly transactionalId?: string;
  /** How long the coordinator lets a transaction stay open before aborting it. Default 10000 ms. */
  readonly transactionTimeoutMs?: number;
  /** How long a failed commit waits before its retry (doubling up to 1 s). Default 50 ms. */
  readonly commitRetryMs?: number;
  /**
   * Test seam: how a producer is made. Default: a kafkajs transactional producer (transactional-producer.ts),
   * or in `idempotent` mode an idempotent one (idempotent-producer.ts), whose commit() and abort() do nothing.
   */
  readonly session?: () => ProduceSession;
  /** Told the API name (Produce, EndTxn, …) of every request the producers send. */
  readonly onRequest?: (apiName: string) => void;
  /** Transactions' and appends' durations and outcomes (docs/metrics.md); none when not given. */
  readonly metrics?: KafkaAppenderMetrics;
}

export type AppenderMode = 'transactional' | 'idempotent';

/** Per-message framing the broker adds around key and value; only to keep batches under the limits. */
const MESSAGE_OVERHEAD_BYTES = 64;

export interface AppenderStats {
  /** Batches sent (one produce request per broker each, and in transactional mode one commit; confirmations not counted). */
  readonly requests: number;
  /** Appends acknowledged. */
  readonly appends: number;
  /** Messages (events) acknowledged. */
  readonly messages: number;
  /** Commits (in `idempotent` mode, produce requests) that needed a retry to learn their outcome. */
  readonly commitRetries: number;
}

/** The default transactional id: unique, so appenders in one process (tests, tools) never fence each other. */
export const defaultTransactionalId = (service = 'appender'): string => `pushbase-${service}-${hostname()}-${randomBytes(4).toString('hex')}`;

export class KafkaEventAppender implements EventAppender {
  private readonly topic: string;
  private readonly mode: AppenderMode;
  private readonly lingerMs: number;
  private readonly maxBatchBytes: number;
  private readonly maxMessageBytes: number;
  private readonly appendTimeoutMs: number;
  private readonly commitRetryMs: number;
  private readonly makeSession: () => ProduceSession;
  /** How a batch goes out in this mode: send-transaction.ts or send-confirmed.ts. */
  private readonly strategy: SendBatch;
  /** What the send strategy sees of this queue. */
  private readonly view: AppendQueue;
  private readonly metrics: KafkaAppenderMetrics | undefined;
  private readonly tracer = pushbaseTracer();
  private queue: Pending[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private current: Session | undefined;
  private closing: Promise<void> | undefined;
  private connecting: Promise<Session> | undefined;
  /** Batches being confirmed (idempotent mode) beside the queue, on producers no longer current. */
  private readonly confirming = new Set<Promise<void>>();
  private readonly counts: AppenderCounts = { requests: 0, appends: 0, messages: 0, commitRetries: 0 };

  constructor(options: KafkaEventAppenderOptions) {
    this.topic = options.topic;
    this.mode = options.mode ?? 'transactional';
    this.lingerMs = options.lingerMs ?? 5;
    this.maxBatchBytes = options.maxBatchBytes ?? 4 * 1024 * 1024;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.appendTimeoutMs = options.appendTimeoutMs ?? 30_000;
    this.commitRetryMs = options.commitRetryMs ?? 50;
    this.metrics = options.metrics;
    const transactionalId = options.transactionalId ?? defaultTransactionalId();
    this.makeSession = options.session ?? (() => (this.mode === 'idempotent' ? idempotentSession(options) : kafkaSession(options, transactionalId)));
    this.strategy = this.mode === 'idempotent' ? sendConfirmed : sendTransaction;
    this.view = {
      counts: this.counts,
      metrics: this.metrics,
      commitRetryMs: this.commitRetryMs,
      closing: () => this.closing !== undefined,
      settle: (p, outcome) => this.settle(p, outcome),
      discard: (session) => this.discard(session),
      retire: (session) => {
        if (this.current === session) this.current = undefined;
      },
      confirming: this.confirming,
    };
  }

  append(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<void> {
    return this.appendAt(events, encoded).then(() => undefined);
  }

  /** As append(), resolving with where each event was stored. */
  appendAt(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<StreamPosition[]> {
    let messages: OutgoingMessage[];
    try {
      messages = appendMessages(events, encoded);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return this.appendMessagesAt(messages);
  }

  /**
   * Appends messages already made (keyed, encoded) in one transaction with the same guarantees as
   * append(): the accounts topic's writer (account-log.ts) uses it with its own envelope. Messages sharing
   * a key share a partition and keep their order.
   */
  appendMessagesAt(messages: readonly OutgoingMessage[]): Promise<StreamPosition[]> {
    if (this.closing) return Promise.reject(unavailable('The event appender is closed'));
    if (messages.length === 0) return Promise.reject(new Error('An append needs at least one event'));
    let bytes = 0;
    for (const m of messages) {
      const size = m.key.length + m.value.length + MESSAGE_OVERHEAD_BYTES;
      if (size > this.maxMessageBytes) {
        // No retry could succeed, so this is the request's fault, not an outage (the body limit prevents it).
        return Promise.reject(new DomainError('invalid', `The event is ${m.value.length} bytes, over the event log's limit of ${this.maxMessageBytes}`));
      }
      bytes += size;
    }
    // A child of the request's span (the gRPC server span); the transaction that carries it links to it.
    const parent = context.active();
    const span = this.tracer.startSpan(
      'event log append',
      { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'kafka', 'messaging.operation.type': 'send', 'messaging.destination.name': this.topic, 'messaging.batch.message_count': messages.length } },
      parent,
    );
    if (span.isRecording()) {
      const headers = traceHeaders(trace.setSpan(parent, span));
      messages = messages.map((m) => ({ ...m, headers: { ...m.headers, ...headers } }));
      for (const m of messages) bytes += Buffer.byteLength(JSON.stringify(m.headers));
    }
    return new Promise<StreamPosition[]>((resolve, reject) => {
      const pending: Pending = { messages, bytes, phase: 'queued', resolve, reject, settled: false, queuedAt: performance.now(), span };
      pending.deadline = setTimeout(() => this.expire(pending), this.appendTimeoutMs);
      this.queue.push(pending);
      this.queuedBytes += bytes;
      this.schedule();
    });
  }

  stats(): AppenderStats {
    return { ...this.counts };
  }

  /**
   * Connects now instead of at the first batch. In transactional mode the producer's initialisation fences
   * a predecessor with the same transactional id and settles its open transaction; in idempotent mode it
   * only gets a producer id. Rejects when Kafka cannot be reached (the next batch tries again).
   */
  async connect(): Promise<void> {
    if (this.closing) throw unavailable('The event appender is closed');
    await this.session();
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
      // Confirmations end at their appends' deadlines at the latest.
      while (this.confirming.size > 0) await Promise.all([...this.confirming]);
      await this.connecting?.catch(() => undefined);
      const current = this.current;
      this.current = undefined;
      await current?.session.disconnect();
    })();
    return this.closing;
  }

  /** An append's deadline: what it is told depends on how far its transaction got (see the top). */
  private expire(p: Pending): void {
    if (p.phase === 'committing') {
      this.settle(p, outcomeUnknown(`Kafka did not confirm the commit of the write within ${this.appendTimeoutMs} ms; it may or may not be stored`));
      return;
    }
    // Queued: never sent. Sending: its transaction will not be committed (sendBatch checks before committing).
    this.settle(p, unavailable(`Kafka did not acknowledge the write within ${this.appendTimeoutMs} ms`));
    const at = this.queue.indexOf(p);
    if (at >= 0) {
      this.queue.splice(at, 1);
      this.queuedBytes -= p.bytes;
    }
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

  /** One transaction at a time, until the queue is empty (appends that arrive meanwhile go in the next one). */
  private async sendQueued(): Promise<void> {
    await Promise.resolve(); // so that `sending` is set before the loop can clear it
    while (this.queue.length > 0) {
      const batch = this.takeBatch();
      try {
        await this.sendBatch(batch);
      } catch (err) {
        // A bug rather than an outage, but the appends must hear of it now, not at their deadline. Their
        // transaction's fate is not known here, so neither is theirs; the producer is replaced.
        for (const p of batch) this.settle(p, p.phase === 'queued' ? (err instanceof Error ? err : new Error(String(err))) : outcomeUnknown(`The event appender failed: ${errorText(err)}`));
        this.discard(this.current);
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
    if (batch.every((p) => p.settled)) return;
    let session: Session;
    try {
      session = await this.session();
    } catch (err) {
      for (const p of batch) this.settle(p, unavailable(`Kafka cannot be reached: ${errorText(err)}`));
      return;
    }
    // Only now: an append whose deadline came while the producer connected was told `unavailable` and
    // must not go out. From here to the send there is no await.
    const live = batch.filter((p) => !p.settled);
    if (live.length === 0) return;
    for (const p of live) p.phase = 'sending';
    const messages = live.flatMap((p) => p.messages.map((m) => ({ ...m, partition: session.partitionOf(m.key) })));
    const started = performance.now();
    const span = this.transactionSpan(live, messages.length);
    try {
      await this.strategy(this.view, session, live, messages, started);
      span.end();
    } catch (err) {
      failSpan(span, err);
      throw err;
    }
  }

  /**
   * One span per transaction, the root of a trace of its own: it serves many requests, so it links to each
   * append's span instead of having one parent. Made only when an append of it is traced.
   */
  private transactionSpan(live: readonly Pending[], messages: number): Span {
    const links: Link[] = [];
    for (const p of live) if (p.span.isRecording()) links.push({ context: p.span.spanContext() });
    if (links.length === 0) return NOT_TRACED;
    return this.tracer.startSpan('event log transaction', { kind: SpanKind.INTERNAL, root: true, links, attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': this.topic, 'pushbase.appends': live.length, 'messaging.batch.message_count': messages } });
  }

  /**
   * Drops a producer: the next batch goes out on a new one (same transactional id). Its open transaction,
   * if any, is aborted in the background, best effort; the new producer's initialisation fences it anyway.
   */
  private discard(session: Session | undefined): void {
    if (session === undefined) return;
    if (this.current === session) this.current = undefined;
    void session.session
      .abort()
      .catch(() => undefined)
      .then(() => session.session.disconnect())
      .catch(() => undefined);
  }

  /** The current producer, or a new one (one connect at a time: two producers of one id fence each other). */
  private session(): Promise<Session> {
    if (this.current) return Promise.resolve(this.current);
    this.connecting ??= (async () => {
      const session = this.makeSession();
      try {
        const partitions = await session.connect();
        this.current = { session, partitionOf: partitionerFor(partitions) };
        return this.current;
      } catch (err) {
        await session.disconnect().catch(() => undefined);
        throw err;
      } finally {
        this.connecting = undefined;
      }
    })();
    return this.connecting;
  }

  private settle(p: Pending, outcome: StreamPosition[] | Error): void {
    if (p.settled) return;
    p.settled = true;
    clearTimeout(p.deadline);
    if (outcome instanceof Error) failSpan(p.span, outcome);
    else p.span.end();
    this.metrics?.append(outcome instanceof Error ? outcomeOf(outcome) : 'committed', performance.now() - p.queuedAt);
    if (outcome instanceof Error) p.reject(outcome);
    else p.resolve(outcome);
  }
}

/** What a rejected append is counted as: the two outage answers by name, anything else is a bug. */
const outcomeOf = (err: Error): AppendOutcome =>
  err instanceof DomainError && (err.code === 'unavailable' || err.code === 'outcome_unknown') ? err.code : 'error';

/** The real session of `idempotent` mode: a kafkajs idempotent producer (idempotent-producer.ts). */
function idempotentSession(options: KafkaEventAppenderOptions): ProduceSession {
  const producer = new IdempotentProducer({
    connection: options.connection,
    topic: options.topic,
    ...(options.produceTimeoutMs === undefined ? {} : { produceTimeoutMs: options.produceTimeoutMs }),
    ...(options.onRequest ? { onRequest: options.onRequest } : {}),
  });
  return {
    connect: () => producer.connect(),
    send: (messages, again) => producer.send(messages, again),
    commit: () => Promise.resolve(), // stored once acknowledged: nothing to commit
    abort: () => Promise.resolve(), // nothing open to abort
    disconnect: () => producer.disconnect(),
  };
}

/** The real session: a kafkajs transactional producer (transactional-producer.ts). */
function kafkaSession(options: KafkaEventAppenderOptions, transactionalId: string): ProduceSession {
  const retry = options.connection.retry ?? {};
  return new TransactionalProducer({
    kafka: createKafka(options.connection),
    topic: options.topic,
    transactionalId,
    transactionTimeoutMs: options.transactionTimeoutMs ?? 10_000,
    // Bounded (see the note at the top): a producer whose retries ran out is never used again.
    retry: { retries: retry.retries ?? 5, initialRetryTime: retry.initialRetryTimeMs ?? 200, maxRetryTime: retry.maxRetryTimeMs ?? 3000 },
    ...(options.onRequest ? { onRequest: options.onRequest } : {}),
  });
}

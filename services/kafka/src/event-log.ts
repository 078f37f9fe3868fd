import { randomUUID } from 'node:crypto';
import type { EventCodecOptions, EventListener, EventLog, StreamPosition } from '@pushbase/contracts';
import type { DatasetEvent } from '@pushbase/domain';
import { KafkaEventAppender, type KafkaEventAppenderOptions } from './appender';
import { createKafka } from './connection';
import { KafkaEventConsumer, type ConsumedBatch } from './consumer';
import { unavailable, type ConsumedEvent } from './messages';
import { ensureTopic, type EnsuredTopic } from './topic';

/*
 * The EventLog port over Kafka, for one process that both writes and reads the whole log (the single-process
 * runtime on Kafka, and the contract suite it shares with the file log): the appender plus a reader of the
 * whole topic, an append resolving once the reader has delivered it. Why the distributed services do not
 * use it, and its order: docs/architecture.md → The Kafka EventLog.
 */

export interface KafkaEventLogOptions extends Omit<KafkaEventAppenderOptions, 'session'> {
  /** Partitions to create the topic with when it is missing. Default 1. */
  readonly partitions?: number;
  readonly replicationFactor?: number;
  /** Prefix of the reader's throwaway consumer group. Default 'pushbase-event-log'. */
  readonly groupPrefix?: string;
  readonly codec?: EventCodecOptions;
  /** Told what ensureTopic found wrong with an existing topic. Default: stderr. */
  readonly warn?: (message: string) => void;
}

/** Listener failures of other processes' appends are remembered too, as nobody claims them; this many at most. */
const MAX_REMEMBERED_FAILURES = 1000;

interface Waiter {
  readonly offset: number;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

export class KafkaEventLog implements EventLog {
  private readonly appender: KafkaEventAppender;
  private readonly groupId: string;
  private reader: KafkaEventConsumer | undefined;
  private listener: EventListener | undefined;
  private state: 'new' | 'starting' | 'open' | 'closed' = 'new';
  private closing: Promise<void> | undefined;
  /** Per partition: the offset after the last event delivered to the listener. */
  private readonly delivered = new Map<number, number>();
  /** Per partition: how far the reader has read (markers included), and who waits for it to get somewhere. */
  private readonly read = new Map<number, number>();
  private readonly readWaiters = new Map<number, { readonly offset: number; readonly resolve: () => void; readonly reject: (err: unknown) => void }[]>();
  /** Per partition: appends waiting for the reader, by offset. */
  private readonly waiters = new Map<number, Waiter[]>();
  /** Per partition: the events of an append seen so far, when its last event has not come yet. */
  private readonly partial = new Map<number, ConsumedEvent[]>();
  private readonly inFlight = new Set<Promise<void>>();
  /**
   * Listener failures by `partition@offset` (every offset of the failed append), for an append whose
   * events the reader delivered before the broker's acknowledgment reached it. Rare; bounded.
   */
  private readonly failures = new Map<string, unknown>();
  private failed: Error | undefined;
  private topicReport: EnsuredTopic | undefined;

  constructor(private readonly options: KafkaEventLogOptions) {
    this.appender = new KafkaEventAppender(options);
    this.groupId = `${options.groupPrefix ?? 'pushbase-event-log'}-${randomUUID()}`;
  }

  /** What start() found about the topic (created, partition count, notes). */
  topic(): EnsuredTopic | undefined {
    return this.topicReport;
  }

  async start(listener: EventListener): Promise<void> {
    if (this.state !== 'new') throw new Error(`KafkaEventLog.start: the log is ${this.state}`);
    this.state = 'starting';
    this.listener = listener;
    try {
      const kafka = createKafka(this.options.connection);
      const admin = kafka.admin();
      await admin.connect();
      let ends: Map<number, number>;
      try {
        this.topicReport = await ensureTopic(admin, {
          topic: this.options.topic,
          partitions: this.options.partitions ?? 1,
          ...(this.options.replicationFactor === undefined ? {} : { replicationFactor: this.options.replicationFactor }),
          ...(this.options.maxMessageBytes === undefined ? {} : { maxMessageBytes: this.options.maxMessageBytes }),
        });
        for (const note of this.topicReport.notes) (this.options.warn ?? ((m) => process.stderr.write(`pushbase: ${m}\n`)))(note);
        // What "everything stored" means at start: each partition's end now — its last stable offset (the
        // admin client lists offsets read-committed), which is past the marker of the last transaction.
        ends = new Map((await admin.fetchTopicOffsets(this.options.topic)).map((p) => [p.partition, Number(p.high)]));
      } finally {
        await admin.disconnect();
      }
      const reader = new KafkaEventConsumer(
        { connection: this.options.connection, topic: this.options.topic, groupId: this.groupId, fromBeginning: true, maxWaitTimeMs: 100, ...(this.options.codec ? { codec: this.options.codec } : {}) },
        { onBatch: (batch) => Promise.resolve(this.deliver(batch)), onSkipped: (partition, next) => this.reach(partition, next), onCrash: (err) => this.fail(err) },
      );
      this.reader = reader;
      await reader.start();
      // Read up to the end, not "delivered the event at end - 1": that offset is usually a marker.
      await Promise.all([...ends].filter(([, end]) => end > 0).map(([partition, end]) => this.reached(partition, end)));
      this.state = 'open';
    } catch (err) {
      this.state = 'closed';
      await this.stopReader();
      throw err;
    }
  }

  append(events: readonly DatasetEvent[], encoded?: Uint8Array): Promise<void> {
    if (this.closing) return Promise.reject(unavailable('The event log is closed'));
    if (this.state !== 'open' && this.state !== 'starting') return Promise.reject(unavailable(`The event log is ${this.state === 'new' ? 'not started' : 'closed'}`));
    if (this.failed) return Promise.reject(unavailable(`The event log's reader stopped: ${this.failed.message}`));
    const done = this.appender.appendAt(events, encoded).then((positions) => this.seen(positions));
    const tracked = done.catch(() => undefined);
    this.inFlight.add(tracked);
    void tracked.then(() => this.inFlight.delete(tracked));
    return done;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.appender.close();
      // Appends acknowledged before close still wait for the reader to deliver them.
      await Promise.all(this.inFlight);
      this.state = 'closed';
      await this.stopReader();
    })();
    return this.closing;
  }

  /** Resolves once the listener has seen every one of these positions (the events of one append). */
  private seen(positions: readonly StreamPosition[]): Promise<void> {
    const last = new Map<number, number>();
    for (const p of positions) last.set(p.partition, Math.max(p.offset, last.get(p.partition) ?? -1));
    return Promise.all([...last].map(([partition, offset]) => this.deliveredThrough(partition, offset))).then(() => undefined);
  }

  private deliveredThrough(partition: number, offset: number): Promise<void> {
    if ((this.delivered.get(partition) ?? 0) > offset) {
      const key = `${partition}@${offset}`;
      const failure = this.failures.get(key);
      if (!this.failures.delete(key)) return Promise.resolve();
      return Promise.reject(failure instanceof Error ? failure : new Error(String(failure)));
    }
    if (this.failed) return Promise.reject(this.readerStopped());
    return new Promise((resolve, reject) => {
      const list = this.waiters.get(partition) ?? [];
      list.push({ offset, resolve, reject });
      this.waiters.set(partition, list);
    });
  }

  /** Resolves once the reader has read the partition up to `end` (exclusive), markers included. */
  private reached(partition: number, end: number): Promise<void> {
    if ((this.read.get(partition) ?? 0) >= end) return Promise.resolve();
    if (this.failed) return Promise.reject(this.readerStopped());
    return new Promise((resolve, reject) => {
      const list = this.readWaiters.get(partition) ?? [];
      list.push({ offset: end, resolve, reject });
      this.readWaiters.set(partition, list);
    });
  }

  private reach(partition: number, next: number): void {
    if (next <= (this.read.get(partition) ?? 0)) return;
    this.read.set(partition, next);
    const list = this.readWaiters.get(partition) ?? [];
    for (const w of list.filter((x) => x.offset <= next)) w.resolve();
    this.readWaiters.set(
      partition,
      list.filter((x) => x.offset > next),
    );
  }

  private deliver(batch: ConsumedBatch): void {
    const { partition } = batch;
    let group = this.partial.get(partition) ?? [];
    for (const e of batch.events) {
      if (e.append.index !== group.length) {
        this.fail(new Error(`Event ${partition}@${e.position.offset} is event ${e.append.index} of an append, after ${group.length} of its events`));
        return;
      }
      group.push(e);
      if (group.length < e.append.count) continue;
      let error: unknown;
      try {
        this.listener?.(group.map((g) => g.event));
      } catch (err) {
        // The events are stored (and replayed at the next start); the append still learns that applying them
        // failed. Not `unavailable`: a retry would append them twice. As the file log does.
        error = err ?? new Error('listener failed');
      }
      if (error !== undefined) {
        for (const g of group) this.failures.set(`${partition}@${g.position.offset}`, error);
        while (this.failures.size > MAX_REMEMBERED_FAILURES) this.failures.delete(this.failures.keys().next().value!);
      }
      this.advance(partition, e.position.offset + 1, group[0]!.position.offset, error);
      group = [];
    }
    if (group.length > 0) this.partial.set(partition, group);
    else this.partial.delete(partition);
    this.reach(partition, batch.next);
  }

  /** The listener has seen everything of `partition` before `end`; settles the appends that waited for it. */
  private advance(partition: number, end: number, groupStart: number, error: unknown): void {
    this.delivered.set(partition, end);
    const list = this.waiters.get(partition);
    if (!list) return;
    const ready = list.filter((w) => w.offset < end);
    this.waiters.set(
      partition,
      list.filter((w) => w.offset >= end),
    );
    for (const w of ready) {
      if (error !== undefined && w.offset >= groupStart) {
        this.failures.delete(`${partition}@${w.offset}`);
        w.reject(error);
      } else w.resolve();
    }
  }

  private readerStopped(): Error {
    // An append waiting here is stored and acknowledged, only not delivered: not `unavailable` (a retry
    // would store it twice). start() waiting for the replay fails with the same reason.
    return new Error(`The event log's reader stopped: ${this.failed?.message ?? 'unknown'}`, { cause: this.failed });
  }

  private fail(err: Error): void {
    this.failed ??= err;
    const error = this.readerStopped();
    for (const list of this.waiters.values()) for (const w of list) w.reject(error);
    this.waiters.clear();
    for (const list of this.readWaiters.values()) for (const w of list) w.reject(error);
    this.readWaiters.clear();
  }

  private async stopReader(): Promise<void> {
    const reader = this.reader;
    this.reader = undefined;
    if (!reader) return;
    await reader.stop();
    // The group never committed anything; delete it rather than leave one per process start behind.
    const admin = createKafka(this.options.connection).admin();
    try {
      await admin.connect();
      await admin.deleteGroups([this.groupId]);
    } catch {
      // Best effort: an empty group without offsets expires on its own.
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}

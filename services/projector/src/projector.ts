import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { DomainError, streamKey } from '@pushbase/domain';
import type { PendingRows, PositionedEvent, PreparedWrite, ProjectedHead, ProjectionStore, SchemaStoreWriter, StoredDatasetRef } from '@pushbase/contracts';
import type { DatasetEvent } from '@pushbase/domain';
import type { BatchControl, CommitResult, ConsumedBatch, EventConsumerHandlers } from '@pushbase/kafka';
import type { ProjectorMetrics } from '@pushbase/metrics';
import { context, contextFrom, failSpan, NOT_TRACED, pushbaseTracer, SpanKind, trace, type Link } from '@pushbase/telemetry';
import { heldState, loadedDataset, project, type ProjectedDataset } from './project';

/*
 * The projector's loop around the pure `project`: folds events in memory, writes their rows in batches that
 * grow with the load, commits offsets only after a write landed, and keeps dataset states within a bound.
 * Why each of these is done the way it is: docs/architecture.md → The projector's loop.
 */

/** The part of the Kafka consumer the projector drives. */
export interface ProjectorSource {
  start(): Promise<void>;
  commit(positions: readonly { partition: number; offset: number }[]): Promise<CommitResult>;
  pause(partitions: readonly number[]): void;
  resume(partitions: readonly number[]): void;
  assigned(): readonly number[];
  stop(): Promise<void>;
}

export type Logger = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;

export interface ProjectorOptions {
  /** The memory bound: rows of dataset states kept between writes (each state counts one more). */
  readonly maxRows: number;
  /** A write goes out once this many rows are pending… */
  readonly flushRows: number;
  /** …or once the previous write landed and this long has passed since it started. */
  readonly flushIntervalMs: number;
  /** Datasets loaded from the store at once when a batch needs them. Default 8. */
  readonly loadConcurrency?: number;
  /** Backoff while the store is unavailable. Default 100 ms doubling to 5000 ms. */
  readonly retryInitialMs?: number;
  readonly retryMaxMs?: number;
  /** How long stop() waits for the running batch and the last write before giving up. Default 30000 ms. */
  readonly stopTimeoutMs?: number;
  readonly log: Logger;
  /** The schema store's writer side, fed every event of a write before its offsets are committed. */
  readonly schemaStore?: SchemaStoreWriter;
  /** Test hook: runs after a write landed and before its offsets are committed (awaited). */
  readonly afterWrite?: (write: number) => void | Promise<void>;
  /** Called when the projector stops on an error it must not retry (a bug, a poison event). */
  readonly onFatal?: (error: Error) => void;
  /** Lag per partition, inserts, and the stats() counters as Prometheus metrics (docs/metrics.md). */
  readonly metrics?: ProjectorMetrics;
}

export interface ProjectorStats {
  events: number;
  skipped: number;
  rows: number;
  writes: number;
  commits: number;
  /** Datasets read back from the store (first sight, after being dropped, or after a revocation). */
  loads: number;
  /** Dataset states dropped by the memory bound. */
  evictions: number;
  /** Store calls that failed as unavailable and were tried again. */
  retries: number;
  cachedRows: number;
  cachedDatasets: number;
}

interface Cached {
  readonly dataset: ProjectedDataset | undefined;
  readonly partition: number;
  readonly weight: number;
  /** The batch holding this state's latest change; 0 for a state as loaded. Clean once that batch landed. */
  readonly batch: number;
}

interface PendingPartition {
  /** The rows, given to the store as they come (ProjectionStore.begin says why). */
  readonly rows: PendingRows;
  /** What the store refused to take into `rows`: the write fails with it in its turn. */
  refused: Error | undefined;
  /** Time spent adding rows to the store's encoding. */
  encodeMs: number;
  /** The newest head per dataset and incarnation (the store needs each live row's own incarnation). */
  readonly heads: Map<string, ProjectedHead>;
  /**
   * Every event of the partition since the last write, skipped ones included, for the schema store, which
   * reads no records: held without them, so they are garbage once their rows are encoded.
   */
  readonly events: DatasetEvent[];
  last: number;
  /** Where the partition's reading goes on after the events held here (markers included): what the lag counts from. */
  next: number;
  /** The spans of the traced events held here, for the write's span to link to (at most MAX_WRITE_LINKS). */
  readonly links: Link[];
}

/** A closed batch, checked and encoded for the store (or the error the store refused it with). */
interface Prepared {
  readonly rows: number;
  readonly heads: number;
  readonly write: PreparedWrite | Error;
  readonly encodeMs: number;
}

/** As OpenTelemetry's default limit of links per span: more would be dropped by the SDK anyway. */
const MAX_WRITE_LINKS = 128;

/** An event as the schema store reads it: its records are not. */
const withoutRecords = (event: DatasetEvent): DatasetEvent => (event.type === 'RecordsAppended' || event.type === 'RecordsReplaced' ? { ...event, records: [] } : event);

const weightOf = (d: ProjectedDataset | undefined): number => 1 + (d?.state?.rows.size ?? 0);

/**
 * The weight from which a state is dropped before any smaller one. A load's cost hardly depends on the
 * dataset's size: the store reads at least one granule (512 rows, migrations.ts) of every part that holds
 * the dataset (docs/performance.md → Measurements behind the code). So the rows freed per load caused grow
 * with the state's weight; a state under one granule is read back at the price of a granule per part. One
 * granule as the line leaves the empty and near-empty states (datasets created and not yet filled) for last.
 */
export const LARGE_STATE_ROWS = 512;

/**
 * Datasets a load query reads at most: each query pays its own FINAL setup and part scan, so one query for
 * several datasets costs less than single loads, and one query already runs on both cores by itself
 * (docs/performance.md → Measurements behind the code). Chunks of 8 keep each answer small and let the
 * chunks of a batch that misses many datasets run side by side.
 */
const LOAD_CHUNK = 8;

/**
 * While a write is in flight, folding gives the event loop a turn at least this often: the insert's body
 * goes out through the socket only when the loop runs, so a long fold stalls ClickHouse on its input
 * (docs/performance.md → The projector's catch-up).
 */
const YIELD_MS = 5;
const isUnavailable = (e: unknown): boolean => e instanceof DomainError && e.code === 'unavailable';
const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class Projector {
  private source: ProjectorSource | undefined;
  /** Map order is recency: the first entry is the least recently touched. */
  private readonly cache = new Map<string, Cached>();
  private cachedRows = 0;
  private pending = new Map<number, PendingPartition>();
  /** The batch being collected; batches are numbered from 1. */
  private batch = 1;
  /** The last batch whose write landed. */
  private landed = 0;
  /** The write of the previous batch; never rejects (a failure is kept in `broken`). */
  private inFlight: Promise<void> = Promise.resolve();
  private broken: Error | undefined;
  private pendingRows = 0;
  /** Writes started and not yet landed (or failed). */
  private writing = 0;
  /** When the last write started (its batch was closed). */
  private lastWriteAt = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  private lastWriteLanded: boolean | undefined;
  private paused: readonly number[] = [];
  /** Set when stop() gave up waiting: a store call still retrying gives up too. */
  private abandoned = false;
  private readonly counters = { events: 0, skipped: 0, rows: 0, writes: 0, commits: 0, loads: 0, evictions: 0, retries: 0 };
  /**
   * Per partition read: its high watermark as of its last fetched batch, and the offset written up to
   * (the written rows' `next`, or a fetch of markers only once nothing of the partition is pending).
   * Their difference is the lag metric; a partition revoked is forgotten (its new reader reports it).
   */
  private readonly progress = new Map<number, { highWatermark: number; written: number }>();
  private readonly tracer = pushbaseTracer();

  constructor(
    private readonly store: ProjectionStore,
    private readonly options: ProjectorOptions,
  ) {}

  /** The consumer callbacks; hand them to the KafkaEventConsumer, then `start` with it. */
  handlers(): EventConsumerHandlers {
    return {
      onBatch: (batch, control) =>
        this.exclusive(() => this.handleBatch(batch, control)).catch((e: unknown) => {
          // Only a bug or an event the version scheme cannot hold gets here (unavailability is retried
          // inside): stop rather than let the consumer deliver the batch again and again.
          if (!this.abandoned) this.fatal(e);
          throw e;
        }),
      onAssigned: (partitions) => this.options.log('info', 'partitions assigned', { partitions }),
      onRevoked: (partitions) => this.exclusive(() => this.revoke(partitions)),
      onSkipped: (partition, next) => {
        // A fetch of transaction markers (or aborted events) only: once nothing of the partition waits to
        // be written, the projector has caught up to it.
        if (!this.pending.has(partition)) this.advance(partition, undefined, next);
      },
      onCrash: (error) => this.fatal(error),
      onCallbackError: (error) => this.options.log('error', 'consumer callback failed', { error: describe(error) }),
    };
  }

  async start(source: ProjectorSource): Promise<void> {
    this.source = source;
    // As if a write had just started: the events met first (a backlog, after a restart) gather for one interval.
    this.lastWriteAt = Date.now();
    // Short, so a write starts soon after it may: an idle projector's freshness is about one tick.
    const tick = Math.max(5, Math.min(25, Math.floor(this.options.flushIntervalMs / 4)));
    this.timer = setInterval(() => {
      if (this.flushDue()) void this.exclusive(() => this.flush()).catch((e: unknown) => this.fatal(e));
    }, tick);
    await source.start();
  }

  /** Whether the partitions are paused while an unavailable store is tried again (not a stall: health.ts). */
  get waitingForStore(): boolean {
    return this.paused.length > 0;
  }

  stats(): ProjectorStats {
    return { ...this.counters, cachedRows: this.cachedRows, cachedDatasets: this.cache.size };
  }

  /**
   * Graceful stop: no new batches, the running one finishes, its rows are written and their offsets
   * committed, then the consumer leaves the group. If that takes longer than stopTimeoutMs (the store is
   * down), it leaves without committing: nothing is lost, the events come again.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.timer !== undefined) clearInterval(this.timer);
      const source = this.source;
      if (source === undefined) return;
      source.pause(source.assigned());
      const finished = this.exclusive(() => this.flush(true)).then(
        () => true,
        (e: unknown) => {
          this.options.log('error', 'final write failed', { error: describe(e) });
          return false;
        },
      );
      const timeout = sleep(this.options.stopTimeoutMs ?? 30_000, false, { ref: false });
      const clean = await Promise.race([finished, timeout]);
      this.lastWriteLanded = clean;
      if (!clean) {
        this.abandoned = true;
        this.options.log('warn', 'stopping without the last write', { pending_rows: this.pendingRows });
      }
      await source.stop();
      this.options.log('info', 'projector stopped', { ...this.stats() });
    })();
    return this.stopping;
  }

  /**
   * After stop(): whether everything pending was written and committed. A caller that hands the result on
   * (replay's swap) must not when it was not; the live projector need not care (the events come again).
   */
  get stoppedClean(): boolean {
    return this.lastWriteLanded === true;
  }

  private exclusive<T>(run: () => Promise<T>): Promise<T> {
    const next = this.queue.then(run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private fatal(e: unknown): void {
    const error = e instanceof Error ? e : new Error(String(e));
    this.options.log('error', 'projector failed', { error: error.message });
    this.options.onFatal?.(error);
  }

  private flushDue(): boolean {
    return this.pending.size > 0 && this.writing === 0 && Date.now() - this.lastWriteAt >= this.options.flushIntervalMs;
  }

  /** After a write failed for good, nothing more is folded or written. */
  private throwIfBroken(): void {
    if (this.broken !== undefined) throw this.broken;
  }

  /** Resolves once every batch collected so far has been written (or failed); for tests. */
  drained(): Promise<void> {
    return this.exclusive(() => this.flush(true)).catch(() => undefined);
  }

  private async handleBatch(batch: ConsumedBatch, control: BatchControl): Promise<void> {
    this.throwIfBroken();
    // A partition's first batch since its assignment starts where the group's committed offset was: its
    // first event (every event before it was written by whoever read the partition before).
    if (!this.progress.has(batch.partition)) this.progress.set(batch.partition, { highWatermark: batch.highWatermark, written: batch.events[0]?.position.offset ?? batch.next });
    this.advance(batch.partition, batch.highWatermark, undefined);
    await this.loadMissing(batch.partition, batch.events);
    let turn = performance.now();
    for (const { event, position, trace: carrier } of batch.events) {
      if (this.writing > 0 && performance.now() - turn >= YIELD_MS) {
        await nextTurn();
        turn = performance.now();
      }
      const key = streamKey(event.account, event.dataset);
      // A write in the middle of this batch may have dropped a state loaded for it.
      if (!this.cache.has(key)) await this.loadMissing(batch.partition, [{ event, position }]);
      const cached = this.cache.get(key);
      // The event's request goes on here: a child of the append that wrote it (its message's traceparent).
      const span =
        carrier === undefined
          ? NOT_TRACED
          : this.tracer.startSpan(
              'project event',
              { kind: SpanKind.CONSUMER, attributes: { 'messaging.system': 'kafka', 'messaging.operation.type': 'process', 'messaging.destination.partition.id': String(batch.partition), 'messaging.kafka.offset': position.offset } },
              contextFrom(carrier),
            );
      const step = project(cached?.dataset, event, position);
      const traced = span.isRecording();
      if (traced) {
        span.setAttributes({ 'pushbase.applied': step.applied, 'pushbase.rows': step.rows.length });
        context.with(trace.setSpan(context.active(), span), () => this.options.log('debug', 'event projected', { partition: batch.partition, offset: position.offset, applied: step.applied, rows: step.rows.length }));
      }
      span.end();
      this.counters.events++;
      this.options.metrics?.count('events');
      this.hold(key, batch.partition, step.dataset, step.applied ? this.batch : (cached?.batch ?? 0));
      let pending = this.pending.get(batch.partition);
      if (pending === undefined) {
        pending = { rows: this.store.begin(), refused: undefined, encodeMs: 0, heads: new Map(), events: [], last: position.offset, next: position.offset + 1, links: [] };
        this.pending.set(batch.partition, pending);
      }
      if (traced && pending.links.length < MAX_WRITE_LINKS) pending.links.push({ context: span.spanContext() });
      pending.last = position.offset;
      // The batch's own end once its last event is in: the markers it covered are done with it.
      pending.next = position === batch.events.at(-1)?.position ? batch.next : position.offset + 1;
      if (this.options.schemaStore !== undefined) pending.events.push(withoutRecords(event));
      if (!step.applied) {
        this.counters.skipped++;
        continue;
      }
      if (step.rows.length > 0 && pending.refused === undefined) {
        const started = performance.now();
        try {
          pending.rows.add(step.rows, step.head === undefined ? [] : [step.head]);
        } catch (e) {
          pending.refused = e instanceof Error ? e : new Error(String(e));
        }
        pending.encodeMs += performance.now() - started;
      }
      this.pendingRows += step.rows.length;
      if (step.head !== undefined) pending.heads.set(`${key}\n${step.head.incarnation}`, step.head);
      if (this.cachedRows > this.options.maxRows) {
        // Over the memory bound: only written states may go, so write now and wait for it.
        await this.flush(true);
        await control.heartbeat();
      } else if (this.pendingRows >= this.options.flushRows) {
        await this.flush();
        await control.heartbeat();
      }
    }
    // After the whole batch, not per event: the events of one fetch go out in one write.
    if (this.flushDue()) await this.flush();
  }

  /**
   * Loads the datasets of `events` that are not in memory: LOAD_CHUNK datasets a query (one query of
   * several costs the store less than as many single ones), loadConcurrency queries at once.
   */
  private async loadMissing(partition: number, events: readonly PositionedEvent[]): Promise<void> {
    const missing = new Map<string, StoredDatasetRef>();
    for (const { event } of events) {
      const key = streamKey(event.account, event.dataset);
      if (!this.cache.has(key) && !missing.has(key)) missing.set(key, { account: event.account, dataset: event.dataset });
    }
    if (missing.size === 0) return;
    const all = [...missing];
    const chunks: (readonly [string, StoredDatasetRef])[][] = [];
    for (let i = 0; i < all.length; i += LOAD_CHUNK) chunks.push(all.slice(i, i + LOAD_CHUNK));
    const worker = async (): Promise<void> => {
      for (let chunk = chunks.shift(); chunk !== undefined; chunk = chunks.shift()) {
        const refs = chunk.map(([, ref]) => ref);
        const what = chunk.length === 1 ? `loading ${chunk[0]?.[0]}` : `loading ${chunk.length} datasets`;
        const loaded = await this.retrying(what, async () => {
          const attempt = performance.now();
          const states = await this.store.loadMany(refs, { values: 'dates' });
          this.options.metrics?.load(performance.now() - attempt);
          return states;
        });
        chunk.forEach(([key], i) => {
          const one = loaded[i];
          this.counters.loads++;
          this.options.metrics?.count('loads');
          this.hold(key, partition, one === undefined ? undefined : loadedDataset({ ...one, state: one.state === undefined ? undefined : heldState(one.state) }), 0);
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.options.loadConcurrency ?? 8, chunks.length) }, worker));
  }

  /** Keeps a dataset's state as the most recently touched. */
  private hold(key: string, partition: number, dataset: ProjectedDataset | undefined, batch: number): void {
    const old = this.cache.get(key);
    if (old !== undefined) {
      this.cache.delete(key);
      this.cachedRows -= old.weight;
    }
    const weight = weightOf(dataset);
    this.cache.set(key, { dataset, partition, weight, batch });
    this.cachedRows += weight;
  }

  /**
   * Closes the pending batch and starts its write once the previous one landed; with `wait`, also waits
   * for this one. The write commits the offsets it covers and then applies the memory bound.
   */
  private async flush(wait = false): Promise<void> {
    this.throwIfBroken();
    if (this.pending.size === 0) {
      if (wait) await this.inFlight;
      this.throwIfBroken();
      return;
    }
    const partitions = [...this.pending];
    const id = this.batch++;
    this.pending = new Map();
    this.pendingRows = 0;
    this.lastWriteAt = Date.now();
    this.writing++;
    const previous = this.inFlight;
    // Encoded now, while the store still takes the previous write: its insert starts the moment that one
    // landed. A write the store refuses to encode fails in its turn, as one it refuses to take.
    const prepared = this.prepare(partitions);
    const write = previous.then(() => this.write(id, partitions, prepared));
    this.inFlight = write
      .catch((e: unknown) => {
        this.broken ??= e instanceof Error ? e : new Error(String(e));
        this.fatal(e);
      })
      .finally(() => {
        this.writing--;
      });
    // At most one write in flight while the next batch is folded.
    await (wait ? this.inFlight : previous);
    this.throwIfBroken();
  }

  private prepare(partitions: readonly [number, PendingPartition][]): Prepared {
    const heads: ProjectedHead[] = [];
    let rows = 0;
    let encodeMs = 0;
    let refused: Error | undefined;
    for (const [, p] of partitions) {
      for (const h of p.heads.values()) heads.push(h);
      rows += p.rows.size;
      encodeMs += p.encodeMs;
      refused ??= p.refused;
    }
    if (refused !== undefined) return { rows, heads: heads.length, write: refused, encodeMs };
    const started = performance.now();
    try {
      const write = this.store.prepare(
        partitions.map(([, p]) => p.rows),
        heads,
      );
      return { rows, heads: heads.length, write, encodeMs: encodeMs + performance.now() - started };
    } catch (e) {
      return { rows, heads: heads.length, write: e instanceof Error ? e : new Error(String(e)), encodeMs };
    }
  }

  private async write(id: number, partitions: readonly [number, PendingPartition][], prepared: Prepared): Promise<void> {
    this.throwIfBroken();
    const { rows, heads, write } = prepared;
    if (write instanceof Error) throw write;
    const started = Date.now();
    // One write serves many requests: the root of a trace of its own, linked to each traced event's span.
    const links = partitions.flatMap(([, p]) => p.links).slice(0, MAX_WRITE_LINKS);
    const span = links.length === 0 ? NOT_TRACED : this.tracer.startSpan('clickhouse write', { root: true, links, attributes: { 'db.system.name': 'clickhouse', 'pushbase.rows': rows, 'pushbase.heads': heads } });
    try {
      await this.retrying(`writing ${rows} rows`, async () => {
        const attempt = performance.now();
        await write.send();
        this.options.metrics?.insert(rows, performance.now() - attempt);
      });
      span.end();
    } catch (e) {
      failSpan(span, e);
      throw e;
    }
    const stored = Date.now();
    const schemaStore = this.options.schemaStore;
    if (schemaStore !== undefined) {
      // Per partition in offset order: one dataset's events keep their order, which is all apply needs.
      const events = partitions.flatMap(([, p]) => p.events);
      if (events.length > 0) await this.retrying(`applying ${events.length} events to the schema store`, () => schemaStore.apply(events));
    }
    const applied = Date.now();
    const written = ++this.counters.writes;
    this.counters.rows += rows;
    this.options.metrics?.count('writes');
    for (const [partition, p] of partitions) this.advance(partition, undefined, p.next);
    this.landed = id;
    await this.options.afterWrite?.(written);
    this.evict();
    const positions = partitions.map(([partition, p]) => ({ partition, offset: p.last }));
    const source = this.source;
    if (source !== undefined) {
      try {
        const { notOwned } = await source.commit(positions);
        this.counters.commits++;
        if (notOwned.length > 0) this.options.log('info', 'not committing revoked partitions', { partitions: notOwned });
      } catch (e) {
        // The rows are durable; the events come again to whoever holds the partitions and are skipped.
        this.options.log('warn', 'commit failed', { error: describe(e), positions });
      }
    }
    const now = Date.now();
    // Where a write's time goes: its encoding (before its turn), the store's insert, the schema store, the offset commit.
    this.options.log('info', 'written', { ...this.stats(), batch_rows: rows, batch_heads: heads, positions, encode_ms: Math.round(prepared.encodeMs), ms: now - started, store_ms: stored - started, schema_ms: applied - stored, commit_ms: now - applied });
  }

  /**
   * Moves a partition's high watermark and written offset forward (neither ever goes back: a late answer
   * must not undo a newer one) and reports the lag between them.
   */
  private advance(partition: number, highWatermark: number | undefined, written: number | undefined): void {
    const p = this.progress.get(partition);
    if (p === undefined) return; // not read since its assignment: handleBatch starts it
    if (highWatermark !== undefined) p.highWatermark = Math.max(p.highWatermark, highWatermark);
    if (written !== undefined) p.written = Math.max(p.written, written);
    this.options.metrics?.lag(partition, p.highWatermark - p.written);
  }

  /**
   * The memory bound: once over it, drops written states down to 90% of it: first the large ones among the
   * least recently touched half of the held rows, then the least recently touched of all (see the top of
   * this file). The first pass stops at the older half so that a large state touched (or loaded) lately is
   * not dropped ahead of long-idle smaller ones: that would trade one load for another.
   */
  private evict(): void {
    if (this.cachedRows <= this.options.maxRows) return;
    const target = Math.floor(this.options.maxRows * 0.9);
    const olderHalf = this.cachedRows / 2;
    let scanned = 0;
    for (const [key, cached] of this.cache) {
      if (this.cachedRows <= target || scanned >= olderHalf) break;
      scanned += cached.weight;
      if (cached.weight >= LARGE_STATE_ROWS) this.drop(key, cached);
    }
    for (const [key, cached] of this.cache) {
      if (this.cachedRows <= target) return;
      this.drop(key, cached);
    }
  }

  /** Drops a held state if it is written (only then does it load back exactly as it was). */
  private drop(key: string, cached: Cached): void {
    if (cached.batch > this.landed) return;
    this.cache.delete(key);
    this.cachedRows -= cached.weight;
    this.counters.evictions++;
    this.options.metrics?.count('evictions');
  }

  private revoke(partitions: readonly number[]): Promise<void> {
    const revoked = new Set(partitions);
    let dropped = 0;
    for (const p of revoked) {
      const pending = this.pending.get(p);
      if (pending === undefined) continue;
      this.pendingRows -= pending.rows.size;
      this.pending.delete(p);
    }
    for (const [key, cached] of this.cache) {
      if (!revoked.has(cached.partition)) continue;
      this.cache.delete(key);
      this.cachedRows -= cached.weight;
      dropped++;
    }
    for (const p of revoked) {
      this.progress.delete(p);
      this.options.metrics?.forget(p);
    }
    this.options.log('info', 'partitions revoked', { partitions, dropped_datasets: dropped });
    return Promise.resolve();
  }

  /**
   * Runs a store call until it succeeds. While the store is unavailable the partitions are paused (no new
   * fetches), the call is retried with backoff, and nothing is skipped; any other error is a bug and stops.
   */
  private async retrying<T>(what: string, call: () => Promise<T>): Promise<T> {
    let delay = this.options.retryInitialMs ?? 100;
    for (;;) {
      try {
        const result = await call();
        if (this.paused.length > 0) {
          this.source?.resume(this.paused);
          this.options.log('info', 'store available again, resuming', { partitions: this.paused });
          this.paused = [];
        }
        return result;
      } catch (e) {
        if (!isUnavailable(e) || this.abandoned) throw e;
        this.counters.retries++;
        this.options.metrics?.count('retries');
        if (this.paused.length === 0 && this.source !== undefined) {
          this.paused = this.source.assigned();
          this.source.pause(this.paused);
          this.options.log('warn', 'store unavailable, pausing', { while: what, error: describe(e), partitions: this.paused });
        }
        await sleep(delay);
        delay = Math.min(delay * 2, this.options.retryMaxMs ?? 5000);
      }
    }
  }
}

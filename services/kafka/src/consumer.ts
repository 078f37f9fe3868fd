import type { EventCodecOptions, StreamPosition } from '@pushbase/contracts';
import type { Consumer, EachBatchPayload } from 'kafkajs';
import { createKafka, type KafkaConnection } from './connection';
import { decodeMessage, offsetNumber, PoisonEventError, type ConsumedEvent, type IncomingMessage } from './messages';

/*
 * The read half of the Kafka event log, for the projector and replay: a consumer group member that hands
 * over decoded events per partition and commits an offset only when told, after the sink's write (never
 * autocommit: a crash would skip events). An undecodable event stops it instead of being skipped. Delivery,
 * rebalances and transaction markers: docs/architecture.md → The Kafka consumer.
 */

/** Something read at a position of the log: a dataset event (ConsumedEvent) or an account event. */
export interface Positioned {
  readonly position: StreamPosition;
}

/**
 * Turns one message into what the handler gets; throws PoisonEventError (never skips) for one it cannot
 * read. The default decodes dataset events (messages.ts); the accounts topic has its own (account-log.ts).
 */
export type MessageDecoder<E extends Positioned> = (topic: string, partition: number, message: IncomingMessage) => E;

export interface ConsumedBatch<E extends Positioned = ConsumedEvent> {
  readonly topic: string;
  readonly partition: number;
  /** In offset order; never empty. */
  readonly events: readonly E[];
  /** The partition's high watermark when this batch was fetched (markers and open transactions included). */
  readonly highWatermark: number;
  /**
   * Where the partition's reading goes on after this batch: the offset after the last message the fetch
   * covered, transaction markers and aborted events included. Compare this, not the last event's offset,
   * with a partition's end.
   */
  readonly next: number;
}

export interface BatchControl {
  /**
   * Tells the group this member is alive. Sent automatically every heartbeat interval while onBatch runs,
   * so a long sink write does not get the member dropped; call it yourself only inside a long CPU loop.
   */
  heartbeat(): Promise<void>;
  /** false once stop() was called or the consumer is going down: finish the batch quickly. */
  isRunning(): boolean;
}

export interface EventConsumerHandlers<E extends Positioned = ConsumedEvent> {
  /** One partition's batch. Batches of one partition never overlap; see `partitionsConsumedConcurrently`. */
  onBatch(batch: ConsumedBatch<E>, control: BatchControl): Promise<void>;
  /** This member now reads these partitions (after every join). */
  onAssigned?(partitions: readonly number[]): void | Promise<void>;
  /** This member no longer reads these partitions: drop whatever was cached for them. */
  onRevoked?(partitions: readonly number[]): void | Promise<void>;
  /**
   * The consumer stopped on its own and will not restart: a PoisonEventError, or an error kafkajs does not
   * retry. The process should flush what it safely can, commit, and exit non-zero.
   */
  onCrash?(error: Error): void;
  /**
   * A fetch delivered nothing but moved the partition's position to `next`: it covered only transaction
   * markers or aborted events. For progress ("caught up") only; nothing needs committing for it.
   */
  onSkipped?(partition: number, next: number): void;
  /** A handler callback (onAssigned/onRevoked) threw; it is reported here and otherwise ignored. Default: stderr. */
  onCallbackError?(error: unknown): void;
}

export interface KafkaEventConsumerOptions<E extends Positioned = ConsumedEvent> {
  readonly connection: KafkaConnection;
  readonly topic: string;
  readonly groupId: string;
  /**
   * Where a group without committed offsets starts. Default true (the topic's beginning): the log is the
   * source of truth, so a new reader reads all of it.
   */
  readonly fromBeginning?: boolean;
  /** The group drops a member silent for this long. Default 30000 ms. */
  readonly sessionTimeoutMs?: number;
  /** How often heartbeats go out (between batches and while onBatch runs). Default 3000 ms. */
  readonly heartbeatIntervalMs?: number;
  /** How long a rebalance waits for members to rejoin. Default 60000 ms. */
  readonly rebalanceTimeoutMs?: number;
  /** Fetch size per partition (a single larger event is still fetched whole). Default 4 MiB. */
  readonly maxBytesPerPartition?: number;
  /** How long one fetch waits for new events. Default 500 ms: short, so stop() and pause() act promptly. */
  readonly maxWaitTimeMs?: number;
  /** How many partitions' batches are handled at once. Default 1. */
  readonly partitionsConsumedConcurrently?: number;
  /** Upcasters for events of older schema versions. */
  readonly codec?: EventCodecOptions;
  /** How a message becomes an event; dataset events (with `codec`) when not given. */
  readonly decode?: MessageDecoder<E>;
  /**
   * Runs before each commit with the offsets about to be committed and this member's previous commit of
   * each partition; a rejection stops the commit. The projector records there how far Redis has applied.
   */
  readonly beforeCommit?: (offsets: readonly { readonly partition: number; readonly next: number; readonly committed: number | undefined }[]) => Promise<void>;
}

export interface CommitResult {
  /** Partitions whose positions were not committed because this member no longer holds them. */
  readonly notOwned: readonly number[];
}

/** The first cause in a chain of wrapped errors that is a PoisonEventError, else the outermost error. */
function rootCause(error: Error): Error {
  for (let e: unknown = error; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (e instanceof PoisonEventError) return e;
  }
  return error;
}

export class KafkaEventConsumer<E extends Positioned = ConsumedEvent> {
  private readonly consumer: Consumer;
  private readonly decode: MessageDecoder<E>;
  private readonly topic: string;
  private readonly heartbeatIntervalMs: number;
  /** Partitions this member holds, as of the last join; emptied when they are revoked. */
  private owned = new Set<number>();
  /** Assignment callbacks run one after another; batches wait for the ones before them. */
  private callbacks: Promise<void> = Promise.resolve();
  private running = false;
  private stopped: Promise<void> | undefined;
  /** Per owned partition: the offset of the last event delivered (and accepted) since it was assigned. */
  private readonly delivered = new Map<number, number>();
  /** Per owned partition: the last offset of the last batch fetched, markers and aborted events included. */
  private readonly fetched = new Map<number, number>();
  /** Per owned partition: the offset this member last committed (the next to read). */
  private readonly committedNext = new Map<number, number>();
  /** Commits go out one after another, so an earlier (lower) one never lands after a later one. */
  private commits: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: KafkaEventConsumerOptions<E>,
    private readonly handlers: EventConsumerHandlers<E>,
  ) {
    this.topic = options.topic;
    // Without a decoder of its own, E is ConsumedEvent (the default type argument): the dataset events' decoder.
    this.decode = options.decode ?? ((topic, partition, message) => decodeMessage(topic, partition, message, options.codec) as unknown as E);
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? 3000;
    const kafka = createKafka(options.connection);
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      sessionTimeout: options.sessionTimeoutMs ?? 30_000,
      rebalanceTimeout: options.rebalanceTimeoutMs ?? 60_000,
      heartbeatInterval: this.heartbeatIntervalMs,
      maxBytesPerPartition: options.maxBytesPerPartition ?? 4 * 1024 * 1024,
      maxWaitTimeInMs: options.maxWaitTimeMs ?? 500,
      allowAutoTopicCreation: false,
      retry: {
        // A poison event is not retriable (PoisonEventError.retriable = false), so it never gets here. Other
        // crashes restart the member: it rejoins and reads on from the last committed offset.
        restartOnFailure: (error) => Promise.resolve(!(rootCause(error) instanceof PoisonEventError)),
      },
    });
    const { GROUP_JOIN, REBALANCING, CRASH, END_BATCH_PROCESS } = this.consumer.events;
    // kafkajs resolves a fetch of markers and aborted events itself, without calling eachBatch; its batch
    // instrumentation event is the one place that says how far such a fetch went.
    this.consumer.on(END_BATCH_PROCESS, (event) => {
      const { topic, partition, batchSize, lastOffset } = event.payload;
      if (topic !== this.topic) return;
      if (batchSize === 0) this.handlers.onSkipped?.(partition, offsetNumber(lastOffset) + 1);
      if (!this.owned.has(partition)) return;
      this.fetched.set(partition, offsetNumber(lastOffset));
      // A batch of markers only (or one fetched after its events were committed): nothing is pending, so
      // the committed offset can move past it now.
      if (this.allCommitted(partition)) void this.skipMarkers(partition);
    });
    this.consumer.on(REBALANCING, () => this.revokeAll());
    this.consumer.on(GROUP_JOIN, (event) => {
      // A member dropped from the group (no REBALANCING event) still holds its old set here.
      this.revokeAll();
      const partitions = [...(event.payload.memberAssignment[this.topic] ?? [])].sort((a, b) => a - b);
      this.owned = new Set(partitions);
      this.callback(() => this.handlers.onAssigned?.(partitions));
    });
    this.consumer.on(CRASH, (event) => {
      this.revokeAll();
      if (!event.payload.restart) {
        this.running = false;
        this.handlers.onCrash?.(rootCause(event.payload.error));
      }
    });
  }

  /** Joins the group and starts delivering. Resolves once this member has joined. */
  async start(): Promise<void> {
    if (this.running || this.stopped) throw new Error('KafkaEventConsumer.start: call once');
    this.running = true;
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: [this.topic], fromBeginning: this.options.fromBeginning ?? true });
    await this.consumer.run({
      autoCommit: false,
      // Resolved by us after onBatch accepted the batch; a throwing handler must not move the position.
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionsConsumedConcurrently ?? 1,
      eachBatch: (payload) => this.handle(payload),
    });
  }

  /**
   * Records that the effects of the events up to and including these positions are durable: for each
   * partition the highest offset + 1 is committed, where the group resumes after a restart or a rebalance.
   * Positions of partitions this member no longer holds are left out (their new owner commits them) and
   * reported. Rejects when the group does not accept the commit (it is rebalancing): the events are then
   * delivered again to whoever holds the partition next, which an idempotent sink absorbs.
   */
  async commit(positions: readonly StreamPosition[]): Promise<CommitResult> {
    const highest = new Map<number, number>();
    for (const { partition, offset } of positions) highest.set(partition, Math.max(offset, highest.get(partition) ?? -1));
    const notOwned = [...highest.keys()].filter((p) => !this.owned.has(p)).sort((a, b) => a - b);
    const offsets = [...highest]
      .filter(([p]) => this.owned.has(p))
      .map(([partition, offset]) => {
        // The last event delivered is committed: the markers fetched after it go with it.
        const fetched = this.fetched.get(partition) ?? -1;
        const next = offset === this.delivered.get(partition) && fetched > offset ? fetched + 1 : offset + 1;
        return { partition, next };
      });
    if (offsets.length > 0) await this.send(offsets);
    return { notOwned };
  }

  private allCommitted(partition: number): boolean {
    const delivered = this.delivered.get(partition);
    return delivered === undefined || (this.committedNext.get(partition) ?? -1) > delivered;
  }

  private async skipMarkers(partition: number): Promise<void> {
    const next = (this.fetched.get(partition) ?? -1) + 1;
    if (next <= (this.committedNext.get(partition) ?? 0)) return;
    // Best effort: a commit refused during a rebalance is made by whoever reads the partition next.
    await this.send([{ partition, next }]).catch(() => undefined);
  }

  private send(offsets: readonly { partition: number; next: number }[]): Promise<void> {
    const sent = this.commits.then(async () => {
      await this.options.beforeCommit?.(offsets.map(({ partition, next }) => ({ partition, next, committed: this.committedNext.get(partition) })));
      await this.consumer.commitOffsets(offsets.map(({ partition, next }) => ({ topic: this.topic, partition, offset: String(next) })));
      for (const { partition, next } of offsets) {
        if (this.owned.has(partition) && next > (this.committedNext.get(partition) ?? -1)) this.committedNext.set(partition, next);
      }
    });
    this.commits = sent.catch(() => undefined);
    return sent;
  }

  /** Stops fetching these partitions (e.g. while the sink is down); a batch already in onBatch finishes. */
  pause(partitions: readonly number[]): void {
    this.consumer.pause([{ topic: this.topic, partitions: [...partitions] }]);
  }

  resume(partitions: readonly number[]): void {
    this.consumer.resume([{ topic: this.topic, partitions: [...partitions] }]);
  }

  /** The partitions this member holds now. */
  assigned(): readonly number[] {
    return [...this.owned].sort((a, b) => a - b);
  }

  /** Lets the running batch finish, leaves the group (its partitions move to other members), disconnects. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.running = false;
      await this.consumer.disconnect();
      this.revokeAll();
      await this.callbacks;
    })();
    return this.stopped;
  }

  private revokeAll(): void {
    if (this.owned.size === 0) return;
    const partitions = [...this.owned].sort((a, b) => a - b);
    this.owned = new Set();
    for (const p of partitions) {
      this.delivered.delete(p);
      this.fetched.delete(p);
      this.committedNext.delete(p);
    }
    this.callback(() => this.handlers.onRevoked?.(partitions));
  }

  private callback(run: () => void | Promise<void>): void {
    this.callbacks = this.callbacks
      .then(run)
      .catch((err: unknown) => (this.handlers.onCallbackError ?? ((e) => process.stderr.write(`pushbase: kafka consumer: assignment callback failed: ${String(e)}\n`)))(err));
  }

  private async handle(payload: EachBatchPayload): Promise<void> {
    await this.callbacks;
    const { batch } = payload;
    const { topic, partition } = batch;
    const heartbeat = (): Promise<void> => payload.heartbeat();
    const events: E[] = [];
    let poison: PoisonEventError | undefined;
    for (const message of batch.messages) {
      try {
        events.push(this.decode(topic, partition, message));
      } catch (err) {
        poison = err instanceof PoisonEventError ? err : new PoisonEventError(topic, partition, message.offset, String(err));
        break;
      }
    }
    if (events.length > 0) {
      const beat = setInterval(() => void heartbeat().catch(() => undefined), this.heartbeatIntervalMs);
      try {
        // Without a poison message the whole fetch is accepted, trailing markers included, so the next fetch
        // does not begin with a batch of nothing but the last transaction's marker.
        const next = poison === undefined ? offsetNumber(batch.lastOffset()) + 1 : events[events.length - 1]!.position.offset + 1;
        await this.handlers.onBatch(
          { topic, partition, events, highWatermark: offsetNumber(batch.highWatermark), next },
          { heartbeat, isRunning: () => this.running && payload.isRunning() },
        );
      } finally {
        clearInterval(beat);
      }
      payload.resolveOffset(poison === undefined ? batch.lastOffset() : String(events[events.length - 1]!.position.offset));
      if (this.owned.has(partition)) this.delivered.set(partition, events[events.length - 1]!.position.offset);
    }
    if (poison !== undefined) throw poison;
  }
}

import type { ISocketFactory, Kafka } from 'kafkajs';
import { Partitioners } from 'kafkajs';
import { offsetNumber, type BaseOffsets, type PlacedMessage } from './messages';

/*
 * A kafkajs transactional producer assembled from kafkajs 2.2.4's own parts, because the public producer
 * cannot retry a commit whose answer was lost (it sends EndTxn once and then allows neither commit nor
 * abort), and a repeated EndTxn of the same epoch is what tells the outcome. The parts are reached by path;
 * kafkaInternals() checks their shapes and fails loudly if an upgrade moved them. Why and how:
 * docs/architecture.md → The transactional producer.
 */

/** The coordinator refused the commit: the transaction is (or will be) aborted; nothing of it is visible. */
export class TransactionAbortedError extends Error {
  override readonly name = 'TransactionAbortedError';
}

/**
 * The coordinator answered with a fencing error: this producer's epoch is over (a producer with the same
 * transactional id initialised, or the coordinator aborted the transaction at its timeout). Whether the
 * transaction committed depends on whether an earlier EndTxn(commit) of it reached the coordinator.
 */
export class TransactionFencedError extends Error {
  override readonly name = 'TransactionFencedError';
}

/** The coordinator answered without acting on the request (not the coordinator, loading, busy): try again. */
export class CommitNotProcessedError extends Error {
  override readonly name = 'CommitNotProcessedError';
}

export interface EosManager {
  initProducerId(): Promise<void>;
  addPartitionsToTransaction(topicData: { topic: string; partitions: { partition: number }[] }[]): Promise<void>;
  beginTransaction(): void;
  commit(): Promise<void>;
  abort(): Promise<void>;
  getProducerId(): number;
  getProducerEpoch(): number;
  isInTransaction(): boolean;
  getSequence(topic: string, partition: number): number;
  /** Adds `increment` to the partition's next sequence number. */
  updateSequence(topic: string, partition: number, increment: number): void;
}
export interface KafkaBroker {
  readonly nodeId: number;
  endTxn(request: { producerId: number; producerEpoch: number; transactionalId: string; transactionResult: boolean }): Promise<unknown>;
}
interface CoordinatorRequest {
  groupId: string;
  coordinatorType: number;
}
export interface KafkaCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadata(): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  findTopicPartitionMetadata(topic: string): unknown[];
  findGroupCoordinator(request: CoordinatorRequest): Promise<KafkaBroker>;
  /** The broker of that node id, connected (kafkajs connects lazily here). */
  findBroker(request: { nodeId: number }): Promise<KafkaBroker>;
  findControllerBroker(): Promise<KafkaBroker>;
  retry: unknown;
}
/** What kafkajs's eos manager uses of its cluster (read in its source). */
type EosCluster = Pick<KafkaCluster, 'findGroupCoordinator' | 'findControllerBroker' | 'refreshMetadataIfNecessary' | 'retry'>;
interface SendBatchResult {
  readonly partition: number;
  readonly baseOffset?: string;
}
export interface Emitter {
  addListener(event: string, listener: (e: { payload: { apiName: string } }) => void): () => void;
}
export interface Internals {
  createEosManager(options: { logger: unknown; cluster: EosCluster; transactionTimeout: number; transactional: boolean; transactionalId: string | undefined }): EosManager;
  createMessageProducer(options: {
    logger: unknown;
    cluster: KafkaCluster;
    partitioner: unknown;
    eosManager: EosManager;
    idempotent: true;
    retrier: unknown;
    getConnectionStatus: () => string;
  }): { sendBatch(request: { acks: number; timeout?: number; topicMessages: { topic: string; messages: unknown[] }[] }): Promise<SendBatchResult[]> };
  createRetry(options: unknown): unknown;
  Emitter: new () => Emitter;
  /** kafkajs's own socket factory (plain TCP or TLS, keep-alive), for wrapping (idempotent-producer.ts). */
  defaultSocketFactory: () => ISocketFactory;
  CONNECTED: string;
  TRANSACTION_COORDINATOR: number;
}

let internals: Internals | undefined;

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs's internal CommonJS modules, see the top */
export function kafkaInternals(): Internals {
  if (internals) return internals;
  const loaded: Internals = {
    createEosManager: require('kafkajs/src/producer/eosManager') as Internals['createEosManager'],
    createMessageProducer: require('kafkajs/src/producer/messageProducer') as Internals['createMessageProducer'],
    createRetry: require('kafkajs/src/retry') as Internals['createRetry'],
    Emitter: require('kafkajs/src/instrumentation/emitter') as Internals['Emitter'],
    defaultSocketFactory: require('kafkajs/src/network/socketFactory') as Internals['defaultSocketFactory'],
    CONNECTED: (require('kafkajs/src/network/connectionStatus') as { CONNECTION_STATUS: { CONNECTED: string } }).CONNECTION_STATUS.CONNECTED,
    TRANSACTION_COORDINATOR: (require('kafkajs/src/protocol/coordinatorTypes') as { TRANSACTION: number }).TRANSACTION,
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
  const shapes = [typeof loaded.createEosManager, typeof loaded.createMessageProducer, typeof loaded.createRetry, typeof loaded.Emitter, typeof loaded.defaultSocketFactory];
  if (shapes.some((t) => t !== 'function') || typeof loaded.CONNECTED !== 'string' || loaded.TRANSACTION_COORDINATOR !== 1) {
    throw new Error('kafkajs internals are not where services/kafka/src/transactional-producer.ts expects them (written for kafkajs 2.2.4)');
  }
  internals = loaded;
  return loaded;
}

/** kafkajs's own default for its producers and consumers. */
const METADATA_MAX_AGE_MS = 300_000;

/** Adds the topic to those the (connected) cluster follows; resolves with its partition count. */
export async function topicPartitions(cluster: KafkaCluster, topic: string): Promise<number> {
  await cluster.addTargetTopic(topic);
  const partitions = cluster.findTopicPartitionMetadata(topic).length;
  if (partitions === 0) throw new Error(`topic ${topic} has no partitions`);
  return partitions;
}

export function createCluster(kafka: Kafka, emitter: Emitter): KafkaCluster {
  const factory = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster');
  const create = factory === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[factory];
  if (typeof create !== 'function') throw new Error('kafkajs Kafka object has no cluster factory (services/kafka/src/transactional-producer.ts is written for kafkajs 2.2.4)');
  // maxInFlightRequests 1 as kafkajs requires of an idempotent producer; no topic is ever auto-created.
  // metadataMaxAge as kafkajs's public producer has it: left out, it is 0, and every send asked the brokers
  // for metadata first (a round trip per transaction). A send that meets moved leaders or partitions
  // refreshes the metadata itself (kafkajs's sendMessages), so the cache costs nothing in correctness.
  return (create as (options: object) => KafkaCluster).call(kafka, { allowAutoTopicCreation: false, maxInFlightRequests: 1, metadataMaxAge: METADATA_MAX_AGE_MS, instrumentationEmitter: emitter });
}

export interface TransactionalProducerOptions {
  readonly kafka: Kafka;
  readonly topic: string;
  readonly transactionalId: string;
  /** The coordinator aborts a transaction left open this long (a crashed producer's). */
  readonly transactionTimeoutMs: number;
  /** kafkajs retry of produce requests (bounded; docs/architecture.md → The Kafka appender). */
  readonly retry: { readonly retries: number; readonly initialRetryTime: number; readonly maxRetryTime: number };
  /** Told the API name of every request sent (kafkajs's request instrumentation). */
  readonly onRequest?: (apiName: string) => void;
}

const FENCING = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING']);
const NOT_PROCESSED = new Set(['CONCURRENT_TRANSACTIONS', 'NOT_COORDINATOR', 'NOT_COORDINATOR_FOR_GROUP', 'COORDINATOR_NOT_AVAILABLE', 'GROUP_COORDINATOR_NOT_AVAILABLE', 'COORDINATOR_LOAD_IN_PROGRESS', 'GROUP_LOAD_IN_PROGRESS']);

/** Kafka's numeric code 90 (PRODUCER_FENCED) is not in kafkajs's table; it arrives as an unknown error with that code. */
function errorType(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { type, code } = err as { type?: unknown; code?: unknown };
  if (code === 90) return 'PRODUCER_FENCED';
  return typeof type === 'string' ? type : undefined;
}

/** Turns the coordinator's answer to EndTxn(commit) into the errors above; anything else is passed on as it is. */
function classifyCommitError(err: unknown): Error {
  const type = errorType(err);
  const message = err instanceof Error ? err.message : String(err);
  if (type === 'INVALID_TXN_STATE') return new TransactionAbortedError(`Kafka refused the commit: ${message}`);
  if (type !== undefined && FENCING.has(type)) return new TransactionFencedError(`Kafka fenced the producer: ${message}`);
  if (type !== undefined && NOT_PROCESSED.has(type)) return new CommitNotProcessedError(`Kafka did not process the commit: ${message}`);
  return err instanceof Error ? err : new Error(message);
}

/** One producer: a connection set and a transactional id, one transaction at a time. */
export class TransactionalProducer {
  private readonly cluster: KafkaCluster;
  private readonly internals: Internals;
  private readonly emitter: Emitter;
  private eos: EosManager | undefined;
  /** The eos manager's state is no longer kafkajs's idea of it (a failed or retried commit, a failed abort). */
  private stale = true;
  private commitAttempts = 0;
  private connected = false;
  /** The transaction coordinator's node id once found; forgotten when a request to it fails. */
  private coordinatorId: number | undefined;
  /** The cluster as the eos managers see it: with the coordinator remembered (coordinator()). */
  private readonly eosCluster: EosCluster;

  constructor(private readonly options: TransactionalProducerOptions) {
    this.internals = kafkaInternals();
    this.emitter = new this.internals.Emitter();
    const { onRequest } = options;
    if (onRequest) this.emitter.addListener('network.request', (e) => onRequest(e.payload.apiName));
    this.cluster = createCluster(options.kafka, this.emitter);
    const cluster = this.cluster;
    this.eosCluster = {
      // kafkajs's Cluster keeps its retry settings to itself (this is undefined), so the eos manager retries
      // InitProducerId with kafkajs's defaults, as it always has here.
      retry: cluster.retry,
      refreshMetadataIfNecessary: () => cluster.refreshMetadataIfNecessary(),
      findControllerBroker: () => cluster.findControllerBroker(),
      findGroupCoordinator: (request) => this.coordinator(request),
    };
  }

  /**
   * The transaction coordinator, remembered: kafkajs asks for it (a FindCoordinator round trip) before every
   * request. The node id is forgotten as soon as a request to it fails other than with
   * CONCURRENT_TRANSACTIONS (an answer only the coordinator gives), so the next request asks Kafka again. Any
   * other coordinator is asked of the cluster. Why: docs/architecture.md → The transactional producer.
   */
  private async coordinator(request: CoordinatorRequest): Promise<KafkaBroker> {
    if (request.coordinatorType !== this.internals.TRANSACTION_COORDINATOR || request.groupId !== this.options.transactionalId) {
      return this.cluster.findGroupCoordinator(request);
    }
    let broker: KafkaBroker | undefined;
    if (this.coordinatorId !== undefined) {
      try {
        broker = await this.cluster.findBroker({ nodeId: this.coordinatorId });
      } catch {
        this.coordinatorId = undefined;
      }
    }
    if (broker === undefined) {
      broker = await this.cluster.findGroupCoordinator(request);
      this.coordinatorId = broker.nodeId;
    }
    return this.forgettingOnFailure(broker);
  }

  /** The broker, every request of which that fails (but for CONCURRENT_TRANSACTIONS) forgets the coordinator. */
  private forgettingOnFailure(broker: KafkaBroker): KafkaBroker {
    return new Proxy(broker, {
      get: (target, property) => {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]): unknown => {
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          if (!(result instanceof Promise)) return result;
          return result.catch((err: unknown) => {
            if (errorType(err) !== 'CONCURRENT_TRANSACTIONS') this.coordinatorId = undefined;
            throw err;
          });
        };
      },
    });
  }

  /**
   * Connects and initialises the transactional id. InitProducerId fences any earlier producer with the same
   * id (a predecessor of this service instance) and settles its open transaction before it returns: one in
   * the middle of committing is completed, one still open is aborted. Resolves with the topic's partition count.
   */
  async connect(): Promise<number> {
    await this.cluster.connect();
    this.connected = true;
    const partitions = await topicPartitions(this.cluster, this.options.topic);
    await this.reset();
    return partitions;
  }

  /** Begins a transaction and sends the messages in it (one produce request per broker); resolves with each partition's first offset. */
  async send(messages: readonly PlacedMessage[]): Promise<BaseOffsets> {
    if (this.stale) await this.reset();
    const eos = this.eos!;
    eos.beginTransaction();
    this.commitAttempts = 0;
    await this.addPartitions(eos, [...new Set(messages.map((m) => m.partition))]);
    const sender = this.internals.createMessageProducer({
      logger: this.options.kafka.logger(),
      cluster: this.cluster,
      partitioner: Partitioners.DefaultPartitioner(),
      eosManager: eos,
      idempotent: true,
      retrier: this.internals.createRetry({ ...(this.cluster.retry as object), ...this.options.retry }),
      getConnectionStatus: () => this.internals.CONNECTED,
    });
    const metadata = await sender.sendBatch({ acks: -1, topicMessages: [{ topic: this.options.topic, messages: [...messages] }] });
    return metadata.map((m) => ({ partition: m.partition, baseOffset: offsetNumber(m.baseOffset ?? '') }));
  }

  /**
   * Sends EndTxn(commit) for the open transaction; may be called again after any rejection. Resolves once
   * the coordinator confirmed the commit. Rejects with TransactionAbortedError, TransactionFencedError or
   * CommitNotProcessedError when the coordinator answered so; with any other error when no answer came (the
   * request may or may not have reached it).
   */
  async commit(): Promise<void> {
    const eos = this.eos!;
    this.commitAttempts += 1;
    try {
      if (this.commitAttempts === 1) {
        this.stale = true; // until kafkajs's own commit returns: then its state machine is back in READY
        await eos.commit();
        this.stale = false;
      } else {
        const coordinator = await this.coordinator({ groupId: this.options.transactionalId, coordinatorType: this.internals.TRANSACTION_COORDINATOR });
        await coordinator.endTxn({ producerId: eos.getProducerId(), producerEpoch: eos.getProducerEpoch(), transactionalId: this.options.transactionalId, transactionResult: true });
      }
    } catch (err) {
      throw classifyCommitError(err);
    }
  }

  /**
   * Aborts the open transaction (never after a commit was sent). When the abort fails, the next send()
   * initialises the id again, which aborts the transaction on the coordinator before anything else is sent.
   */
  async abort(): Promise<void> {
    const eos = this.eos;
    if (!eos?.isInTransaction()) return;
    this.stale = true;
    await eos.abort();
    this.stale = false;
  }

  async disconnect(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    await this.cluster.disconnect();
  }

  /**
   * Registers the transaction's partitions with the coordinator before the produce (kafkajs's send would do
   * it too, but retry a refusal only after its produce backoff of hundreds of ms). Right after a commit the
   * coordinator is still writing the previous transaction's markers and answers CONCURRENT_TRANSACTIONS for
   * a few ms; the Java client retries that at once, and so does this, quickly and boundedly.
   */
  private async addPartitions(eos: EosManager, partitions: number[]): Promise<void> {
    const topicData = [{ topic: this.options.topic, partitions: partitions.map((partition) => ({ partition })) }];
    let wait = 2;
    for (let attempt = 0; ; attempt++) {
      try {
        await eos.addPartitionsToTransaction(topicData);
        return;
      } catch (err) {
        // Not processed (busy, or not the coordinator any more: then the next attempt finds the new one).
        // Repeating AddPartitionsToTxn is harmless: adding a partition twice adds it once.
        const type = errorType(err);
        if (type === undefined || !NOT_PROCESSED.has(type) || attempt >= 50) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 50);
    }
  }

  /** A fresh eos manager, initialised: InitProducerId (kafkajs retries it while the coordinator is busy). */
  private async reset(): Promise<void> {
    const eos = this.internals.createEosManager({
      logger: this.options.kafka.logger(),
      cluster: this.eosCluster,
      transactionTimeout: this.options.transactionTimeoutMs,
      transactional: true,
      transactionalId: this.options.transactionalId,
    });
    await eos.initProducerId();
    this.eos = eos;
    this.stale = false;
  }
}

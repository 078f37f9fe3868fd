import type { Socket } from 'node:net';
import type { ISocketFactory, Kafka } from 'kafkajs';
import { Partitioners } from 'kafkajs';
import { createKafka, type KafkaConnection } from './connection';
import { offsetNumber, type OutgoingMessage } from './messages';
import { createCluster, kafkaInternals, type EosManager, type Internals, type KafkaCluster } from './transactional-producer';

/*
 * An idempotent (not transactional) kafkajs producer, assembled from kafkajs 2.2.4's own parts like
 * transactional-producer.ts and for two reasons of its own:
 *  - it must tell a send that failed before any produce request was written to a socket (nothing can be
 *    stored: the append may be refused with 503) from one that failed after (the broker may have stored
 *    it). kafkajs's errors do not say which (a broker that went away fails the reconnect inside its
 *    produce call, before anything is written), so this producer's sockets are wrapped: kafkajs writes each
 *    request whole in one write, whose header names its API, and a send during which no Produce request
 *    was written is rejected as NotSentError;
 *  - a batch whose answer was lost must be sent again exactly as it was: the same producer id and epoch and
 *    the same sequence numbers, so that the broker stores it once — it answers a batch it already holds
 *    (one of the last five per partition) with that batch's offset instead of writing it twice. kafkajs
 *    rolls a partition's sequence back when a produce fails, so sending the same messages again on the
 *    same producer does exactly that. Its retrier is set to no retries: the appender decides when to send
 *    again (appender.ts, "confirmation").
 */

/** The send failed before any produce request was handed to a connection: nothing of it can be stored. */
export class NotSentError extends Error {
  override readonly name = 'NotSentError';
}

export interface IdempotentProducerOptions {
  /** Its own kafkajs client is made from this (with its sockets wrapped, see the top). */
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** Told the API name of every request sent (kafkajs's request instrumentation). */
  readonly onRequest?: (apiName: string) => void;
}

/** kafkajs asks for a transaction timeout even of a producer without transactions; the broker ignores it then. */
const UNUSED_TRANSACTION_TIMEOUT_MS = 60_000;

/** One producer id; one batch at a time (the appender's queue), so its sequence numbers are never in doubt. */
export class IdempotentProducer {
  private readonly internals: Internals;
  private readonly kafka: Kafka;
  private readonly cluster: KafkaCluster;
  /** A Produce request was written to one of this producer's sockets since the current send began. */
  private produced = false;
  private eos: EosManager | undefined;
  private connected = false;

  constructor(private readonly options: IdempotentProducerOptions) {
    this.internals = kafkaInternals();
    const emitter = new this.internals.Emitter();
    const { onRequest } = options;
    if (onRequest) emitter.addListener('network.request', (e) => onRequest(e.payload.apiName));
    const sockets = options.connection.socketFactory ?? this.internals.defaultSocketFactory();
    this.kafka = createKafka({
      ...options.connection,
      socketFactory: reportingProduceWrites(sockets, () => {
        this.produced = true;
      }),
    });
    this.cluster = createCluster(this.kafka, emitter);
  }

  /** Connects and gets a producer id (InitProducerId); resolves with the topic's partition count. */
  async connect(): Promise<number> {
    await this.cluster.connect();
    this.connected = true;
    await this.cluster.addTargetTopic(this.options.topic);
    const partitions = this.cluster.findTopicPartitionMetadata(this.options.topic).length;
    if (partitions === 0) throw new Error(`topic ${this.options.topic} has no partitions`);
    const eos = this.internals.createEosManager({
      logger: this.kafka.logger(),
      cluster: this.cluster,
      transactionTimeout: UNUSED_TRANSACTION_TIMEOUT_MS,
      transactional: false,
      transactionalId: undefined,
    });
    await eos.initProducerId();
    this.eos = eos;
    return partitions;
  }

  /**
   * Sends the messages (one produce request per broker, acks=all); resolves with each partition's first
   * offset. Rejects with NotSentError when no produce request was handed to a connection, with kafkajs's
   * error otherwise. Called again with the same messages after a failure, it sends the same batches.
   */
  async send(messages: readonly (OutgoingMessage & { readonly partition: number })[]): Promise<readonly { partition: number; baseOffset: number }[]> {
    const eos = this.eos;
    if (eos === undefined) throw new NotSentError('The producer is not connected');
    const sender = this.internals.createMessageProducer({
      logger: this.kafka.logger(),
      cluster: this.cluster,
      partitioner: Partitioners.DefaultPartitioner(),
      eosManager: eos,
      idempotent: true,
      retrier: this.internals.createRetry({ retries: 0 }),
      getConnectionStatus: () => this.internals.CONNECTED,
    });
    this.produced = false;
    try {
      const metadata = await sender.sendBatch({ acks: -1, topicMessages: [{ topic: this.options.topic, messages: [...messages] }] });
      return metadata.map((m) => ({ partition: m.partition, baseOffset: offsetNumber(m.baseOffset ?? '') }));
    } catch (err) {
      if (!this.produced) throw new NotSentError(err instanceof Error ? err.message : String(err));
      throw err;
    }
  }

  async disconnect(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    await this.cluster.disconnect();
  }
}

/** kafkajs's request header: int32 size, int16 API key (Produce is 0), … */
const PRODUCE_API_KEY = 0;

/** The sockets of `factory`, each calling `onProduce` when a Produce request is written to it. */
function reportingProduceWrites(factory: ISocketFactory, onProduce: () => void): ISocketFactory {
  return (options) => {
    const socket: Socket = factory(options);
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      // A destroyed socket writes nothing (the write only fails): that request cannot have reached a broker.
      if (!socket.destroyed && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === PRODUCE_API_KEY) onProduce();
      return write(chunk, ...rest);
    });
    return socket;
  };
}

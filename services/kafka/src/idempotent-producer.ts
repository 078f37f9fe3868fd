import type { Socket } from 'node:net';
import type { ISocketFactory, Kafka } from 'kafkajs';
import { Partitioners } from 'kafkajs';
import { createKafka, type KafkaConnection } from './connection';
import { offsetNumber, type BaseOffsets, type PlacedMessage } from './messages';
import { createCluster, kafkaInternals, topicPartitions, type EosManager, type Internals, type KafkaBroker, type KafkaCluster } from './transactional-producer';

/*
 * An idempotent (not transactional) kafkajs producer built from kafkajs's own parts, because the appender
 * needs two things kafkajs's producer lacks: to know whether a failed send wrote any produce request (its
 * sockets are wrapped; none written → NotSentError, nothing stored), and to re-send a batch with the same
 * sequence numbers, so the broker stores it once. Why and how: docs/architecture.md → The idempotent producer.
 */

/** The send failed before any produce request was written to a socket: nothing of it can be stored. */
export class NotSentError extends Error {
  override readonly name = 'NotSentError';
}

export interface IdempotentProducerOptions {
  /** Its own kafkajs client is made from this (with its sockets wrapped, see the top). */
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** Told the API name of every request sent (kafkajs's request instrumentation). */
  readonly onRequest?: (apiName: string) => void;
  /**
   * How long the broker may wait for the in-sync replicas before answering a produce (its `timeout`).
   * Default 5000 ms: keep it under the connection's request timeout, so that a slow cluster answers with
   * an error (and the batch is confirmed) rather than the request timing out.
   */
  readonly produceTimeoutMs?: number;
}

/** kafkajs asks for a transaction timeout even of a producer without transactions; the broker ignores it then. */
const UNUSED_TRANSACTION_TIMEOUT_MS = 60_000;

/** One producer id; one batch at a time (the appender's queue), so its sequence numbers are never in doubt. */
export class IdempotentProducer {
  private readonly internals: Internals;
  private readonly kafka: Kafka;
  private readonly cluster: KafkaCluster;
  /** The cluster as the sender sees it: every broker's produce call is followed (`inFlight`). */
  private readonly tracked: KafkaCluster;
  /** A Produce request was written to one of this producer's sockets since the current send began. */
  private produced = false;
  /** The produce calls of the current attempt not yet settled. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Each partition's sequence before the current batch's first attempt. */
  private batchStart = new Map<number, number>();
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
    this.tracked = followingProduce(this.cluster, (call) => {
      this.inFlight.add(call);
      void call.then(
        () => this.inFlight.delete(call),
        () => this.inFlight.delete(call),
      );
    });
  }

  /** Connects and gets a producer id (InitProducerId); resolves with the topic's partition count. */
  async connect(): Promise<number> {
    this.connected = true; // before: a connect that fails half way still has sockets to close
    await this.cluster.connect();
    const partitions = await topicPartitions(this.cluster, this.options.topic);
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
   * offset. Rejects with NotSentError when no produce request was written to a socket, with kafkajs's
   * error otherwise. With `again`, the same messages after a failure: it sends the same batches (the
   * sequence numbers of the first attempt).
   */
  async send(messages: readonly PlacedMessage[], again = false): Promise<BaseOffsets> {
    const eos = this.eos;
    if (eos === undefined) throw new NotSentError('The producer is not connected');
    const { topic } = this.options;
    await this.settled();
    if (!again) {
      this.batchStart = new Map([...new Set(messages.map((m) => m.partition))].map((p) => [p, eos.getSequence(topic, p)]));
    } else {
      for (const [partition, sequence] of this.batchStart) eos.updateSequence(topic, partition, sequence - eos.getSequence(topic, partition));
    }
    const sender = this.internals.createMessageProducer({
      logger: this.kafka.logger(),
      cluster: this.tracked,
      partitioner: Partitioners.DefaultPartitioner(),
      eosManager: eos,
      idempotent: true,
      retrier: this.internals.createRetry({ retries: 0 }),
      getConnectionStatus: () => this.internals.CONNECTED,
    });
    this.produced = false;
    try {
      const metadata = await sender.sendBatch({ acks: -1, timeout: this.options.produceTimeoutMs ?? 5000, topicMessages: [{ topic: this.options.topic, messages: [...messages] }] });
      return metadata.map((m) => ({ partition: m.partition, baseOffset: offsetNumber(m.baseOffset ?? '') }));
    } catch (err) {
      await this.settled(); // the other brokers' requests of this attempt: written or not, they are decided
      if (!this.produced) throw new NotSentError(err instanceof Error ? err.message : String(err));
      throw err;
    }
  }

  /** Waits until no produce call of this producer is in flight. */
  private async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  async disconnect(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    await this.cluster.disconnect();
  }
}

/** The cluster, but each broker found through it reports the promise of each of its produce calls. */
function followingProduce(cluster: KafkaCluster, onProduce: (call: Promise<unknown>) => void): KafkaCluster {
  // One proxy per broker: kafkajs keys its per-broker answers by the broker object (sendMessages.js), and a
  // retry inside one send must find the brokers that already answered.
  const proxies = new WeakMap<KafkaBroker, KafkaBroker>();
  const wrapBroker = (broker: KafkaBroker): KafkaBroker => {
    let proxy = proxies.get(broker);
    if (proxy === undefined) {
      proxy = replacingMethod(broker, 'produce', (produce) => (...args) => {
        const call = Promise.resolve(produce(...args));
        onProduce(call);
        return call;
      });
      proxies.set(broker, proxy);
    }
    return proxy;
  };
  return replacingMethod(cluster, 'findBroker', (findBroker) => async (...args) => wrapBroker((await findBroker(...args)) as KafkaBroker));
}

type Method = (...args: unknown[]) => unknown;

/** `target` with its method `name` replaced by `replace(the original)`; its other methods bound to it. */
function replacingMethod<T extends object>(target: T, name: string, replace: (original: Method) => Method): T {
  return new Proxy(target, {
    get: (t, property) => {
      const value: unknown = Reflect.get(t, property, t);
      if (typeof value !== 'function') return value;
      const method = (value as Method).bind(t);
      return property === name ? replace(method) : method;
    },
  });
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

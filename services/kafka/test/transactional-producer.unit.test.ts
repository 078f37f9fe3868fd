/*
 * The transactional producer against a fake kafkajs cluster (no Kafka): how it finds the transaction
 * coordinator. It remembers the coordinator instead of asking Kafka before every request, so these pin what
 * happens when the coordinator moves to another broker while the old one stays up (a controlled shutdown,
 * a leader rebalance): the old broker answers NOT_COORDINATOR, and the next attempt must ask again.
 */
import type { Kafka } from 'kafkajs';
import { TransactionalProducer } from '../src/transactional-producer';

const TOPIC = 'events';
const TXN_ID = 'pushbase-records-test';

function fakeKafka() {
  const calls: string[] = [];
  const state = { coordinator: 1, offset: 0 };
  const notCoordinator = (): Error =>
    Object.assign(new Error('This is not the correct coordinator for this group'), { name: 'KafkaJSProtocolError', type: 'NOT_COORDINATOR_FOR_GROUP', retriable: true });
  const broker = (nodeId: number) => {
    const asCoordinator = <T>(api: string, answer: T) => (): Promise<T> => {
      calls.push(`${api}@${nodeId}`);
      return nodeId === state.coordinator ? Promise.resolve(answer) : Promise.reject(notCoordinator());
    };
    return {
      nodeId,
      initProducerId: asCoordinator('InitProducerId', { producerId: 7, producerEpoch: 0 }),
      addPartitionsToTxn: asCoordinator('AddPartitionsToTxn', {}),
      endTxn: asCoordinator('EndTxn', {}),
      produce: ({ topicData }: { topicData: { topic: string; partitions: { partition: number; messages: unknown[] }[] }[] }) => {
        calls.push(`Produce@${nodeId}`);
        return Promise.resolve({
          topics: topicData.map(({ topic, partitions }) => ({
            topicName: topic,
            partitions: partitions.map(({ partition, messages }) => {
              const baseOffset = String(state.offset);
              state.offset += messages.length;
              return { partition: Number(partition), errorCode: 0, baseOffset, logAppendTime: '-1', logStartOffset: '0' };
            }),
          })),
        });
      },
    };
  };
  const brokers = new Map([1, 2].map((id) => [id, broker(id)]));
  const cluster = {
    targetTopics: new Set<string>(),
    connect: () => Promise.resolve(),
    disconnect: () => Promise.resolve(),
    isConnected: () => true,
    addTargetTopic: (topic: string) => Promise.resolve(void cluster.targetTopics.add(topic)),
    addMultipleTargetTopics: (topics: string[]) => Promise.resolve(void topics.forEach((t) => cluster.targetTopics.add(t))),
    refreshMetadata: () => Promise.resolve(),
    refreshMetadataIfNecessary: () => Promise.resolve(),
    findTopicPartitionMetadata: () => [{ partitionId: 0, leader: 2, replicas: [2], isr: [2] }],
    findLeaderForPartitions: (_topic: string, partitions: number[]) => ({ 2: partitions }),
    findGroupCoordinator: ({ groupId }: { groupId: string }) => {
      calls.push(`FindCoordinator(${groupId})->${state.coordinator}`);
      return Promise.resolve(brokers.get(state.coordinator)!);
    },
    // kafkajs passes node ids as numbers or as the string keys of its partitions-per-leader map.
    findBroker: ({ nodeId }: { nodeId: number | string }) => Promise.resolve(brokers.get(Number(nodeId))!),
    findControllerBroker: () => Promise.resolve(brokers.get(1)!),
  };
  const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined, namespace: () => logger, setLogLevel: () => undefined };
  // What transactional-producer.ts looks the cluster factory up by (kafkajs's private symbol's description).
  const kafka = { logger: () => logger, [Symbol('private:Kafka:createCluster')]: () => cluster } as unknown as Kafka;
  return { kafka, calls, state };
}

const producer = (kafka: Kafka): TransactionalProducer =>
  new TransactionalProducer({ kafka, topic: TOPIC, transactionalId: TXN_ID, transactionTimeoutMs: 10_000, retry: { retries: 0, initialRetryTime: 1, maxRetryTime: 1 } });

const message = (n: number) => ({ key: `acct/ds-${n}`, value: Buffer.from(`event ${n}`), partition: 0 });

describe('TransactionalProducer: the transaction coordinator', () => {
  it('asks for it once, not before every request', async () => {
    const { kafka, calls } = fakeKafka();
    const p = producer(kafka);
    await p.connect();
    for (let i = 0; i < 3; i++) {
      await p.send([message(i)]);
      await p.commit();
    }
    expect(calls.filter((c) => c.startsWith('FindCoordinator'))).toEqual([`FindCoordinator(${TXN_ID})->1`]);
    expect(calls.filter((c) => c.startsWith('EndTxn'))).toEqual(['EndTxn@1', 'EndTxn@1', 'EndTxn@1']);
  });

  it('finds it again when it moved between transactions, and the transaction still goes through', async () => {
    const { kafka, calls, state } = fakeKafka();
    const p = producer(kafka);
    await p.connect();
    await p.send([message(0)]);
    await p.commit();
    calls.length = 0;
    state.coordinator = 2; // broker 1 stays up and answers NOT_COORDINATOR
    await expect(p.send([message(1)])).resolves.toEqual([{ partition: 0, baseOffset: 1 }]);
    await p.commit();
    expect(calls).toEqual(['AddPartitionsToTxn@1', `FindCoordinator(${TXN_ID})->2`, 'AddPartitionsToTxn@2', 'Produce@2', 'EndTxn@2']);
  });

  it('a commit retried after the coordinator moved goes to the new one', async () => {
    const { kafka, calls, state } = fakeKafka();
    const p = producer(kafka);
    await p.connect();
    await p.send([message(0)]);
    state.coordinator = 2;
    calls.length = 0;
    await expect(p.commit()).rejects.toThrow(/did not process the commit/);
    await p.commit();
    expect(calls).toEqual(['EndTxn@1', `FindCoordinator(${TXN_ID})->2`, 'EndTxn@2']);
  });

  it('initialising again after a move asks for the new one (kafkajs retries InitProducerId through it)', async () => {
    const { kafka, calls, state } = fakeKafka();
    const p = producer(kafka);
    await p.connect();
    state.coordinator = 2;
    calls.length = 0;
    await p.connect(); // initialises the transactional id again, as a replaced producer does
    expect(calls).toEqual(['InitProducerId@1', `FindCoordinator(${TXN_ID})->2`, 'InitProducerId@2']);
  });
});

import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { createKafka, KafkaEventLog } from '../src';
import { testConnection, useTestTopics } from '../../../test/helpers/kafka';

/* KafkaEventLog beyond the shared EventLog contract (test/contract): what it does with events it cannot read and listeners that fail. */

const kafka = useTestTopics();
const logs: KafkaEventLog[] = [];

afterEach(async () => {
  for (const log of logs.splice(0)) await log.close().catch(() => undefined);
});

const event = (seq: number, schema_version: number = EVENT_SCHEMA_VERSION): DatasetEvent =>
  ({ type: 'RecordsAppended', schema_version, account: 'acct', dataset: 'ds', incarnation: 'inc', at: seq, records: [{ seq }], delete_by: null }) as DatasetEvent;

function newLog(topic: string): KafkaEventLog {
  const log = new KafkaEventLog({ connection: testConnection(), topic, partitions: 2, lingerMs: 1 });
  logs.push(log);
  return log;
}

async function newTopic(): Promise<string> {
  return kafka.create('pushbase-event-log', 2);
}

describe('KafkaEventLog against Kafka', () => {
  it('refuses to start on a topic holding an event it cannot read, after delivering the ones before it', async () => {
    const topic = await newTopic();
    const writer = newLog(topic);
    await writer.start(() => undefined);
    await writer.append([event(0)]);
    await writer.close();
    const producer = createKafka(testConnection()).producer({ allowAutoTopicCreation: false });
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: [{ key: 'acct/ds', value: JSON.stringify(event(1, EVENT_SCHEMA_VERSION + 1)) }] });
    await producer.disconnect();

    const seen: number[] = [];
    const reader = newLog(topic);
    await expect(reader.start((events) => seen.push(...events.map((e) => e.at)))).rejects.toThrow(
      new RegExp(`reader stopped: Event at ${topic}/\\d@\\d+ cannot be read: the event has schema_version ${EVENT_SCHEMA_VERSION + 1}`),
    );
    expect(seen).toEqual([0]);
    await expect(reader.append([event(2)])).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('rejects an append whose listener throws with that error, not as unavailable: the event is stored', async () => {
    const topic = await newTopic();
    const log = newLog(topic);
    await log.start((events) => {
      if (events.some((e) => e.at === 1)) throw new Error('the fold refused it');
    });
    await log.append([event(0)]);
    await expect(log.append([event(1)])).rejects.toThrow('the fold refused it');
    await log.append([event(2)]);
    await log.close();

    const seen: number[] = [];
    const again = newLog(topic);
    await again.start((events) => seen.push(...events.map((e) => e.at)));
    expect(seen).toEqual([0, 1, 2]);
  });
});

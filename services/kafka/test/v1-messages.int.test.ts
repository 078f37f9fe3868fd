import { readFileSync } from 'node:fs';
import path from 'node:path';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { createKafka, KafkaEventLog } from '../src';
import { testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * A topic written by the release before the positional event encoding (commit c5d8818; fixtures/README.md)
 * keeps being read after it: its messages, produced byte for byte as that release's appender sent them, are
 * read through the consumer every Kafka reader shares (the EventLog's reader here; the projector and replay
 * use the same KafkaEventConsumer and decodeMessage) as the events that release decided, and the events
 * this release writes after them are read back beside them.
 */

interface Fixture {
  readonly events: DatasetEvent[];
  readonly messages: { key: string; value: string; headers?: Record<string, string> }[];
}
const fixture = JSON.parse(readFileSync(path.join(__dirname, 'fixtures', 'v1-messages.json'), 'utf8')) as Fixture;
/** The same events as this release holds them in memory. */
const expected = fixture.events.map((e) => ({ ...e, schema_version: EVENT_SCHEMA_VERSION }));

const kafka = useTestTopics();
const logs: KafkaEventLog[] = [];

afterEach(async () => {
  for (const log of logs.splice(0)) await log.close().catch(() => undefined);
});

function newLog(topic: string): KafkaEventLog {
  const log = new KafkaEventLog({ connection: testConnection(), topic, partitions: 2, lingerMs: 1 });
  logs.push(log);
  return log;
}

describe('a topic written before the positional encoding (schema_version 1 messages)', () => {
  it('reads as the events that release decided, and goes on with the events written after the upgrade', async () => {
    expect(fixture.messages.every((m) => (JSON.parse(m.value) as { schema_version: number }).schema_version === 1)).toBe(true);
    const topic = await kafka.create('pushbase-v1-messages', 2);
    const producer = createKafka(testConnection()).producer({ allowAutoTopicCreation: false, idempotent: true });
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: fixture.messages.map((m) => ({ key: m.key, value: m.value, ...(m.headers ? { headers: m.headers } : {}) })) });
    await producer.disconnect();

    const appends: DatasetEvent[][] = [];
    const log = newLog(topic);
    await log.start((events) => appends.push([...events]));
    expect(appends.flat()).toEqual(expected);
    // The two-event append of the old release still reaches the listener whole.
    expect(appends.map((a) => a.length)).toEqual(fixture.messages.flatMap((m) => (m.headers === undefined ? [1] : m.headers['pushbase-append'] === '0/2' ? [2] : [])));

    const [, appended] = expected as [DatasetEvent, DatasetEvent & { type: 'RecordsAppended' }];
    const later: DatasetEvent = { ...appended, at: appended.at + 1000, records: [{ ...appended.records[0]!, name: 'after the upgrade' }] };
    await log.append([later]);
    await log.close();

    const again: DatasetEvent[] = [];
    const reader = newLog(topic);
    await reader.start((events) => again.push(...events));
    expect(again).toEqual([...expected, later]);
  });
});

import { streamKey } from '@pushbase/domain';
import { createKafka, partitionerFor, ProjectionProgress } from '../src';
import { testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * How far the projector has read, on the shared Kafka: the end of a dataset's partition is read once, and
 * an attempt is settled once the group's committed offset passes THAT end, while other accounts keep
 * writing to the same partition (its end never stands still for a later lookup to be reached).
 */

const kafka = useTestTopics();

test('a kept end is reached under steady writes of another account to the same partition', async () => {
  const topic = await kafka.create('pushbase-progress', 1);
  const group = kafka.group('pushbase-progress-group');
  const producer = createKafka(testConnection()).producer();
  await producer.connect();
  let now = 0;
  const progress = new ProjectionProgress(createKafka(testConnection()), topic, group, { now: () => now });
  const commit = async (offset: number) => {
    await kafka.admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: String(offset) }] });
    now += 1_000; // past the committed offsets' cache
  };
  const hwm = async () => Number((await kafka.admin.fetchTopicOffsets(topic))[0]!.offset);
  let writing = true;
  const writer = (async () => {
    while (writing) {
      await producer.send({ topic, messages: [{ key: streamKey('globex', 'busy'), value: '{}' }] });
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  try {
    await producer.send({ topic, messages: [{ key: streamKey('acme', 'd'), value: '{}' }] });
    const end = await progress.end('acme', 'd');
    expect(end.partition).toBe(partitionerFor(1)(streamKey('acme', 'd')));
    expect(end.offset).toBeGreaterThan(0);
    await commit(end.offset - 1);
    expect(await progress.projected(end)).toBe(false);
    // The projector keeps up but always trails the moving end: the partition is never idle.
    const trailing = (await hwm()) - 1;
    expect(trailing).toBeGreaterThanOrEqual(end.offset);
    await commit(trailing);
    expect(await progress.projected(end)).toBe(true);
    expect(await progress.projected({ partition: end.partition, offset: (await hwm()) + 1_000 })).toBe(false);
  } finally {
    writing = false;
    await writer;
    await producer.disconnect();
    await progress.close();
  }
});

test('answers the committed offsets from one lookup for a moment, then asks again', async () => {
  const topic = await kafka.create('pushbase-progress', 1);
  const group = kafka.group('pushbase-progress-group');
  let now = 0;
  const progress = new ProjectionProgress(createKafka(testConnection()), topic, group, { now: () => now });
  try {
    await kafka.admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '5' }] });
    expect(await progress.projected({ partition: 0, offset: 6 })).toBe(false);
    await kafka.admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '6' }] });
    expect(await progress.projected({ partition: 0, offset: 6 })).toBe(false); // the cached lookup
    now += 1_000;
    expect(await progress.projected({ partition: 0, offset: 6 })).toBe(true);
  } finally {
    await progress.close();
  }
});

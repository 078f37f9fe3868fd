import { ConfigResourceTypes } from 'kafkajs';
import { DEFAULT_MAX_MESSAGE_BYTES, ensureTopic } from '../src';
import { useTestTopics } from '../../../test/helpers/kafka';

const kafka = useTestTopics();

const name = (): string => kafka.name('pushbase-topic');

async function configOf(topic: string): Promise<Record<string, string>> {
  const described = await kafka.admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['cleanup.policy', 'retention.ms', 'retention.bytes', 'max.message.bytes'] }],
  });
  return Object.fromEntries(described.resources[0]!.configEntries.map((e) => [e.configName, e.configValue]));
}

describe('ensureTopic against Kafka', () => {
  it('creates a missing topic that keeps every event, and leaves it as it is the second time', async () => {
    const topic = name();
    expect(await ensureTopic(kafka.admin, { topic, partitions: 3 })).toEqual({ created: true, partitions: 3, notes: [] });
    expect(await configOf(topic)).toEqual({
      'cleanup.policy': 'delete',
      'retention.ms': '-1',
      'retention.bytes': '-1',
      'max.message.bytes': String(DEFAULT_MAX_MESSAGE_BYTES),
    });
    // Ready at once: every partition answers an offset request.
    expect((await kafka.admin.fetchTopicOffsets(topic)).map((p) => p.high)).toEqual(['0', '0', '0']);
    expect(await ensureTopic(kafka.admin, { topic, partitions: 3 })).toEqual({ created: false, partitions: 3, notes: [] });
  });

  it('leaves an existing topic with fewer partitions and other settings alone, and says what differs', async () => {
    const topic = name();
    await kafka.admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 2,
          replicationFactor: 1,
          configEntries: [
            { name: 'cleanup.policy', value: 'compact' },
            { name: 'retention.ms', value: '86400000' },
            { name: 'max.message.bytes', value: '1048588' },
          ],
        },
      ],
    });
    const ensured = await ensureTopic(kafka.admin, { topic, partitions: 6 });
    expect(ensured.created).toBe(false);
    expect(ensured.partitions).toBe(2);
    expect(ensured.notes).toEqual([
      expect.stringContaining('has 2 partitions, fewer than the 6 configured; left as it is'),
      expect.stringContaining('is compacted (cleanup.policy=compact)'),
      expect.stringContaining('retention.ms=86400000'),
      expect.stringContaining('max.message.bytes=1048588'),
    ]);
    const metadata = await kafka.admin.fetchTopicMetadata({ topics: [topic] });
    expect(metadata.topics[0]!.partitions).toHaveLength(2);
    expect((await configOf(topic))['cleanup.policy']).toBe('compact');
  });
});

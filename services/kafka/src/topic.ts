import { ConfigResourceTypes, type Admin } from 'kafkajs';

/*
 * The topic of dataset events. The log is the source of truth (ARCHITECTURE "Events": the log alone rebuilds
 * every dataset), so the topic keeps everything: no time or size retention, and never log compaction, which
 * would keep only the last event of each dataset.
 */

/** The largest event message the topic takes: a 4 MiB request body becomes one event of about that size. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface TopicSpec {
  readonly topic: string;
  /** Partitions of a new topic. One dataset lives in one partition; more partitions, more parallel readers. */
  readonly partitions: number;
  /** Default 1 (one broker). A cluster wants 3. */
  readonly replicationFactor?: number;
  /** max.message.bytes of a new topic (it bounds a record batch, i.e. one produce request's messages for one partition). */
  readonly maxMessageBytes?: number;
}

export interface EnsuredTopic {
  readonly created: boolean;
  /** The topic's partition count, as it is now. */
  readonly partitions: number;
  /**
   * Where an existing topic differs from the spec. It is left alone — changing the partition count of a live
   * topic moves datasets between partitions and breaks their order — and the caller reports these.
   */
  readonly notes: readonly string[];
}

/** Creates the topic when it is missing; checks an existing one and reports (never changes) what differs. */
export async function ensureTopic(admin: Admin, spec: TopicSpec): Promise<EnsuredTopic> {
  if (!Number.isInteger(spec.partitions) || spec.partitions < 1) throw new Error(`Topic ${spec.topic}: partitions must be a positive integer`);
  const replicationFactor = spec.replicationFactor ?? 1;
  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [
      {
        topic: spec.topic,
        numPartitions: spec.partitions,
        replicationFactor,
        configEntries: [
          { name: 'cleanup.policy', value: 'delete' },
          { name: 'retention.ms', value: '-1' },
          { name: 'retention.bytes', value: '-1' },
          { name: 'max.message.bytes', value: String(spec.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES) },
          // acks=all means "every in-sync replica"; with 3 replicas, at least 2 must be in sync to accept a write.
          { name: 'min.insync.replicas', value: String(Math.min(2, replicationFactor)) },
        ],
      },
    ],
  });
  if (created) await untilLeadersServe(admin, spec.topic);
  const metadata = await admin.fetchTopicMetadata({ topics: [spec.topic] });
  const partitions = metadata.topics.find((t) => t.name === spec.topic)?.partitions.length ?? 0;
  if (created) return { created, partitions, notes: [] };

  const notes: string[] = [];
  if (partitions < spec.partitions) {
    notes.push(`topic ${spec.topic} has ${partitions} partitions, fewer than the ${spec.partitions} configured; left as it is`);
  }
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: spec.topic, configNames: ['cleanup.policy', 'retention.ms', 'retention.bytes'] }],
  });
  const config = new Map((described.resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
  if ((config.get('cleanup.policy') ?? 'delete').split(',').includes('compact')) {
    notes.push(`topic ${spec.topic} is compacted (cleanup.policy=${config.get('cleanup.policy')}): compaction drops all but the last event of each dataset`);
  }
  for (const name of ['retention.ms', 'retention.bytes']) {
    const value = config.get(name);
    if (value !== undefined && value !== '-1') notes.push(`topic ${spec.topic} has ${name}=${value}: events older than that are deleted, and the log no longer rebuilds every dataset`);
  }
  return { created, partitions, notes };
}

/**
 * createTopics' waitForLeaders returns once the controller elected leaders, and a broker can still answer
 * NOT_LEADER for a moment after; a topic is ready once every partition answers an offset request.
 */
async function untilLeadersServe(admin: Admin, topic: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let wait = 50; ; wait = Math.min(wait * 2, 1000)) {
    try {
      await admin.fetchTopicOffsets(topic);
      return;
    } catch (err) {
      if (Date.now() + wait > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

import type { Kafka } from 'kafkajs';

/*
 * The end offsets of a topic's partitions INCLUDING the events of transactions that are committed but whose
 * commit markers are not written yet (the high watermarks: ListOffsets under read_uncommitted).
 *
 * Why not admin.fetchTopicOffsets: it asks under read_committed and so answers the last stable offset, and
 * a writer's transaction commit is acknowledged once the coordinator has logged it, before the markers
 * reach the partitions. Right after a 2xx the last stable offset can still be before the acknowledged
 * event, and "the projector has reached the end" would hold before the event is projected. kafkajs's admin
 * has no isolation option, so this builds a cluster client of kafkajs's own with read_uncommitted through
 * the one (symbol-keyed, private) factory the Kafka object holds. Test code only: if a kafkajs upgrade
 * moves it, this fails loudly, never silently.
 */

const READ_UNCOMMITTED = 0;

interface ClusterClient {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number }[];
  fetchTopicsOffset(topics: { topic: string; fromBeginning: boolean; partitions: { partition: number }[] }[]): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
}

export class HighWatermarks {
  private readonly cluster: ClusterClient;
  private connected: Promise<void> | undefined;

  constructor(kafka: Kafka) {
    const factory = Object.getOwnPropertySymbols(kafka).find((s) => s.description === 'private:Kafka:createCluster');
    if (factory === undefined) throw new Error('kafkajs no longer has its private cluster factory: update test/helpers/high-watermarks.ts');
    const create = (kafka as unknown as Record<symbol, (o: { isolationLevel: number }) => ClusterClient>)[factory]!;
    this.cluster = create.call(kafka, { isolationLevel: READ_UNCOMMITTED });
  }

  /** partition → high watermark (the offset after the last message written, markers excluded until written). */
  async of(topic: string): Promise<Map<number, number>> {
    await (this.connected ??= this.cluster.connect());
    await this.cluster.addTargetTopic(topic);
    await this.cluster.refreshMetadataIfNecessary();
    const partitions = this.cluster.findTopicPartitionMetadata(topic).map((p) => ({ partition: p.partitionId }));
    const [offsets] = await this.cluster.fetchTopicsOffset([{ topic, fromBeginning: false, partitions }]);
    return new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  }

  async close(): Promise<void> {
    if (this.connected !== undefined) await this.cluster.disconnect();
  }
}

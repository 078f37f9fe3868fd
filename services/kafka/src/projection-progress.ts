import type { Admin, Kafka } from 'kafkajs';
import { DomainError, streamKey } from '@pushbase/domain';
import { fetchGroupOffsets } from './group-offsets';
import { partitionerFor } from './messages';

/*
 * How far the projector has folded a dataset's stream into Redis: its group's committed offset against
 * the end of the dataset's partition. An Idempotency-Key attempt whose outcome is unknown is settled only
 * once this holds (services/redis/src/idempotency.ts): the projector records every key it folds, so the
 * key's record is then there exactly when its event was stored.
 *
 * The end is the last stable offset (kafkajs's admin reads committed): a transaction of the schema service
 * still open in the partition holds it back, and the projector cannot read past one either. The caller's
 * lease outlasts the transaction timeout, so an event written before the lease ended is below it.
 */
export class ProjectionProgress {
  private admin: Promise<Admin> | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly group: string,
  ) {}

  /** Whether the projector's committed offset has reached the end of the partition holding `account/dataset`. */
  async projected(account: string, dataset: string): Promise<boolean> {
    try {
      const admin = await this.connected();
      const ends = await admin.fetchTopicOffsets(this.topic);
      const partition = partitionerFor(ends.length)(streamKey(account, dataset));
      const end = Number(ends.find((p) => p.partition === partition)?.offset ?? '0');
      if (end <= 0) return true;
      return ((await fetchGroupOffsets(admin, this.group, this.topic)).get(partition) ?? -1) >= end;
    } catch (e) {
      // Nothing of the request was done yet: a retry is safe.
      this.admin = undefined;
      throw new DomainError('unavailable', `Kafka could not tell how far the projector has read (${e instanceof Error ? e.message : String(e)})`);
    }
  }

  async close(): Promise<void> {
    const admin = await this.admin?.catch(() => undefined);
    this.admin = undefined;
    await admin?.disconnect();
  }

  private connected(): Promise<Admin> {
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })();
    return this.admin;
  }
}

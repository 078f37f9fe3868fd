import { decideDefine, decideDelete, type DatasetEvent, type DatasetSummary } from '@pushbase/domain';
import { RedisSchemaStore } from '@pushbase/redis';
import type { Admin } from 'kafkajs';
import type { Redis } from 'ioredis';
import { readConsumed } from '../../../test/helpers/kafka';

/**
 * What the schema service does to the store when it creates or deletes a dataset (decide, then apply the
 * event to Redis), without Kafka: the records service only reads the store.
 */
export class SchemaFixture {
  private readonly store: RedisSchemaStore;

  constructor(redis: Redis, prefix: string) {
    this.store = new RedisSchemaStore(redis, { prefix });
  }

  async create(account: string, id: string, fields: Record<string, unknown>, incarnation: string): Promise<DatasetSummary> {
    const decision = decideDefine({ account, id, body: { fields }, at: Date.now(), newIncarnation: incarnation }, await this.store.get(account, id), await this.store.count(account));
    if (decision.outcome !== 'created') throw new Error(`${id} exists`);
    await this.store.apply([decision.event]);
    return decision.dataset;
  }

  async delete(account: string, id: string): Promise<void> {
    await this.store.apply([decideDelete({ account, id, at: Date.now() }, await this.store.get(account, id))]);
  }
}

export { readConsumed };

/** Every committed event of `topic` (readConsumed without the positions). */
export const readTopic = async (admin: Admin, topic: string): Promise<DatasetEvent[]> => (await readConsumed(admin, topic)).map((e) => e.event);

export const body = (data: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify({ data }));

/** A rejection's domain code, or 'ok'. */
export async function outcomeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
}

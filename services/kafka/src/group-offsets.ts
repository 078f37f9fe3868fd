import type { Admin } from 'kafkajs';
import { setTimeout as sleep } from 'node:timers/promises';

/*
 * A group's committed offsets, asked of its coordinator. kafkajs's admin.fetchOffsets finds the coordinator
 * but does not retry the coordinator's own refusals: on a broker whose __consumer_offsets topic is being
 * created (the first group a new cluster sees) or moved, it throws NOT_COORDINATOR or
 * COORDINATOR_LOAD_IN_PROGRESS, errors kafkajs marks retriable. Seen on a fresh Kafka 4.4 broker at the
 * projector's first start. So those are tried again, a bounded number of times.
 */

const ATTEMPTS = 8;

/** Per partition of `topic`, the group's committed offset (the next to read); -1 where none is committed. */
export async function fetchGroupOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, number>> {
  for (let attempt = 1; ; attempt++) {
    try {
      const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    } catch (e) {
      const retriable = typeof e === 'object' && e !== null && (e as { retriable?: unknown }).retriable === true;
      if (!retriable || attempt >= ATTEMPTS) throw e;
      await sleep(Math.min(100 * 2 ** attempt, 2000));
    }
  }
}

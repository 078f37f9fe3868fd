/*
 * ProjectionProgress's handling of its admin client (projection-progress.ts); what it answers against a
 * real broker is in projection-progress.int.test.ts.
 */
import type { Kafka } from 'kafkajs';
import { ProjectionProgress } from '../src/projection-progress';

/** A Kafka whose admin clients each fail their first lookup, counting connects and disconnects. */
function flakyKafka(): { kafka: Kafka; connected: () => number; disconnected: () => number } {
  let connected = 0;
  let disconnected = 0;
  let failed = false;
  const kafka = {
    admin: () => ({
      connect: () => {
        connected++;
        return Promise.resolve();
      },
      disconnect: () => {
        disconnected++;
        return Promise.resolve();
      },
      fetchTopicOffsets: () => {
        if (!failed) {
          failed = true;
          return Promise.reject(new Error('broker gone'));
        }
        return Promise.resolve([{ partition: 0, offset: '7', high: '7', low: '0' }]);
      },
    }),
  } as unknown as Kafka;
  return { kafka, connected: () => connected, disconnected: () => disconnected };
}

it('lets go of an admin client whose lookup failed, and asks again on a new one', async () => {
  const k = flakyKafka();
  const progress = new ProjectionProgress(k.kafka, 'topic', 'group');
  await expect(progress.end('acct', 'ds')).rejects.toMatchObject({ code: 'unavailable' });
  await new Promise((r) => setImmediate(r));
  expect(k.disconnected()).toBe(1);
  await expect(progress.end('acct', 'ds')).resolves.toEqual({ partition: 0, offset: 7 });
  expect(k.connected()).toBe(2);
  await progress.close();
  expect(k.disconnected()).toBe(2);
});

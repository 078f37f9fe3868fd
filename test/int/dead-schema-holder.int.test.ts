import { randomBytes } from 'node:crypto';
import { pushbaseServices } from '@pushbase/contracts';
import { fold } from '@pushbase/domain';
import { connectRecordService, connectSchemaService } from '@pushbase/grpc';
import { ensureTopic, KafkaEventAppender } from '@pushbase/kafka';
import { createRecordsServer } from '@pushbase/records';
import { openRedis, RedisSchemaStore, schemaIntentKey, type Redis } from '@pushbase/redis';
import { createSchemaServer } from '@pushbase/schema';
import type { Admin } from 'kafkajs';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from '../helpers/redis';
import { deleteTopics, randomName, requireKafka, testAdmin, testConnection } from '../helpers/kafka';
import { body, outcomeOf, readTopic } from '../../services/records/test/support';
import { eventually } from '../helpers/eventually';

/*
 * The window a dead schema holder leaves, across the two services that read the schema store without the
 * account's lease: a schema service dies after Kafka committed its DatasetDeleted and before Redis heard
 * of it, keeping the account's lease (short here: 1.5 s; 60 s by default). Until the next holder rolls the
 * intent forward, Redis still shows the dataset. Real Kafka and Redis, a topic and key prefix of its own.
 */

const protos = pushbaseServices();
const LEASE = { ttlMs: 1500, waitMs: 30_000 };
let admin: Admin;
let redis: Redis;
let topic: string;
let prefix: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  await requireKafka();
  admin = await testAdmin();
  redis = await connectTestRedis();
  topic = randomName('pushbase-dead-holder');
  await ensureTopic(admin, { topic, partitions: 3 });
  prefix = randomPrefix();
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await deleteUnder(redis, prefix);
  await deleteTopics(admin, [topic]);
  await admin.disconnect();
  redis.disconnect();
});

/** A schema or records service with its own Redis connection and Kafka producer, as a process has. */
async function ownConnections(name: string): Promise<{ redis: Redis; appender: KafkaEventAppender }> {
  const own = await openRedis(redisUrl(), { failFast: true });
  const appender = new KafkaEventAppender({ connection: testConnection(), topic, transactionalId: randomName(name), appendTimeoutMs: 10_000 });
  closers.push(async () => {
    await appender.close();
    own.disconnect();
  });
  return { redis: own, appender };
}

async function schemaReplica(afterAppend?: () => Promise<void>) {
  const { redis: own, appender } = await ownConnections('pushbase-dead-holder-schema');
  const server = createSchemaServer({ redis: own, prefix, appender, lock: LEASE, log: () => undefined, protos, ...(afterAppend === undefined ? {} : { afterAppend }) });
  const client = connectSchemaService(`127.0.0.1:${await server.grpc.listen('127.0.0.1', 0)}`, { protos });
  closers.push(async () => {
    client.close();
    await server.grpc.shutdown(1000);
  });
  return client;
}

async function recordsService() {
  const { redis: own, appender } = await ownConnections('pushbase-dead-holder-records');
  const server = createRecordsServer({ redis: own, prefix, appender, log: () => undefined, protos });
  const client = connectRecordService(`127.0.0.1:${await server.grpc.listen('127.0.0.1', 0)}`, { protos });
  closers.push(async () => {
    client.close();
    await server.grpc.shutdown(1000);
  });
  return client;
}

const fields = { fields: { n: { type: 'number', name: 'N' } } };

it('refuses writes to the deleted dataset (503, none sent), takes writes to the others, never finds it from the stale store, and ends as the fold of the topic', async () => {
  const account = `acct:${randomBytes(4).toString('hex')}`;
  const store = new RedisSchemaStore(redis, { prefix });
  const live = await schemaReplica();
  const records = await recordsService();
  const x = await live.findOrCreate({ account, id: 'x', body: fields });
  await live.findOrCreate({ account, id: 'y', body: fields });
  await records.append({ account, id: 'x', json: body([{ n: 1 }]) });
  await records.append({ account, id: 'y', json: body([{ n: 1 }]) });

  let died!: () => void;
  const dead = new Promise<void>((resolve) => (died = resolve));
  let committed = false;
  const dying = await schemaReplica(async () => {
    committed = true;
    await dead; // never again heard of while the test looks; released at the end, it finishes harmlessly
  });
  const zombie = dying.delete({ account, id: 'x' });
  await eventually(() => committed, { what: 'the deletion committed to Kafka' });
  expect((await store.head(account, 'x'))?.incarnation).toBe(x.dataset.incarnation);

  const writes = await Promise.all(
    [1, 2, 3].flatMap((i) => [outcomeOf(records.append({ account, id: 'x', json: body([{ n: 10 + i }]) })), outcomeOf(records.append({ account, id: 'y', json: body([{ n: 10 + i }]) }))]),
  );
  expect(writes).toEqual(['unavailable', 'ok', 'unavailable', 'ok', 'unavailable', 'ok']);
  expect(await redis.exists(schemaIntentKey(prefix, account))).toBe(1); // the writes did not wait for a roll-forward

  // Find-or-create of x waits for the dead holder's lease, rolls its deletion forward, and creates x anew.
  const again = await live.findOrCreate({ account, id: 'x', body: fields });
  expect(again).toMatchObject({ created: true });
  expect(again.dataset.incarnation).not.toBe(x.dataset.incarnation);
  expect(await redis.exists(schemaIntentKey(prefix, account))).toBe(0);
  await records.append({ account, id: 'x', json: body([{ n: 20 }]) });

  died();
  await zombie;
  const events = await readTopic(admin, topic);
  // None of the refused writes was sent: x's writes are the one before the deletion and the one after.
  expect(events.filter((e) => e.dataset === 'x' && e.type === 'RecordsAppended').map((e) => [e.incarnation, 'records' in e ? e.records : []])).toEqual([
    [x.dataset.incarnation, [{ n: 1 }]],
    [again.dataset.incarnation, [{ n: 20 }]],
  ]);
  const state = fold(events).get(account);
  const recordsIn = (id: string) => [...(state?.get(id)?.rows.values() ?? [])].map((r) => (r as { n: number }).n).sort((a, b) => a - b);
  expect(state?.get('x')?.incarnation).toBe(again.dataset.incarnation);
  expect(recordsIn('x')).toEqual([20]);
  expect(recordsIn('y')).toEqual([1, 11, 12, 13]);
  // The store the services answer from is the fold's.
  for (const id of ['x', 'y']) expect((await store.get(account, id))?.incarnation).toBe(state?.get(id)?.incarnation);
  expect(await store.count(account)).toBe(state?.size);
});

import { createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { pushbaseServices, type RecordService } from '@pushbase/contracts';
import { connectRecordService, type Closable } from '@pushbase/grpc';
import { ensureTopic, KafkaEventAppender } from '@pushbase/kafka';
import { openRedis, type Redis } from '@pushbase/redis';
import type { Admin } from 'kafkajs';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from '../../../test/helpers/redis';
import { deleteTopics, randomName, requireKafka, testAdmin, testConnection } from '../../../test/helpers/kafka';
import { createRecordsServer, type RecordsServer } from '../src';
import { body, outcomeOf, readTopic, SchemaFixture } from './support';

/*
 * The records service in this process behind its gRPC server, called through the gRPC client adapter, on a
 * random topic and Redis prefix of the shared servers: writes land in the topic as one event each, the
 * schema cache never validates against a deleted incarnation, and an unreachable Kafka or Redis is a 503.
 */

const protos = pushbaseServices();
let admin: Admin;
let redis: Redis;
const topics: string[] = [];
const prefixes: string[] = [];
const services: Running[] = [];

beforeAll(async () => {
  await requireKafka();
  admin = await testAdmin();
  redis = await connectTestRedis();
});
afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
});
afterAll(async () => {
  for (const p of prefixes) await deleteUnder(redis, p);
  await deleteTopics(admin, topics);
  await admin.disconnect();
  redis.disconnect();
});

interface Running {
  readonly client: RecordService & Closable;
  readonly server: RecordsServer;
  readonly redis: Redis;
  close(): Promise<void>;
}

async function startService(topic: string, prefix: string, brokers?: readonly string[]): Promise<Running> {
  const own = await openRedis(redisUrl(), { failFast: true });
  const appender = new KafkaEventAppender({
    connection: testConnection({ ...(brokers === undefined ? {} : { brokers }), retry: { retries: 5, initialRetryTimeMs: 100, maxRetryTimeMs: 1000 } }),
    topic,
    transactionalId: randomName('pushbase-records-test'),
    appendTimeoutMs: 20_000,
  });
  const server = createRecordsServer({ redis: own, prefix, appender, log: () => undefined, protos });
  const port = await server.grpc.listen('127.0.0.1', 0);
  const client = connectRecordService(`127.0.0.1:${port}`, { protos });
  const running: Running = {
    client,
    server,
    redis: own,
    close: async () => {
      client.close();
      await server.grpc.shutdown(1000);
      await appender.close();
      own.disconnect();
    },
  };
  services.push(running);
  return running;
}

async function setUp(): Promise<{ topic: string; prefix: string; account: string; schema: SchemaFixture }> {
  const topic = randomName('pushbase-records');
  topics.push(topic);
  await ensureTopic(admin, { topic, partitions: 3 });
  const prefix = randomPrefix();
  prefixes.push(prefix);
  return { topic, prefix, account: `acct-${randomBytes(4).toString('hex')}`, schema: new SchemaFixture(redis, prefix) };
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const AMOUNT = { amount: { type: 'number', name: 'Amount' } };
const LABEL = { label: { type: 'string', name: 'Label' } };

describe('pushbase records over gRPC (real Kafka and Redis)', () => {
  it('writes one event per append and replace to the topic, answering only once committed', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'sales', AMOUNT, 'inc-1');
    const { client } = await startService(topic, prefix);
    await client.append({ account, id: 'sales', json: body([{ amount: 1 }, { amount: 2 }]) });
    await client.replace({ account, id: 'sales', json: body([{ amount: 3 }]) });
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.append({ account, id: 'sales', json: body([{ amount: 10 + i }]) })));
    await expect(client.append({ account, id: 'sales', json: body([{ amount: 'x' }]) })).rejects.toMatchObject({ code: 'invalid' });
    await expect(client.append({ account, id: 'nope', json: body([{ amount: 1 }]) })).rejects.toMatchObject({ code: 'not_found' });

    const events = await readTopic(admin, topic);
    expect(events.map((e) => e.type)).toEqual(['RecordsAppended', 'RecordsReplaced', ...Array<string>(20).fill('RecordsAppended')]);
    expect(events.every((e) => e.account === account && e.dataset === 'sales' && e.incarnation === 'inc-1')).toBe(true);
    expect(events.slice(0, 2).map((e) => ('records' in e ? e.records : undefined))).toEqual([[{ amount: 1 }, { amount: 2 }], [{ amount: 3 }]]);
    expect(
      events
        .slice(2)
        .map((e) => ('records' in e ? (e.records[0] as { amount: number }).amount : -1))
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 20 }, (_, i) => 10 + i));
  });

  it('validates against the live incarnation after a delete and re-create, never a cached older one', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'ds', AMOUNT, 'inc-a');
    const { client, server } = await startService(topic, prefix);
    await client.append({ account, id: 'ds', json: body([{ amount: 1 }]) });
    await client.append({ account, id: 'ds', json: body([{ amount: 2 }]) });
    expect(server.schemas.stats()).toMatchObject({ misses: 1, hits: 1 }); // the definition is cached

    // Between two writes, the dataset is deleted and created again with another definition.
    await schema.delete(account, 'ds');
    await schema.create(account, 'ds', LABEL, 'inc-b');
    // Valid only under the new definition: a cache serving inc-a would refuse it as invalid...
    await client.append({ account, id: 'ds', json: body([{ label: 'x' }]) });
    // ...and accept this one, which the fold would then drop (inc-a is dead): acknowledged, never applied.
    await expect(client.append({ account, id: 'ds', json: body([{ amount: 3 }]) })).rejects.toMatchObject({ code: 'invalid' });
    expect(server.schemas.stats()).toMatchObject({ misses: 2 });

    // Deleted: not found at once, cached definition or not.
    await schema.delete(account, 'ds');
    await expect(client.append({ account, id: 'ds', json: body([{ label: 'y' }]) })).rejects.toMatchObject({ code: 'not_found' });

    const events = await readTopic(admin, topic);
    expect(events.map((e) => [e.incarnation, 'records' in e ? e.records : []])).toEqual([
      ['inc-a', [{ amount: 1 }]],
      ['inc-a', [{ amount: 2 }]],
      ['inc-b', [{ label: 'x' }]],
    ]);
  });

  it('answers unavailable within seconds when Kafka cannot be reached, and writes nothing', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'ds', AMOUNT, 'inc-1');
    const { client } = await startService(topic, prefix, [`127.0.0.1:${await closedPort()}`]);
    const started = Date.now();
    const outcomes = await Promise.all(Array.from({ length: 5 }, (_, i) => outcomeOf(client.append({ account, id: 'ds', json: body([{ amount: i }]) }))));
    expect(outcomes).toEqual(Array<string>(5).fill('unavailable'));
    expect(Date.now() - started).toBeLessThan(15_000);
    // A service on the real broker sees an empty topic: none of the refused writes went anywhere.
    expect(await readTopic(admin, topic)).toEqual([]);
  });

  it('answers unavailable when Redis cannot be reached (nothing validated, nothing sent)', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'ds', AMOUNT, 'inc-1');
    const service = await startService(topic, prefix);
    await service.client.append({ account, id: 'ds', json: body([{ amount: 1 }]) });
    service.redis.disconnect(); // its connection to Redis is gone (and, fail-fast, not waited for)
    await expect(service.client.append({ account, id: 'ds', json: body([{ amount: 2 }]) })).rejects.toMatchObject({ code: 'unavailable' });
    expect((await readTopic(admin, topic)).map((e) => ('records' in e ? e.records : []))).toEqual([[{ amount: 1 }]]);
  });
});

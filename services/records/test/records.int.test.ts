import { createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { pushbaseServices, type RecordService } from '@pushbase/contracts';
import { connectRecordService, type Closable } from '@pushbase/grpc';
import { KafkaEventAppender } from '@pushbase/kafka';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { encodeSchemaIntent, openRedis, RedisSchemaStore, schemaIntentKey, type Redis, type SchemaChangeEvent } from '@pushbase/redis';
import { redisUrl, useTestRedis } from '../../../test/helpers/redis';
import { randomName, testConnection, useTestTopics } from '../../../test/helpers/kafka';
import { createRecordsServer, type RecordsServer } from '../src';
import { body, outcomeOf, readTopic, SchemaFixture } from './support';

/*
 * The records service in this process behind its gRPC server, called through the gRPC client adapter, on a
 * random topic and Redis prefix of the shared servers: writes land in the topic as one event each, the
 * schema cache never validates against a deleted incarnation, and an unreachable Kafka or Redis is a 503.
 */

const protos = pushbaseServices();
const kafka = useTestTopics();
const db = useTestRedis();
const services: Running[] = [];

afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
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
    mode: 'idempotent',
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
  const topic = await kafka.create('pushbase-records', 3);
  const prefix = db.prefix();
  return { topic, prefix, account: `acct-${randomBytes(4).toString('hex')}`, schema: new SchemaFixture(db.redis, prefix) };
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

    const events = await readTopic(kafka.admin, topic);
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

    const events = await readTopic(kafka.admin, topic);
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
    expect(await readTopic(kafka.admin, topic)).toEqual([]);
  });

  it('answers unavailable when Redis cannot be reached (nothing validated, nothing sent)', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'ds', AMOUNT, 'inc-1');
    const service = await startService(topic, prefix);
    await service.client.append({ account, id: 'ds', json: body([{ amount: 1 }]) });
    service.redis.disconnect(); // its connection to Redis is gone (and, fail-fast, not waited for)
    await expect(service.client.append({ account, id: 'ds', json: body([{ amount: 2 }]) })).rejects.toMatchObject({ code: 'unavailable' });
    expect((await readTopic(kafka.admin, topic)).map((e) => ('records' in e ? e.records : []))).toEqual([[{ amount: 1 }]]);
  });
});

describe('pushbase records while a schema change is pending (its schema service died between Kafka and Redis)', () => {
  /**
   * What a schema service that died after Kafka committed `event` and before Redis was updated leaves:
   * the account's intent and the event in the topic (its lease, held by nobody alive, plays no part here).
   */
  async function leftBehind(topic: string, prefix: string, event: SchemaChangeEvent): Promise<string> {
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, transactionalId: randomName('pushbase-dead-schema') });
    try {
      await appender.append([event]);
    } finally {
      await appender.close();
    }
    const intent = encodeSchemaIntent({ token: 'dead-holder', event });
    await db.redis.set(schemaIntentKey(prefix, event.account), intent);
    return intent;
  }

  const deletion = (account: string, id: string, incarnation: string): SchemaChangeEvent => ({ type: 'DatasetDeleted', schema_version: EVENT_SCHEMA_VERSION, account, dataset: id, incarnation, at: Date.now() });
  // By dataset: the topic keeps order within a partition only, and two datasets may sit in two partitions.
  const recordsOf = (events: DatasetEvent[]): unknown[] =>
    events
      .filter((e) => e.type === 'RecordsAppended')
      .map((e) => [e.dataset, e.incarnation, 'records' in e ? e.records : []] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

  it('refuses (503) writes to the dataset whose deletion is pending, sends none of them, and takes writes to the account\'s other datasets', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'x', AMOUNT, 'inc-x');
    await schema.create(account, 'y', AMOUNT, 'inc-y');
    const { client } = await startService(topic, prefix);
    await client.append({ account, id: 'x', json: body([{ amount: 1 }]) }); // x's definition is cached: refused all the same
    await leftBehind(topic, prefix, deletion(account, 'x', 'inc-x'));
    expect(await new RedisSchemaStore(db.redis, { prefix }).head(account, 'x')).toMatchObject({ incarnation: 'inc-x' }); // stale

    const outcomes = await Promise.all([
      outcomeOf(client.append({ account, id: 'x', json: body([{ amount: 2 }]) })),
      outcomeOf(client.replace({ account, id: 'x', json: body([{ amount: 3 }]) })),
      outcomeOf(client.append({ account, id: 'y', json: body([{ amount: 4 }]) })),
    ]);
    expect(outcomes).toEqual(['unavailable', 'unavailable', 'ok']);

    // Only x's first write (before the deletion) and y's reached the topic, beside the dead holder's deletion.
    const events = await readTopic(kafka.admin, topic);
    expect(events.filter((e) => e.type !== 'RecordsAppended').map((e) => [e.type, e.dataset])).toEqual([['DatasetDeleted', 'x']]);
    expect(recordsOf(events)).toEqual([
      ['x', 'inc-x', [{ amount: 1 }]],
      ['y', 'inc-y', [{ amount: 4 }]],
    ]);

    // Rolled forward (the store shows the deletion, the intent is gone): x is not found, y still written.
    await schema.delete(account, 'x');
    await db.redis.del(schemaIntentKey(prefix, account));
    await expect(client.append({ account, id: 'x', json: body([{ amount: 5 }]) })).rejects.toMatchObject({ code: 'not_found' });
    await client.append({ account, id: 'y', json: body([{ amount: 6 }]) });
  });

  it('refuses (503, not 404) a write to a dataset whose re-creation is pending, and validates against the new incarnation once the store shows it', async () => {
    const { topic, prefix, account, schema } = await setUp();
    await schema.create(account, 'x', AMOUNT, 'inc-a');
    const { client } = await startService(topic, prefix);
    await client.append({ account, id: 'x', json: body([{ amount: 1 }]) });
    await schema.delete(account, 'x');
    const recreated: SchemaChangeEvent = {
      type: 'DatasetDefined',
      schema_version: EVENT_SCHEMA_VERSION,
      account,
      dataset: 'x',
      incarnation: 'inc-b',
      at: Date.now(),
      definition: { fields: { label: { type: 'string', name: 'Label', optional: false } }, unique_by: [] },
    };
    await leftBehind(topic, prefix, recreated);
    await expect(client.append({ account, id: 'x', json: body([{ label: 'early' }]) })).rejects.toMatchObject({ code: 'unavailable' });

    // The projector applied the definition from the log before anyone rolled the intent forward: the store
    // shows inc-b, so the intent changes nothing a write could see, and writes go to inc-b.
    await new RedisSchemaStore(db.redis, { prefix }).apply([recreated]);
    await client.append({ account, id: 'x', json: body([{ label: 'b' }]) });
    await expect(client.append({ account, id: 'x', json: body([{ amount: 2 }]) })).rejects.toMatchObject({ code: 'invalid' });
    expect(recordsOf(await readTopic(kafka.admin, topic))).toEqual([
      ['x', 'inc-a', [{ amount: 1 }]],
      ['x', 'inc-b', [{ label: 'b' }]],
    ]);
  });
});

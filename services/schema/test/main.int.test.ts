import { randomBytes } from 'node:crypto';
import { pushbaseServices } from '@pushbase/contracts';
import { connectSchemaService } from '@pushbase/grpc';
import { ensureTopic } from '@pushbase/kafka';
import type { Admin } from 'kafkajs';
import type { Redis } from 'ioredis';
import { healthClient } from '../../grpc/test/support';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from '../../../test/helpers/redis';
import { deleteTopics, KAFKA_BROKERS, randomName, requireKafka, testAdmin } from '../../../test/helpers/kafka';
import { loadSchemaConfig, runSchema } from '../src';
import { create, readTopic } from './support';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The composition root's shutdown: health turns NOT_SERVING, a call in flight is drained (answered) before
 * the service stops, the sweep, Kafka and Redis are closed.
 */

let admin: Admin;
let redis: Redis;
const topic = randomName('pushbase-schema-main');
const prefix = randomPrefix();

beforeAll(async () => {
  await requireKafka();
  admin = await testAdmin();
  redis = await connectTestRedis();
  await ensureTopic(admin, { topic, partitions: 1 });
});
afterAll(async () => {
  await deleteUnder(redis, prefix);
  await deleteTopics(admin, [topic]);
  await admin.disconnect();
  redis.disconnect();
});

it('stops gracefully: NOT_SERVING first, the call in flight answered, then closed', async () => {
  const config = loadSchemaConfig({
    PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
    PUSHBASE_KAFKA_TOPIC: topic,
    PUSHBASE_REDIS_URL: redisUrl(),
    PUSHBASE_REDIS_PREFIX: prefix,
    PUSHBASE_SHUTDOWN_TIMEOUT_MS: '20000',
  });
  const lines: { msg: string; grpc_port?: number }[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let inFlight = false;
  const running = await runSchema(config, {
    log: (_level, msg, fields = {}) => lines.push({ msg, ...fields }),
    afterAppend: async () => {
      inFlight = true;
      await held;
    },
  });
  expect(lines.find((l) => l.msg === 'listening')?.grpc_port).toBe(running.port);
  const address = `127.0.0.1:${running.port}`;
  const client = connectSchemaService(address, { protos: pushbaseServices() });
  const health = healthClient(address);
  try {
    await expect(health.check('')).resolves.toBe('SERVING');
    const watch = health.watch('pushbase.v1.SchemaService');
    const account = `acct-${randomBytes(4).toString('hex')}`;
    const call = create(client, account, 'drained');
    await eventually(() => inFlight, { what: 'the call to be in flight' });
    let stopped = false;
    const stopping = running.stop().then(() => (stopped = true));
    await eventually(() => watch.statuses.includes('NOT_SERVING'), { what: 'health NOT_SERVING' });
    // An open Watch stream never ends by itself and would hold the drain until the grace runs out.
    watch.cancel();
    expect(stopped).toBe(false);
    release();
    await expect(call).resolves.toMatchObject({ created: true });
    await stopping;
    // The change was completed, not cut short: Redis has it and no intent is left.
    expect(await redis.sismember(`${prefix}schema:live:${account}`, 'drained')).toBe(1);
    expect(await redis.exists(`${prefix}schema-intent:${account}`)).toBe(0);
    expect((await readTopic(topic)).map((e) => e.dataset)).toEqual(['drained']);
  } finally {
    release();
    health.close();
    client.close();
    await running.stop();
  }
});

it('with PUSHBASE_GRPC_DRAIN_MS: NOT_SERVING at once, calls still answered for the drain delay, then none', async () => {
  const DRAIN_MS = 3000;
  const config = loadSchemaConfig({
    PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
    PUSHBASE_KAFKA_TOPIC: topic,
    PUSHBASE_REDIS_URL: redisUrl(),
    PUSHBASE_REDIS_PREFIX: prefix,
    PUSHBASE_GRPC_DRAIN_MS: String(DRAIN_MS),
  });
  const running = await runSchema(config, { log: () => undefined });
  const address = `127.0.0.1:${running.port}`;
  const client = connectSchemaService(address, { protos: pushbaseServices() });
  const health = healthClient(address);
  try {
    const account = `acct-${randomBytes(4).toString('hex')}`;
    await create(client, account, 'before');
    const started = Date.now();
    const stopping = running.stop();
    // Probes see NOT_SERVING while the server still answers whoever has not noticed yet, a change included.
    await eventually(async () => (await health.check('')) === 'NOT_SERVING', { what: 'health NOT_SERVING' });
    await expect(create(client, account, 'during')).resolves.toMatchObject({ created: true });
    await expect(client.get({ account, id: 'before' })).resolves.toMatchObject({ id: 'before' });
    await stopping;
    expect(Date.now() - started).toBeGreaterThanOrEqual(DRAIN_MS);
    await expect(client.get({ account, id: 'before' })).rejects.toMatchObject({ code: 'unavailable' });
  } finally {
    health.close();
    client.close();
    await running.stop();
  }
});

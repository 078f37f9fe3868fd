import { randomBytes } from 'node:crypto';
import { pushbaseServices, type AccountCommands, type RecordService, type SchemaService } from '@pushbase/contracts';
import { DEFAULT_QUOTAS } from '@pushbase/domain';
import { connectRecordService, connectSchemaService } from '@pushbase/grpc';
import { defaultAccountsTopic, KafkaAccountLog, KafkaEventAppender } from '@pushbase/kafka';
import { loadProjectorConfig, loadReplayConfig, runProjector, runReplay, type RunningProjector } from '@pushbase/projector';
import { createRecordsServer } from '@pushbase/records';
import { openRedis, readState, RedisKeyStore, type Redis } from '@pushbase/redis';
import { createSchemaServer } from '@pushbase/schema';
import type { Admin } from 'kafkajs';
import { sha } from '../helpers/api-keys';
import { connectTestRedis, deleteUnder, keysUnder, redisUrl } from '../helpers/redis';
import { testConnection } from '../helpers/kafka';
import { body, outcomeOf, readConsumed } from '../../services/records/test/support';
import { eventually } from '../helpers/eventually';
import { useTestPipeline } from '../helpers/test-pipeline';

/*
 * Redis rolled back under running services: every key under the prefix restored as it was earlier (what a
 * restart from an older snapshot, or without the append-only file, leaves). The services must refuse the
 * stores (`unavailable`, 503) rather than accept a revoked key or make a new incarnation over stored
 * records, and serve again once `pushbase replay` rebuilt Redis from the topics. Real Kafka, ClickHouse and
 * Redis, through the real schema and records services and projector; a topic, database and prefix of its own.
 */

jest.setTimeout(300_000);

const protos = pushbaseServices();
const quiet = (): void => undefined;
const fields = { fields: { n: { type: 'number', name: 'N' } } };

const { pipeline, defer } = useTestPipeline('pb-rollback');
let admin: Admin;
let redis: Redis;
let topic: string;
let prefix: string;
let vars: Record<string, string>;
beforeAll(() => {
  ({ admin, redis, topic, prefix, vars } = pipeline());
});

/** The schema service (with accounts) and the records service, each with its own connections, as processes have. */
async function services(): Promise<{ schema: SchemaService; accounts: AccountCommands; records: RecordService }> {
  const own = async (topicName: string) => {
    const r = await openRedis(redisUrl(), { failFast: true });
    const appender = new KafkaEventAppender({ connection: testConnection(), topic: topicName, appendTimeoutMs: 10_000 });
    defer(async () => {
      await appender.close();
      r.disconnect();
    });
    return { redis: r, appender };
  };
  const s = await own(topic);
  const a = await own(defaultAccountsTopic(topic));
  const schemaServer = createSchemaServer({ redis: s.redis, prefix, appender: s.appender, accountLog: new KafkaAccountLog(a.appender), lock: { ttlMs: 30_000, waitMs: 10_000 }, log: quiet, protos });
  const schema = connectSchemaService(`127.0.0.1:${await schemaServer.grpc.listen('127.0.0.1', 0)}`, { protos });
  const r = await own(topic);
  const recordsServer = createRecordsServer({ redis: r.redis, prefix, appender: r.appender, log: quiet, protos });
  const records = connectRecordService(`127.0.0.1:${await recordsServer.grpc.listen('127.0.0.1', 0)}`, { protos });
  defer(async () => {
    schema.close();
    records.close();
    await schemaServer.grpc.shutdown(1000);
    await recordsServer.grpc.shutdown(1000);
  });
  if (schemaServer.accounts === undefined) throw new Error('the schema service serves accounts with an accounts topic');
  return { schema, accounts: schemaServer.accounts, records };
}

let projector: RunningProjector | undefined;
async function startProjector(): Promise<void> {
  projector = await runProjector(loadProjectorConfig(vars), { log: quiet });
}
async function stopProjector(): Promise<void> {
  await projector?.stop();
  projector = undefined;
}

/** Waits until the projector group committed past every event in the topic now. */
async function caughtUp(): Promise<void> {
  const last = new Map<number, number>();
  for (const { position } of await readConsumed(admin, topic)) last.set(position.partition, position.offset + 1);
  await eventually(async () => {
    const [offsets] = await admin.fetchOffsets({ groupId: vars.PUSHBASE_PROJECTOR_GROUP!, topics: [topic] });
    const committed = new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    return [...last].every(([p, end]) => (committed.get(p) ?? -1) >= end);
  }, { what: 'the projector to commit past every event', timeoutMs: 60_000 });
}

/** Every key under the prefix as Redis would save it. */
async function snapshot(): Promise<Map<string, Buffer>> {
  const dumped = new Map<string, Buffer>();
  for (const key of await keysUnder(redis, prefix)) {
    const value = await redis.dumpBuffer(key);
    if (value !== null) dumped.set(key, value);
  }
  return dumped;
}

/** Redis as it was at `dumped`: what a restart from that snapshot leaves. */
async function restore(dumped: ReadonlyMap<string, Buffer>): Promise<void> {
  await deleteUnder(redis, prefix);
  for (const [key, value] of dumped) await redis.restore(key, 0, value);
}

const code = (p: Promise<unknown>): Promise<string> => outcomeOf(p);

it('a Redis restored from an older snapshot is refused (no revoked key accepted, no new incarnation) until replay rebuilt it', async () => {
  const { schema, accounts, records } = await services();
  const gatewayRedis = await connectTestRedis();
  defer(() => Promise.resolve(gatewayRedis.disconnect()));
  const gateway = new RedisKeyStore(gatewayRedis, { prefix, stateCheckMs: 0 });
  const account = `acct-${randomBytes(4).toString('hex')}`;
  const key = `pb_${randomBytes(32).toString('base64url')}`;
  await accounts.createAccount(account, DEFAULT_QUOTAS);
  const { key_id } = await accounts.createKeyByHash(account, { hash: sha(key), scope: 'write', label: null });
  await schema.findOrCreate({ account, id: 'kept', body: fields });
  await records.append({ account, id: 'kept', json: body([{ n: 1 }]) });
  await startProjector();
  await caughtUp();
  await expect(gateway.resolve(key)).resolves.toMatchObject({ account, key_id });
  const older = await snapshot();

  // After the snapshot: a dataset with a record, and the key revoked.
  const sales = await schema.findOrCreate({ account, id: 'sales', body: fields });
  expect(sales.created).toBe(true);
  await records.append({ account, id: 'sales', json: body([{ n: 2 }]) });
  await accounts.revokeKey(account, key_id);
  await caughtUp();
  await expect(gateway.resolve(key)).resolves.toBeUndefined();

  await restore(older);
  // The revoked key is back in the account store and `sales` is gone from the schema store: both refused.
  await expect(code(gateway.resolve(key))).resolves.toBe('unavailable');
  await expect(code(schema.findOrCreate({ account, id: 'sales', body: fields }))).resolves.toBe('unavailable');
  // The records service looks at the state once a second (every write reads the store).
  await eventually(async () => (await code(records.append({ account, id: 'kept', json: body([{ n: 3 }]) }))) === 'unavailable', { what: 'the records service to refuse', timeoutMs: 3000 });
  // A process started since, with no memory of the newer state, refuses as well: the finding is in Redis.
  await expect(code(new RedisKeyStore(redis, { prefix }).resolve(key))).resolves.toBe('unavailable');
  expect((await readState(redis, prefix)).regressed).toBeDefined();

  await stopProjector();
  expect((await runReplay(loadReplayConfig({ progress: false }, vars), { log: quiet })).swapped).toBe(true);
  await expect(gateway.resolve(key)).resolves.toBeUndefined();
  await expect(schema.findOrCreate({ account, id: 'sales', body: fields })).resolves.toMatchObject({ created: false, dataset: { incarnation: sales.dataset.incarnation } });
  await eventually(async () => (await code(records.append({ account, id: 'sales', json: body([{ n: 4 }]) }))) === 'ok', { what: 'the records service to take writes again', timeoutMs: 5000 });
  expect((await readState(redis, prefix)).regressed).toBeUndefined();

  // Rolled back while no service looked: the projector finds at start that Redis is behind what its group
  // committed, and says so for every process.
  await startProjector();
  await caughtUp();
  const behind = await snapshot();
  await schema.findOrCreate({ account, id: 'later', body: fields });
  await records.append({ account, id: 'later', json: body([{ n: 5 }]) });
  await caughtUp();
  await stopProjector();
  await restore(behind);
  expect((await readState(redis, prefix)).regressed).toBeUndefined();
  await startProjector();
  expect((await readState(redis, prefix)).regressed).toMatch(/below its group's committed offset/);
  await expect(code(new RedisKeyStore(redis, { prefix }).resolve(key))).resolves.toBe('unavailable');
  await stopProjector();
  expect((await runReplay(loadReplayConfig({ progress: false }, vars), { log: quiet })).swapped).toBe(true);
  await expect(schema.findOrCreate({ account, id: 'later', body: fields })).resolves.toMatchObject({ created: false });
});

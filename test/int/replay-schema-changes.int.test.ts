import { randomBytes } from 'node:crypto';
import { ClickHouseHeadsStore, ClickHouseReadModel, type ClickHouseConnection } from '@pushbase/clickhouse';
import { pushbaseServices, type RecordService, type SchemaService } from '@pushbase/contracts';
import { fold, type DatasetEvent } from '@pushbase/domain';
import { connectRecordService, connectSchemaService } from '@pushbase/grpc';
import { KafkaEventAppender } from '@pushbase/kafka';
import { loadProjectorConfig, loadReplayConfig, runProjector, runReplay } from '@pushbase/projector';
import { createRecordsServer } from '@pushbase/records';
import { openRedis, RedisSchemaStore, type Redis } from '@pushbase/redis';
import { createSchemaServer } from '@pushbase/schema';
import type { Admin } from 'kafkajs';
import { redisUrl } from '../helpers/redis';
import { testConnection } from '../helpers/kafka';
import { body, outcomeOf, readConsumed, readTopic } from '../../services/records/test/support';
import { eventually } from '../helpers/eventually';
import { useTestPipeline } from '../helpers/test-pipeline';

/*
 * Datasets created, deleted and re-created while `pushbase replay` runs, through the real schema and
 * records services (the live projector stopped, as replay requires). Those changes reach the Redis store
 * the swap replaces, not the rebuilt one; whatever the services do after the swap, every write they
 * acknowledged must be in the projection once a projector has caught up, and Redis must name the fold's
 * incarnations. Real Kafka, ClickHouse and Redis; a topic, database and key prefix of its own.
 */

jest.setTimeout(300_000);

const protos = pushbaseServices();
const quiet = (): void => undefined;
const fields = { fields: { n: { type: 'number', name: 'N' } } };

const { pipeline, defer } = useTestPipeline('pb-replay-changes');
let admin: Admin;
let redis: Redis;
let conn: ClickHouseConnection;
let topic: string;
let prefix: string;
let database: string;
let vars: Record<string, string>;
beforeAll(() => {
  ({ admin, redis, conn, topic, prefix, database, vars } = pipeline());
});

/** A schema or records service with its own Redis connection and Kafka producer, as a process has. */
async function ownConnections(): Promise<{ redis: Redis; appender: KafkaEventAppender }> {
  const own = await openRedis(redisUrl(), { failFast: true });
  const appender = new KafkaEventAppender({ connection: testConnection(), topic, appendTimeoutMs: 10_000 });
  defer(async () => {
    await appender.close();
    own.disconnect();
  });
  return { redis: own, appender };
}

async function services(): Promise<{ schema: SchemaService; records: RecordService }> {
  const s = await ownConnections();
  const schemaServer = createSchemaServer({ redis: s.redis, prefix, appender: s.appender, lock: { ttlMs: 30_000, waitMs: 60_000 }, log: quiet, protos });
  const schema = connectSchemaService(`127.0.0.1:${await schemaServer.grpc.listen('127.0.0.1', 0)}`, { protos });
  const r = await ownConnections();
  const recordsServer = createRecordsServer({ redis: r.redis, prefix, appender: r.appender, log: quiet, protos });
  const records = connectRecordService(`127.0.0.1:${await recordsServer.grpc.listen('127.0.0.1', 0)}`, { protos });
  defer(async () => {
    schema.close();
    records.close();
    await schemaServer.grpc.shutdown(1000);
    await recordsServer.grpc.shutdown(1000);
  });
  return { schema, records };
}

/** Runs a projector until its group committed past every event in the topic now. */
async function project(): Promise<void> {
  let fatal: Error | undefined;
  const running = await runProjector(loadProjectorConfig(vars), { log: quiet, onFatal: (e) => (fatal = e) });
  try {
    const last = new Map<number, number>();
    for (const { position } of await readConsumed(admin, topic)) last.set(position.partition, Math.max(last.get(position.partition) ?? 0, position.offset + 1));
    await eventually(async () => {
      if (fatal !== undefined) throw fatal;
      const [offsets] = await admin.fetchOffsets({ groupId: vars.PUSHBASE_PROJECTOR_GROUP!, topics: [topic] });
      const committed = new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      return [...last].every(([p, end]) => (committed.get(p) ?? -1) >= end);
    }, { what: 'the projector to commit past every event', timeoutMs: 120_000 });
  } finally {
    await running.stop();
  }
}

it('datasets created, deleted and re-created during a replay: every acknowledged write survives, and Redis names the fold incarnations', async () => {
  const account = `acct-${randomBytes(4).toString('hex')}`;
  const { schema, records } = await services();
  // What a client was told is stored, per dataset: the values of its acknowledged writes since it was last created.
  const acknowledged = new Map<string, number[]>();
  let n = 0;
  const create = async (id: string): Promise<void> => {
    const { created } = await schema.findOrCreate({ account, id, body: fields });
    if (created) acknowledged.set(id, []);
  };
  const remove = async (id: string): Promise<void> => {
    await schema.delete({ account, id });
    acknowledged.delete(id);
  };
  const write = async (id: string): Promise<string> => {
    const value = ++n;
    const outcome = await outcomeOf(records.append({ account, id, json: body([{ n: value }]) }));
    if (outcome === 'ok') acknowledged.set(id, [...(acknowledged.get(id) ?? []), value]);
    return outcome;
  };

  for (const id of ['kept', 'gone', 'again']) {
    await create(id);
    expect(await write(id)).toBe('ok');
  }
  await project();

  let late: Promise<void> | undefined;
  const result = await runReplay(loadReplayConfig({ progress: false }, vars), {
    log: quiet,
    // Between the rebuild and the swap: the changes reach the live store, which the swap replaces.
    afterRebuild: async () => {
      await create('fresh');
      expect(await write('fresh')).toBe('ok');
      await remove('gone');
      await remove('again');
      await create('again');
      expect(await write('again')).toBe('ok');
      expect(await write('kept')).toBe('ok');
    },
    // Holding schema changes for the swap: a create waits for it (no lease is taken) instead of reaching
    // the store being replaced.
    whileHeld: async () => {
      let settled = false;
      late = create('late').finally(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(settled).toBe(false);
    },
  });
  expect(result.swapped).toBe(true);
  await late;
  expect(acknowledged.get('late')).toStrictEqual([]);

  // After the swap, before any projector runs: the services go on from the swapped-in store.
  for (const id of ['kept', 'fresh', 'gone', 'again', 'late']) await write(id);
  // A client's find-or-create of a dataset it made: found, not made anew (which would drop its records).
  const found = await schema.findOrCreate({ account, id: 'fresh', body: fields });
  for (const id of ['fresh', 'again']) expect(await write(id)).toBe('ok');

  await project();
  const events: DatasetEvent[] = await readTopic(admin, topic);
  const state = fold(events).get(account);
  const readModel = new ClickHouseReadModel(conn, database);
  const heads = new ClickHouseHeadsStore(conn, database);
  const schemaStore = new RedisSchemaStore(redis, { prefix });
  const values = (rows: Iterable<unknown>): number[] => [...rows].map((r) => (r as { n: number }).n).sort((a, b) => a - b);
  for (const id of ['kept', 'fresh', 'gone', 'again', 'late']) {
    expect({ id, live: state?.has(id) }).toStrictEqual({ id, live: acknowledged.has(id) });
    expect({ id, records: values((await readModel.listRecords(account, id)) ?? []) }).toStrictEqual({ id, records: acknowledged.get(id) ?? [] });
    expect({ id, redis: (await schemaStore.get(account, id))?.incarnation }).toStrictEqual({ id, redis: state?.get(id)?.incarnation });
    expect({ id, clickhouse: (await heads.get(account, id))?.incarnation }).toStrictEqual({ id, clickhouse: state?.get(id)?.incarnation });
  }
  expect(await schemaStore.count(account)).toBe(state?.size);
  expect(found.created).toBe(false);
});

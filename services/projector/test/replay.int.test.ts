/*
 * `pushbase replay` against real Kafka, ClickHouse and Redis. A mixed workload goes through the appender
 * and is projected by a live projector (into ClickHouse and the Redis schema store); replay then rebuilds
 * both from the topic into fresh tables and keys and swaps them in. The rebuilt state must equal the live
 * one by the command's own verify, and, checked here independently, the domain's pure fold of the same
 * events. A planted difference must make verify fail (and keep the live state), through the real command.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import fc from 'fast-check';
import { accountLiteral, ClickHouseHeadsStore, ClickHouseProjectionStore, ClickHouseReadModel, datasetLiteral, connectClickHouse, migrate, quoteIdentifier, type ClickHouseConnection } from '@pushbase/clickhouse';
import type { StreamPosition } from '@pushbase/contracts';
import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, EVENT_SCHEMA_VERSION, fold, recordsOf, type AccountEvent, type DatasetEvent, type State } from '@pushbase/domain';
import { defaultAccountsTopic, ensureTopic, KafkaAccountLog, KafkaEventAppender } from '@pushbase/kafka';
import { RedisAccountStore, RedisSchemaStore, type Redis } from '@pushbase/redis';
import type { Admin } from 'kafkajs';
import { sha } from '../../../test/helpers/api-keys';
import { KAFKA_BROKERS, randomName, requireKafka, testAdmin, testConnection } from '../../../test/helpers/kafka';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from '../../../test/helpers/redis';
import { loadProjectorConfig, loadReplayConfig, ReplayRefused, runProjector, runReplay, type Logger, type RunningProjector } from '../src';
import { eventsOf, makeRecords, PLAIN, stepsArb, type Step } from './event-sequences';
import { eventually } from '../../../test/helpers/eventually';

jest.setTimeout(300_000);

const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const REPO_ROOT = path.join(__dirname, '..', '..', '..');
const DATASETS = ['sales', 'visits', 'orders', 'signups'] as const;
const quiet: Logger = (level, msg, fields) => { if (process.env.REPLAY_DEBUG) process.stderr.write(`${level} ${msg} ${JSON.stringify(fields)}\n`); };

/**
 * Every kind of event, by hand: appends with and without unique_by and with each delete_by (date,
 * datetime, none), bursts past the 5000-record window, replace, clear (replace with nothing), delete,
 * re-create (a new incarnation), and events of a deleted incarnation arriving late (which change nothing).
 */
const HAND_STEPS: Step[] = [
  { kind: 'define', ds: 0, keyed: true },
  { kind: 'define', ds: 1, keyed: false },
  { kind: 'define', ds: 2, keyed: true },
  { kind: 'define', ds: 3, keyed: false },
  { kind: 'append', ds: 0, count: 400, seed: 1, deleteBy: null, repeat: 1 },
  { kind: 'append', ds: 0, count: 6, seed: 3, deleteBy: 'day', repeat: 1 },
  { kind: 'append', ds: 1, count: 500, seed: 4, deleteBy: 'day', repeat: 11 },
  { kind: 'append', ds: 1, count: 500, seed: 40, deleteBy: 'at', repeat: 2 },
  { kind: 'append', ds: 3, count: 480, seed: 7, deleteBy: null, repeat: 12 },
  { kind: 'append', ds: 2, count: 500, seed: 5, deleteBy: 'at', repeat: 12 },
  { kind: 'replace', ds: 2, count: 30, seed: 8 },
  { kind: 'append', ds: 2, count: 5, seed: 9, deleteBy: null, repeat: 1 },
  { kind: 'replace', ds: 0, count: 0, seed: 0 },
  { kind: 'append', ds: 0, count: 3, seed: 11, deleteBy: 'at', repeat: 1 },
  { kind: 'delete', ds: 3 },
  { kind: 'append', ds: 3, count: 4, seed: 12, deleteBy: null, repeat: 1 },
  { kind: 'define', ds: 3, keyed: true },
  { kind: 'append', ds: 3, count: 6, seed: 13, deleteBy: 'day', repeat: 1 },
  { kind: 'delete', ds: 1 },
  { kind: 'define', ds: 0, keyed: true },
];

interface Env {
  readonly admin: Admin;
  readonly topic: string;
  readonly group: string;
  readonly database: string;
  readonly prefix: string;
  readonly conn: ClickHouseConnection;
  readonly redis: Redis;
  readonly appender: KafkaEventAppender;
  readonly vars: Record<string, string>;
}

let env: Env;

beforeAll(async () => {
  await requireKafka();
  const admin = await testAdmin();
  const topic = randomName('pb-replay');
  await ensureTopic(admin, { topic, partitions: 3 });
  await ensureTopic(admin, { topic: defaultAccountsTopic(topic), partitions: 1 });
  const database = `pb_replay_${randomBytes(6).toString('hex')}`;
  const prefix = randomPrefix();
  const vars = {
    PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
    PUSHBASE_KAFKA_TOPIC: topic,
    PUSHBASE_PROJECTOR_GROUP: randomName('pb-replay-live'),
    PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL,
    PUSHBASE_CLICKHOUSE_DATABASE: database,
    PUSHBASE_REDIS_URL: redisUrl(),
    PUSHBASE_REDIS_PREFIX: prefix,
    PUSHBASE_PROJECTOR_FLUSH_MS: '200',
    // Small, so the live projector and the replay both drop dataset states and load them back.
    PUSHBASE_PROJECTOR_MAX_ROWS: '4000',
    PUSHBASE_PROJECTOR_FLUSH_ROWS: '3000',
  };
  const conn = connectClickHouse(CLICKHOUSE_URL);
  // What `pushbase migrate` does before the projector first runs.
  await migrate(conn, database);
  env = {
    admin,
    topic,
    group: vars.PUSHBASE_PROJECTOR_GROUP,
    database,
    prefix,
    conn,
    redis: await connectTestRedis(),
    appender: new KafkaEventAppender({ connection: testConnection(), topic }),
    vars,
  };
});

afterAll(async () => {
  if (env === undefined) return;
  await env.appender.close();
  await env.admin.deleteGroups([env.group]).catch(() => undefined);
  await env.admin.deleteTopics({ topics: [env.topic, defaultAccountsTopic(env.topic)] }).catch(() => undefined);
  await env.admin.disconnect();
  // The live database, and any database a replay of this suite left (none should remain).
  const rs = await env.conn.client.query({ query: 'SELECT name FROM system.databases', format: 'JSONEachRow' });
  for (const { name } of await rs.json<{ name: string }>()) {
    if (name.startsWith(env.database)) await env.conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(name)}` });
  }
  await env.conn.close();
  await deleteUnder(env.redis, env.prefix);
  env.redis.disconnect();
});

/** Appends every event (one dataset's events keep their order) and returns where each was stored. */
/** Every position produced so far: the projector is caught up once it committed past the last of each partition. */
const produced: StreamPosition[] = [];

async function produce(events: readonly DatasetEvent[]): Promise<StreamPosition[]> {
  const stored = await Promise.all(events.map((e) => env.appender.appendAt([e])));
  const positions = stored.map((p) => p[0] as StreamPosition);
  produced.push(...positions);
  return positions;
}

async function endOffsets(): Promise<Map<number, number>> {
  const offsets = await env.admin.fetchTopicOffsets(env.topic);
  return new Map(offsets.map((o) => [o.partition, Number(o.high)]));
}

async function committed(): Promise<Map<number, number>> {
  const [offsets] = await env.admin.fetchOffsets({ groupId: env.group, topics: [env.topic] });
  return new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
}

async function untilCaughtUp(): Promise<void> {
  // The offset after each partition's last event, not the partition's end: that is one further, past the
  // marker of the last transaction, and the projector commits event positions.
  const ends = new Map<number, number>();
  for (const p of produced) ends.set(p.partition, Math.max(ends.get(p.partition) ?? 0, p.offset + 1));
  await eventually(async () => {
    if (fatal !== undefined) throw fatal;
    const at = await committed();
    return [...ends].every(([p, end]) => end === 0 || (at.get(p) ?? -1) >= end);
  }, { what: `the live projector to commit up to ${JSON.stringify([...ends])}`, timeoutMs: 120_000 });
}

let fatal: Error | undefined;
const startLive = (): Promise<RunningProjector> => runProjector(loadProjectorConfig(env.vars), { log: quiet, onFatal: (e) => (fatal = e) });

/** Independently of replay's verify: ClickHouse and Redis show exactly the domain's fold of `events`. */
async function expectStateEqualsFold(events: readonly DatasetEvent[], accounts: readonly string[]): Promise<void> {
  const state: State = fold(events.map((e) => JSON.parse(JSON.stringify(e)) as DatasetEvent));
  const readModel = new ClickHouseReadModel(env.conn, env.database);
  const heads = new ClickHouseHeadsStore(env.conn, env.database);
  const schema = new RedisSchemaStore(env.redis, { prefix: env.prefix });
  for (const account of accounts) {
    const live = DATASETS.filter((id) => state.get(account)?.get(id) !== undefined);
    expect(await schema.count(account)).toBe(live.length);
    expect(await heads.count(account)).toBe(live.length);
    const listing = await readModel.listDatasets(account);
    expect(listing.map((d) => [d.id, d.record_count])).toStrictEqual(
      [...live].sort().map((id) => [id, state.get(account)?.get(id)?.rows.size]),
    );
    // The Grafana-ready views: one per live dataset, each holding its records (kept by writes, mended by replay).
    const viewsDb = `${env.database}_views`;
    const named = await (await env.conn.client.query({ query: `SELECT name FROM system.tables WHERE database = '${viewsDb}'`, format: 'JSONEachRow' })).json<{ name: string }>();
    expect(named.map((v) => v.name).filter((n) => n.startsWith(`${account}/`)).sort()).toStrictEqual(live.map((id) => `${account}/${id}`).sort());
    for (const id of live) {
      const counted = await (await env.conn.client.query({ query: `SELECT toString(count()) AS n FROM \`${viewsDb}\`.\`${account}/${id}\``, format: 'JSONEachRow' })).json<{ n: string }>();
      expect({ id, view_rows: Number(counted[0]?.n) }).toStrictEqual({ id, view_rows: state.get(account)?.get(id)?.rows.size });
    }
    for (const id of DATASETS) {
      const ds = state.get(account)?.get(id);
      expect({ id, records: await readModel.listRecords(account, id) }).toStrictEqual({ id, records: ds === undefined ? undefined : recordsOf(ds) });
      const summary = await schema.get(account, id);
      expect({ id, incarnation: summary?.incarnation, definition: summary?.definition }).toStrictEqual({ id, incarnation: ds?.incarnation, definition: ds?.definition });
      expect((await heads.get(account, id))?.incarnation).toBe(ds?.incarnation);
    }
  }
}

/** The replay command itself, as a child process; resolves with its exit code and output. */
function replayCommand(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/cli/src/main.ts', 'replay', ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env.vars },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const guard = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, stdout, stderr });
    });
  });
}

const accounts = [`acct-${randomBytes(4).toString('hex')}`, `acct-${randomBytes(4).toString('hex')}`];
const allEvents: DatasetEvent[] = [];

describe('pushbase replay (real Kafka, ClickHouse and Redis)', () => {
  it('rebuilds what the live projector built, verifies it, swaps it in, and hands the group over at its end', async () => {
    // One account gets the hand-written workload, the other a seeded random one of the same kinds.
    const [random] = fc.sample(stepsArb(DATASETS.length, 40), { numRuns: 1, seed: 20261123 });
    const events = [
      ...eventsOf(HAND_STEPS, { account: accounts[0]!, datasets: DATASETS, incarnationPrefix: `${accounts[0]}` }),
      ...eventsOf(random!, { account: accounts[1]!, datasets: DATASETS, incarnationPrefix: `${accounts[1]}` }),
    ];
    allEvents.push(...events);
    await produce(events);

    let live = await startLive();
    try {
      await untilCaughtUp();
      // While a projector of the group runs, replay refuses and changes nothing.
      await expect(runReplay(loadReplayConfig({ progress: false }, env.vars), { log: quiet })).rejects.toBeInstanceOf(ReplayRefused);
    } finally {
      await live.stop();
    }
    await expectStateEqualsFold(allEvents, accounts);

    const result = await runReplay(loadReplayConfig({ verify: true, progress: false }, env.vars), { log: quiet });
    expect(result.verify?.differences).toStrictEqual([]);
    expect(result.verify?.equal).toBe(true);
    expect(result.swapped).toBe(true);
    expect(result.events).toBe(events.length);
    const folded = fold(events.map((e) => JSON.parse(JSON.stringify(e)) as DatasetEvent));
    const liveDatasets = accounts.flatMap((a) => [...(folded.get(a)?.values() ?? [])]);
    expect(result.datasets).toBe(liveDatasets.length);
    expect(result.records).toBe(liveDatasets.reduce((n, ds) => n + ds.rows.size, 0));
    expect(result.verify?.checked.records).toBe(result.records);
    // The swapped-in state, checked against the pure fold rather than against the old live state.
    await expectStateEqualsFold(allEvents, accounts);
    expect(await committed()).toStrictEqual(await endOffsets());

    // Events written after the replay are applied by the restarted projector, into the new tables: an
    // append to a live dataset, a delete, a re-create with a new incarnation and an append to it.
    const [account] = accounts as [string, string];
    const orders = folded.get(account)?.get('orders');
    const sales = folded.get(account)?.get('sales');
    if (orders === undefined || sales === undefined) throw new Error('the hand workload leaves orders and sales live');
    const base = { schema_version: EVENT_SCHEMA_VERSION, account, at: 1_800_000_000_000 } as const;
    const after: DatasetEvent[] = [
      { ...base, type: 'RecordsAppended', dataset: 'orders', incarnation: orders.incarnation, records: makeRecords(true, 20, 99), delete_by: 'day' },
      { ...base, type: 'DatasetDeleted', dataset: 'sales', incarnation: sales.incarnation },
      { ...base, type: 'DatasetDefined', dataset: 'sales', incarnation: `${account}-after`, definition: PLAIN },
      { ...base, type: 'RecordsAppended', dataset: 'sales', incarnation: `${account}-after`, records: makeRecords(false, 7, 98), delete_by: null },
    ];
    allEvents.push(...after);
    await produce(after);
    live = await startLive();
    try {
      await untilCaughtUp();
    } finally {
      await live.stop();
    }
    await expectStateEqualsFold(allEvents, accounts);
  });

  it('verify finds a difference planted in the live state, exits 1 and swaps nothing (the command itself)', async () => {
    expect(allEvents.length).toBeGreaterThan(0); // the state of the test above
    const [account] = accounts as [string, string];
    const store = new ClickHouseProjectionStore(env.conn, env.database);
    const readModel = new ClickHouseReadModel(env.conn, env.database);
    const schema = new RedisSchemaStore(env.redis, { prefix: env.prefix });

    // Unchanged state first: the command's verify-only agrees, exit 0.
    const clean = await replayCommand(['--verify-only', '--no-progress']);
    expect({ code: clean.code, stderr: clean.stderr }).toStrictEqual({ code: 0, stderr: '' });
    expect(clean.stdout).toMatch(/verify: the rebuilt state equals the live one/);

    // Plant: one record of a live dataset vanishes from ClickHouse (a tombstone at a higher version, with a
    // head of the same position), and one dataset's definition changes in Redis.
    const folded = fold(allEvents.map((e) => JSON.parse(JSON.stringify(e)) as DatasetEvent));
    const target = [...(folded.get(account)?.values() ?? [])].find((ds) => ds.rows.size > 1)!;
    const headRows = await env.conn.client.query({
      query: `SELECT head, toString(version) AS version FROM ${quoteIdentifier(env.database)}.records FINAL WHERE account = ${accountLiteral(account)} AND row_slot = 0 AND dataset = ${datasetLiteral(target.id)}`,
      format: 'JSONEachRow',
    });
    const [headRow] = await headRows.json<{ head: string; version: string }>();
    const head = JSON.parse(headRow!.head) as { position: StreamPosition; next_row: number };
    const version = Number(headRow!.version) + 1;
    const [firstKey] = target.rows.keys();
    const slot = (await store.load(account, target.id))?.slots.get(firstKey ?? 0) ?? 0;
    await store.write(
      [{ account, dataset: target.id, incarnation: target.incarnation, row_key: String(firstKey), slot, version, seq: version, deleted: true, record: null }],
      [{ account, dataset: target.id, incarnation: target.incarnation, definition: target.definition, created_at: target.created_at, updated_at: target.updated_at, record_count: target.rows.size - 1, next_row: head.next_row, position: head.position, version: version + 1, deleted: false }],
    );
    const planted = await schema.get(account, target.id);
    await env.redis.hset(`${env.prefix}schema:dataset:${target.id}:${account}`, 'definition', JSON.stringify({ ...planted!.definition, unique_by: ['planted'] }));

    const before = await readModel.listRecords(account, target.id);
    const verified = await replayCommand(['--verify', '--no-progress']);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toMatch(/verify: the rebuilt state DIFFERS from the live one/);
    expect(verified.stdout).toContain(`clickhouse ${account}/${target.id}: record_count: live ${target.rows.size - 1}, rebuilt ${target.rows.size}`);
    expect(verified.stdout).toContain(`clickhouse ${account}/${target.id}: records: live has ${target.rows.size - 1}, rebuilt ${target.rows.size}`);
    expect(verified.stdout).toContain(`redis dataset:${target.id}:${account}: live`);
    expect(verified.stdout).toMatch(/nothing swapped; the live state is unchanged/);
    // Nothing was swapped: the planted state is still live.
    expect(await readModel.listRecords(account, target.id)).toStrictEqual(before);
    expect((await schema.get(account, target.id))?.definition.unique_by).toStrictEqual(['planted']);

    // Without --verify, replay repairs it: the rebuilt state replaces the planted one.
    const repaired = await runReplay(loadReplayConfig({ progress: false }, env.vars), { log: quiet });
    expect(repaired.swapped).toBe(true);
    await expectStateEqualsFold(allEvents, accounts);
    const again = await runReplay(loadReplayConfig({ verifyOnly: true, progress: false }, env.vars), { log: quiet });
    expect(again.verify?.equal).toBe(true);
    expect(again.swapped).toBe(false);
    // verify-only and the swaps left no scratch generation behind.
    const rs = await env.conn.client.query({ query: 'SELECT name FROM system.databases', format: 'JSONEachRow' });
    expect((await rs.json<{ name: string }>()).map((r) => r.name).filter((n) => n.startsWith(env.database)).sort()).toStrictEqual([env.database, `${env.database}_views`]);
    const keys = await env.redis.keys(`${env.prefix}*`);
    // The live state of the stores (services/redis/src/state.ts) is the only key beside the schema store.
    expect(keys.filter((k) => !k.startsWith(`${env.prefix}schema:`))).toStrictEqual([`${env.prefix}state`]);
  });

  it('account changes made while it runs hold after the swap: a key revoked and an account deleted meanwhile stay so', async () => {
    const log = new KafkaAccountLog(new KafkaEventAppender({ connection: testConnection(), topic: defaultAccountsTopic(env.topic), lingerMs: 1 }));
    const live = new RedisAccountStore(env.redis, { prefix: env.prefix });
    // What the schema service does with a change: append it, then apply it to the live store.
    const change = async (events: readonly AccountEvent[]): Promise<void> => {
      const positions = await log.append(events);
      await live.apply(events.map((event, i) => ({ event, position: positions[i]! })));
    };
    const [kept, dropped] = [`acct-${randomBytes(4).toString('hex')}`, `acct-${randomBytes(4).toString('hex')}`];
    const [keyKept, keyDropped] = [`pb_${randomBytes(32).toString('base64url')}`, `pb_${randomBytes(32).toString('base64url')}`];
    const base = (account: string) => ({ schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at: Date.now() }) as const;
    try {
      await change([
        { type: 'AccountCreated', ...base(kept), quotas: DEFAULT_QUOTAS },
        { type: 'KeyCreated', ...base(kept), key_id: 'kid_kept', hash: sha(keyKept), scope: 'write', label: null },
        { type: 'AccountCreated', ...base(dropped), quotas: DEFAULT_QUOTAS },
        { type: 'KeyCreated', ...base(dropped), key_id: 'kid_dropped', hash: sha(keyDropped), scope: 'read', label: null },
      ]);
      await expect(live.resolveHash(sha(keyKept))).resolves.toMatchObject({ account: kept });

      const result = await runReplay(loadReplayConfig({ progress: false }, env.vars), {
        log: quiet,
        // After the accounts topic was read into the fresh store, before the swap: the operator revokes a
        // key and deletes an account; both reach the live store (the one the swap replaces).
        afterRebuild: async () => {
          await change([{ type: 'KeyRevoked', ...base(kept), key_id: 'kid_kept' }]);
          await change([{ type: 'AccountDeleted', ...base(dropped) }]);
          await expect(live.resolveHash(sha(keyKept))).resolves.toBeUndefined();
        },
      });
      expect(result.swapped).toBe(true);
      // The four the rebuild read, and the two made meanwhile, read into the fresh store before the swap.
      expect(result.accountEvents).toBe(6);
      // The swapped-in store holds the changes made during the replay, before any projector runs again.
      await expect(live.resolveHash(sha(keyKept))).resolves.toBeUndefined();
      await expect(live.resolveHash(sha(keyDropped))).resolves.toBeUndefined();
      await expect(live.get(dropped)).resolves.toBeUndefined();
      await expect(live.get(kept)).resolves.toMatchObject({ account: kept, keys: new Map() });
      expect(await live.list()).toStrictEqual([kept]);
    } finally {
      await log.close();
    }
  });
});

import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import type { Admin } from 'kafkajs';
import { ClickHouseReadModel, connectClickHouse, migrate, quoteIdentifier, type ClickHouseConnection } from '@pushbase/clickhouse';
import type { StreamPosition } from '@pushbase/contracts';
import { fold, recordsOf, type DatasetEvent } from '@pushbase/domain';
import { KafkaEventAppender, defaultAccountsTopic, ensureTopic } from '@pushbase/kafka';
import { randomName, requireKafka, testAdmin, testConnection, KAFKA_BROKERS } from '../../../test/helpers/kafka';
import { randomPrefix, redisUrl } from '../../../test/helpers/redis';
import { loadProjectorConfig, runProjector, type Logger, type ProjectorConfig, type RunningProjector } from '../src';
import { eventually } from '../../../test/helpers/eventually';

/*
 * Real Kafka and ClickHouse for the projector's suites: a topic, a group and a database of random names
 * per suite, removed afterwards. A server that does not answer fails the suite; nothing is skipped.
 */

export const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const REPO_ROOT = path.join(__dirname, '..', '..', '..');

export interface Infra {
  readonly admin: Admin;
  readonly topic: string;
  readonly database: string;
  readonly conn: ClickHouseConnection;
  readonly readModel: ClickHouseReadModel;
  readonly appender: KafkaEventAppender;
  /** Environment of a projector on this topic and database (the group is the caller's). */
  env(groupId: string, extra?: Record<string, string>): Record<string, string>;
  close(): Promise<void>;
}

export async function infra(partitions: number): Promise<Infra> {
  await requireKafka();
  const admin = await testAdmin();
  const topic = randomName('pb-projector');
  const database = `pb_projector_${randomBytes(6).toString('hex')}`;
  const redisPrefix = randomPrefix();
  const conn = connectClickHouse(CLICKHOUSE_URL);
  try {
    await migrate(conn, database);
  } catch (e) {
    await conn.close();
    await admin.disconnect();
    throw new Error(`ClickHouse at ${CLICKHOUSE_URL} is needed by this suite (npm run services:up): ${e instanceof Error ? e.message : String(e)}`);
  }
  await ensureTopic(admin, { topic, partitions });
  // The projector follows the accounts topic too (src/accounts.ts); `pushbase migrate` creates both.
  await ensureTopic(admin, { topic: defaultAccountsTopic(topic), partitions: 1 });
  const appender = new KafkaEventAppender({ connection: testConnection(), topic });
  return {
    admin,
    topic,
    database,
    conn,
    readModel: new ClickHouseReadModel(conn, database),
    appender,
    env: (groupId, extra = {}) => ({
      PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
      PUSHBASE_KAFKA_TOPIC: topic,
      PUSHBASE_PROJECTOR_GROUP: groupId,
      PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL,
      PUSHBASE_CLICKHOUSE_DATABASE: database,
      // The projector also keeps the Redis schema store: the servers the run was given, under a prefix of
      // this test's own (not the default one, which a live stack on the same Redis would share).
      PUSHBASE_REDIS_URL: redisUrl(),
      PUSHBASE_REDIS_PREFIX: redisPrefix,
      PUSHBASE_PROJECTOR_FLUSH_MS: '200',
      ...extra,
    }),
    close: async () => {
      await appender.close();
      await admin.deleteTopics({ topics: [topic, defaultAccountsTopic(topic)] }).catch(() => undefined);
      await admin.disconnect();
      for (const db of [database, `${database}_views`]) await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(db)}` });
      await conn.close();
    },
  };
}

/** Appends every event in order (one dataset's events keep theirs) and returns where each was stored. */
export async function produce(appender: KafkaEventAppender, events: readonly DatasetEvent[]): Promise<StreamPosition[]> {
  // All at once: the appender keeps the order of appends and shares requests between them.
  const stored = await Promise.all(events.map((e) => appender.appendAt([e])));
  return stored.map((p) => p[0] as StreamPosition);
}

/** The offset after the last stored event, per partition: where a caught-up group has committed. */
export function endsOf(positions: readonly StreamPosition[]): Map<number, number> {
  const ends = new Map<number, number>();
  for (const p of positions) ends.set(p.partition, Math.max(ends.get(p.partition) ?? 0, p.offset + 1));
  return ends;
}

export async function committed(admin: Admin, groupId: string, topic: string): Promise<Map<number, number>> {
  const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((offsets?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
}

export async function untilCommitted(admin: Admin, groupId: string, topic: string, ends: Map<number, number>, timeoutMs = 60_000): Promise<void> {
  await eventually(async () => {
    const at = await committed(admin, groupId, topic);
    return [...ends].every(([p, end]) => (at.get(p) ?? -1) >= end);
  }, { what: `group ${groupId} to commit up to ${JSON.stringify([...ends])}`, timeoutMs: timeoutMs });
}

/** ClickHouse shows exactly the domain fold of `events` for every dataset named. */
export async function expectProjectionEqualsFold(readModel: ClickHouseReadModel, events: readonly DatasetEvent[], account: string, datasets: readonly string[]): Promise<void> {
  const state = fold(events.map((e) => JSON.parse(JSON.stringify(e)) as DatasetEvent));
  for (const id of datasets) {
    const ds = state.get(account)?.get(id);
    expect({ id, records: await readModel.listRecords(account, id) }).toStrictEqual({ id, records: ds === undefined ? undefined : recordsOf(ds) });
  }
}

/** Every stored row (tombstones and head rows included) of an account, as FINAL shows them. */
export async function tableOf(infra: Infra, account: string): Promise<unknown[]> {
  // The account goes into the INSERT-free SELECT as a checked literal; values otherwise never enter SQL.
  const { accountLiteral } = await import('@pushbase/clickhouse');
  const rs = await infra.conn.client.query({
    query: `SELECT * FROM ${quoteIdentifier(infra.database)}.records FINAL WHERE account = ${accountLiteral(account)} ORDER BY dataset, row_slot`,
    format: 'JSONEachRow',
  });
  return rs.json();
}

export const quietLog: Logger = () => undefined;

/** A projector in this process, with its log lines kept for the test. */
export async function startProjector(infra: Infra, groupId: string, extra: Record<string, string> = {}): Promise<RunningProjector & { readonly lines: string[] }> {
  const lines: string[] = [];
  const config: ProjectorConfig = loadProjectorConfig(infra.env(groupId, extra));
  const running = await runProjector(config, {
    log: (level, msg, fields) => {
      if (lines.length < 5000) lines.push(JSON.stringify({ level, msg, ...fields }));
    },
    onFatal: (e) => lines.push(JSON.stringify({ level: 'fatal', msg: e.message })),
  });
  return { ...running, projector: running.projector, stop: () => running.stop(), lines };
}

export const CHILD = path.join(__dirname, 'projector-child.ts');

/**
 * Runs the projector child (a real `runProjector` in its own process) until it exits; resolves with its
 * exit code or signal and its stdout lines. Bounded by `timeoutMs`, after which it is killed.
 */
export function runChild(env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; lines: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const guard = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, lines: out.split('\n').filter((l) => l !== ''), stderr: err });
    });
  });
}

export { randomName, eventually };

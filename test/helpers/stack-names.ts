import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connectClickHouse, dropDatabase } from '@pushbase/clickhouse';
import { createKafka, defaultAccountsTopic, parseBrokers } from '@pushbase/kafka';
import { openRedis } from '@pushbase/redis';

/*
 * The names a distributed test stack owns on the shared servers: its topic, ClickHouse database, Redis
 * prefix and projector group. They belong to a data directory (kept in it as stack.json), so that a test
 * restarting "the server on the same data directory" restarts the four services on the same topic, tables
 * and keys — the distributed meaning of a restart. Every name made in a test run is listed in the run's
 * temporary folder and removed from the servers by the global teardown.
 */

export interface StackNames {
  readonly topic: string;
  readonly database: string;
  readonly redisPrefix: string;
  readonly group: string;
}

const LIST = 'distributed-stacks.jsonl';

/** The names of the stack of `dataDir`, made (and listed for the teardown) on first use. */
export function stackNamesOf(dataDir: string): StackNames {
  const file = path.join(dataDir, 'stack.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as StackNames;
  const id = randomBytes(5).toString('hex');
  const names: StackNames = { topic: `pb-e2e-${id}`, database: `pb_e2e_${id}`, redisPrefix: `pb-e2e-${id}:`, group: `pb-e2e-${id}` };
  writeFileSync(file, JSON.stringify(names));
  const tmp = process.env.PUSHBASE_TEST_TMP;
  if (tmp !== undefined) appendFileSync(path.join(tmp, LIST), `${JSON.stringify(names)}\n`);
  return names;
}

/** Removes every listed stack's topic, database and Redis keys from the servers (the global teardown). */
export async function dropListedStacks(tmp: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const file = path.join(tmp, LIST);
  if (!existsSync(file)) return;
  const stacks = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as StackNames);
  if (stacks.length === 0) return;
  const admin = createKafka({ brokers: parseBrokers(env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'), clientId: 'pushbase-test-teardown' }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const topics = stacks.flatMap((s) => [s.topic, defaultAccountsTopic(s.topic)]).filter((t) => existing.has(t));
    if (topics.length > 0) await admin.deleteTopics({ topics });
    await admin.deleteGroups(stacks.map((s) => s.group)).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
  const conn = connectClickHouse(env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123');
  try {
    for (const s of stacks) for (const db of [s.database, `${s.database}_views`]) await dropDatabase(conn, db);
  } finally {
    await conn.close();
  }
  const redis = await openRedis(env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379');
  try {
    for (const s of stacks) {
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${s.redisPrefix}*`, 'COUNT', 1000);
        cursor = next;
        if (found.length > 0) await redis.del(...found);
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }
}

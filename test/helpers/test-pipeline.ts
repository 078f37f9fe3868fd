import { randomBytes } from 'node:crypto';
import { connectClickHouse, dropDatabase, migrate, type ClickHouseConnection } from '@pushbase/clickhouse';
import { defaultAccountsTopic, ensureTopic } from '@pushbase/kafka';
import type { Redis } from '@pushbase/redis';
import type { Admin } from 'kafkajs';
import { deleteTopics, KAFKA_BROKERS, randomName, requireKafka, testAdmin } from './kafka';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from './redis';

/*
 * The names a suite of the distributed pipeline's services runs on, on the test run's real Kafka,
 * ClickHouse and Redis: a topic (and its accounts topic), a migrated ClickHouse database and a Redis key
 * prefix of its own, and the environment the services read them from. Everything is removed after the
 * suite, once what the suite deferred (its services) has closed.
 */

const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

export interface TestPipeline {
  readonly admin: Admin;
  readonly redis: Redis;
  readonly conn: ClickHouseConnection;
  readonly topic: string;
  readonly prefix: string;
  readonly database: string;
  /** PUSHBASE_* for the services: the servers, the names, a projector group, a fast flush. */
  readonly vars: Record<string, string>;
}

/**
 * Registers the suite's beforeAll and afterAll (call it at the top of a test file) and returns the names,
 * set in beforeAll, and `defer`: closers run at the end, last registered first, before the names go.
 */
export function useTestPipeline(name: string): { readonly pipeline: () => TestPipeline; readonly defer: (close: () => Promise<void>) => void } {
  let p: TestPipeline | undefined;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    await requireKafka();
    const admin = await testAdmin();
    const redis = await connectTestRedis();
    const topic = randomName(name);
    await ensureTopic(admin, { topic, partitions: 3 });
    await ensureTopic(admin, { topic: defaultAccountsTopic(topic), partitions: 1 });
    const prefix = randomPrefix();
    const database = `${name.replace(/-/g, '_')}_${randomBytes(6).toString('hex')}`;
    const conn = connectClickHouse(CLICKHOUSE_URL);
    await migrate(conn, database);
    const vars = {
      PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
      PUSHBASE_KAFKA_TOPIC: topic,
      PUSHBASE_PROJECTOR_GROUP: randomName(`${name}-live`),
      PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL,
      PUSHBASE_CLICKHOUSE_DATABASE: database,
      PUSHBASE_REDIS_URL: redisUrl(),
      PUSHBASE_REDIS_PREFIX: prefix,
      PUSHBASE_PROJECTOR_FLUSH_MS: '100',
    };
    p = { admin, redis, conn, topic, prefix, database, vars };
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    if (p === undefined) return;
    await p.admin.deleteGroups([p.vars.PUSHBASE_PROJECTOR_GROUP!]).catch(() => undefined);
    await deleteTopics(p.admin, [p.topic, defaultAccountsTopic(p.topic)]);
    await p.admin.disconnect();
    await dropDatabase(p.conn, p.database);
    await dropDatabase(p.conn, `${p.database}_views`);
    await p.conn.close();
    await deleteUnder(p.redis, p.prefix);
    p.redis.disconnect();
  });
  return {
    pipeline: () => {
      if (p === undefined) throw new Error('useTestPipeline: the names are made in beforeAll');
      return p;
    },
    defer: (close) => closers.push(close),
  };
}

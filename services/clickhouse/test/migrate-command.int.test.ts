import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { command, connectClickHouse, selectRows } from '../src/client';
import { quoteIdentifier, quoteString } from '../src/sql';
import { createKafka } from '@pushbase/kafka';
import { CLICKHOUSE_URL } from './support';

/** `pushbase migrate` as shipped (dist/pushbase.js, built by jest's global setup), twice in a row. */
describe('pushbase migrate', () => {
  const conn = connectClickHouse(CLICKHOUSE_URL);
  const database = `pb_test_${randomBytes(6).toString('hex')}`;
  const topic = `pushbase-test-migrate-${randomBytes(6).toString('hex')}`;
  const admin = createKafka({ brokers: [process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'], clientId: 'migrate-test' }).admin();
  afterAll(async () => {
    await admin.connect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
    await command(conn, `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}`, 'dropping the test database');
    await conn.close();
  });

  const run = async (): Promise<Record<string, unknown>> => {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(__dirname, '..', '..', '..', 'dist', 'pushbase.js'), 'migrate'], {
      env: { ...process.env, PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL, PUSHBASE_CLICKHOUSE_DATABASE: database, PUSHBASE_KAFKA_TOPIC: topic, PUSHBASE_KAFKA_PARTITIONS: '3' },
      timeout: 30_000,
    });
    return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
  };

  it('creates the tables, then finds nothing to do', async () => {
    await expect(run()).resolves.toMatchObject({ msg: 'migrations applied', database, applied: [1, 2, 3], already_applied: [] });
    await expect(run()).resolves.toMatchObject({ applied: [], already_applied: [1, 2, 3] });
    await expect(
      selectRows(conn, `SELECT name FROM system.tables WHERE database = ${quoteString(database)} ORDER BY name`, 'tables'),
    ).resolves.toEqual([{ name: 'heads' }, { name: 'records' }, { name: 'schema_migrations' }]);
  });

  it('creates the topic of dataset events when missing, then leaves it as it is', async () => {
    await run();
    await admin.connect();
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [topic] });
      expect(meta.topics[0]?.partitions).toHaveLength(3);
    } finally {
      await admin.disconnect();
    }
    const lines = async (): Promise<string> => (await promisify(execFile)(process.execPath, [path.join(__dirname, '..', '..', '..', 'dist', 'pushbase.js'), 'migrate'], {
      env: { ...process.env, PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL, PUSHBASE_CLICKHOUSE_DATABASE: database, PUSHBASE_KAFKA_TOPIC: topic, PUSHBASE_KAFKA_PARTITIONS: '5' },
      timeout: 30_000,
    })).stdout;
    // Asked for more partitions later: the live topic is reported, never changed (datasets would move).
    const parsed = (await lines())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed).toContainEqual(expect.objectContaining({ msg: 'topic present', partitions: 3 }));
  });

  it('fails with a clear message when the configuration is wrong, before touching ClickHouse', async () => {
    await expect(
      promisify(execFile)(process.execPath, [path.join(__dirname, '..', '..', '..', 'dist', 'pushbase.js'), 'migrate'], {
        env: { ...process.env, PUSHBASE_CLICKHOUSE_DATABASE: 'x; DROP TABLE y' },
      }),
    ).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('PUSHBASE_CLICKHOUSE_DATABASE') });
  });
});

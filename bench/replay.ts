/*
 * `pushbase replay` throughput: a workload is produced to a topic of its own, then replay rebuilds it into
 * a fresh database and prefix (no live projector; the live state is empty) and the rate is printed.
 *   node --import tsx bench/replay.ts [datasets=20] [appendsPerDataset=20] [recordsPerAppend=500]
 * Uses PUSHBASE_KAFKA_BROKERS, PUSHBASE_CLICKHOUSE_URL, PUSHBASE_REDIS_URL; removes what it made.
 */
import { randomBytes } from 'node:crypto';
import { connectClickHouse, dropDatabase } from '@pushbase/clickhouse';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { createKafka, defaultAccountsTopic, ensureTopic, KafkaEventAppender, parseBrokers } from '@pushbase/kafka';
import { dropSchemaGeneration, openRedis } from '@pushbase/redis';
import { loadReplayConfig, runReplay } from '../services/projector/src';
import { KEYED, makeRecords, PLAIN } from '../services/projector/test/event-sequences';

async function main(): Promise<void> {
  const [datasets = 20, appends = 20, perAppend = 500] = process.argv.slice(2).map(Number);
  const brokers = parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092');
  const run = randomBytes(4).toString('hex');
  const topic = `pb-bench-replay-${run}`;
  const database = `pb_bench_replay_${run}`;
  const prefix = `pb-bench-replay-${run}:`;
  const admin = createKafka({ brokers }).admin();
  await admin.connect();
  await ensureTopic(admin, { topic, partitions: 3 });
  await ensureTopic(admin, { topic: defaultAccountsTopic(topic), partitions: 1 });
  const appender = new KafkaEventAppender({ connection: { brokers }, topic });
  const events: DatasetEvent[] = [];
  for (let d = 0; d < datasets; d++) {
    const keyed = d % 2 === 0;
    const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'bench', dataset: `ds${d}`, incarnation: `inc-${d}`, at: 1_700_000_000_000 } as const;
    events.push({ ...base, type: 'DatasetDefined', definition: keyed ? KEYED : PLAIN });
    for (let a = 0; a < appends; a++) events.push({ ...base, type: 'RecordsAppended', records: makeRecords(keyed, perAppend, d * 1000 + a), delete_by: keyed ? null : 'day' });
  }
  await Promise.all(events.map((e) => appender.append([e])));
  await appender.close();
  const env = { ...process.env, PUSHBASE_KAFKA_TOPIC: topic, PUSHBASE_CLICKHOUSE_DATABASE: database, PUSHBASE_REDIS_PREFIX: prefix, PUSHBASE_PROJECTOR_GROUP: `pb-bench-replay-${run}` };
  try {
    const r = await runReplay(loadReplayConfig({ progress: process.stderr.isTTY }, env));
    const s = r.seconds;
    process.stdout.write(
      `replay of ${r.events} events (${r.recordsReplayed} records; ${datasets} datasets × ${appends} appends × ${perAppend} records): ${s.toFixed(1)} s, ` +
        `${Math.round(r.events / s)} events/s, ${Math.round(r.recordsReplayed / s)} records/s; ${r.rowsWritten} rows written; rebuilt ${r.datasets} datasets, ${r.records} records\n`,
    );
  } finally {
    const conn = connectClickHouse(process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123');
    await dropDatabase(conn, database);
    await conn.close();
    const redis = await openRedis(process.env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379');
    await dropSchemaGeneration(redis, prefix);
    redis.disconnect();
    await admin.deleteGroups([env.PUSHBASE_PROJECTOR_GROUP]).catch(() => undefined);
    await admin.deleteTopics({ topics: [topic, defaultAccountsTopic(topic)] });
    await admin.disconnect();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});

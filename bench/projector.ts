/*
 * `npm run bench:projector` — prints figures; it is not a test and asserts nothing.
 *
 * Events already in Kafka → visible in ClickHouse. It fills a topic of its own with 500-record appends over
 * many datasets (the bench workload: seven fields, no unique_by), then starts a projector (the real
 * runProjector, in this process) on a fresh group and database and times it from the moment it holds its
 * partitions until every record is written (the join itself, mostly Kafka's initial rebalance delay, is
 * reported apart). In the same run it inserts the very same rows, derived by the same pure `project`,
 * straight into another fresh database through the same store, in batches of the sizes the projector
 * wrote: the ceiling the projector is compared with.
 *
 * Loopback only (PUSHBASE_KAFKA_BROKERS, PUSHBASE_CLICKHOUSE_URL); the topic and both databases are removed
 * at the end. Flags (or BENCH_<NAME>): --records 200000 --datasets 100 --partitions 4 --flush-rows 50000;
 * BENCH_VERBOSE=1 prints the projector's log lines with their times.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { ClickHouseProjectionStore, connectClickHouse, migrate, quoteIdentifier, type ClickHouseConnection } from '@pushbase/clickhouse';
import { decodeEvent, encodeEvent, type ProjectedHead, type ProjectedRow, type StreamPosition } from '@pushbase/contracts';
import { decideAppend, decideDefine, streamKey, type DatasetEvent } from '@pushbase/domain';
import { KafkaEventAppender, createKafka, defaultAccountsTopic, ensureTopic, parseBrokers } from '@pushbase/kafka';
import { loadProjectorConfig, project, runProjector, type ProjectedDataset } from '@pushbase/projector';
import { DATASET_DEFINITION, RECORDS_PER_REQUEST, makeRecords } from './workload';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string' },
    datasets: { type: 'string' },
    partitions: { type: 'string' },
    'flush-rows': { type: 'string' },
  },
});
const option = (name: keyof typeof flags, fallback: number): number => {
  const raw = flags[name] ?? process.env[`BENCH_${name.toUpperCase().replace('-', '_')}`];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
  return n;
};
const RECORDS = option('records', 200_000);
const DATASETS = option('datasets', 100);
const PARTITIONS = option('partitions', 4);
const FLUSH_ROWS = option('flush-rows', 50_000);
const BROKERS = parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092');
const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const ACCOUNT = 'bench';
const suffix = randomBytes(5).toString('hex');

const say = (line: string): void => void process.stdout.write(`${line}\n`);
const rate = (n: number, ms: number): string => `${Math.round((n / ms) * 1000).toLocaleString('en-US')}/s`;

/** Define events, then appends round-robin over the datasets, as many clients would send them. */
function workload(): DatasetEvent[] {
  const at = Date.UTC(2026, 0, 1);
  const events: DatasetEvent[] = [];
  const summaries = Array.from({ length: DATASETS }, (_, d) => {
    const decision = decideDefine({ account: ACCOUNT, id: `ds-${d}`, body: DATASET_DEFINITION, at, newIncarnation: `inc-${suffix}-${d}` }, undefined, 0);
    if (decision.outcome !== 'created') throw new Error('unreachable');
    events.push(decision.event);
    return decision.dataset;
  });
  const appends = Math.ceil(RECORDS / RECORDS_PER_REQUEST);
  for (let i = 0; i < appends; i++) {
    const dataset = summaries[i % DATASETS]!;
    events.push(decideAppend({ account: ACCOUNT, id: dataset.id, body: { data: makeRecords(i) }, at: at + i }, dataset));
  }
  return events;
}

async function freshDatabase(conn: ClickHouseConnection, name: string): Promise<ClickHouseProjectionStore> {
  await migrate(conn, name);
  return new ClickHouseProjectionStore(conn, name);
}

async function liveRecords(conn: ClickHouseConnection, database: string): Promise<number> {
  const rs = await conn.client.query({
    query: `SELECT toString(count()) AS n FROM ${quoteIdentifier(database)}.records FINAL WHERE deleted = 0 AND incarnation != ''`,
    format: 'JSONEachRow',
  });
  const [row] = await rs.json<{ n: string }>();
  return Number(row?.n ?? 0);
}

async function main(): Promise<void> {
  const topic = `pb-bench-projector-${suffix}`;
  const projected = `pb_bench_projected_${suffix}`;
  const raw = `pb_bench_raw_${suffix}`;
  const admin = createKafka({ brokers: BROKERS, clientId: 'pushbase-bench' }).admin();
  await admin.connect();
  const conn = connectClickHouse(CLICKHOUSE_URL);
  try {
    await ensureTopic(admin, { topic, partitions: PARTITIONS });
    await ensureTopic(admin, { topic: defaultAccountsTopic(topic), partitions: 1 });
    const events = workload();
    const records = events.reduce((n, e) => n + (e.type === 'RecordsAppended' ? e.records.length : 0), 0);
    say(`projector bench: ${records.toLocaleString('en-US')} records in ${events.length} events over ${DATASETS} datasets, ${PARTITIONS} partitions, writes of ≥${FLUSH_ROWS.toLocaleString('en-US')} rows`);

    // ── Fill the topic ──
    const appender = new KafkaEventAppender({ connection: { brokers: BROKERS, clientId: 'pushbase-bench' }, topic });
    let t = performance.now();
    const positions: StreamPosition[] = (await Promise.all(events.map((e) => appender.appendAt([e])))).map((p) => p[0]!);
    await appender.close();
    say(`  filled the topic in ${Math.round(performance.now() - t)} ms`);

    // ── The projector ──
    await freshDatabase(conn, projected);
    const writes: number[] = [];
    let assignedAt: number | undefined;
    const started = performance.now();
    const running = await runProjector(
      loadProjectorConfig({
        ...process.env,
        PUSHBASE_KAFKA_BROKERS: BROKERS.join(','),
        PUSHBASE_KAFKA_TOPIC: topic,
        PUSHBASE_PROJECTOR_GROUP: `pb-bench-${suffix}`,
        PUSHBASE_CLICKHOUSE_URL: CLICKHOUSE_URL,
        PUSHBASE_CLICKHOUSE_DATABASE: projected,
        PUSHBASE_PROJECTOR_FLUSH_ROWS: String(FLUSH_ROWS),
      }),
      {
        log: (level, msg, fields) => {
          if (msg === 'partitions assigned') assignedAt ??= performance.now();
          if (msg === 'written') writes.push(Number(fields?.batch_rows ?? 0));
          if (process.env.BENCH_VERBOSE) say(`  ${Math.round(performance.now() - started)} ms ${msg} ${JSON.stringify(fields ?? {})}`);
          if (level !== 'info') say(`  projector ${level}: ${msg} ${JSON.stringify(fields ?? {})}`);
        },
      },
    );
    const deadline = Date.now() + 600_000;
    while (running.projector.stats().events < events.length || running.projector.stats().rows < records) {
      if (Date.now() > deadline) throw new Error(`projector did not finish: ${JSON.stringify(running.projector.stats())}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const done = performance.now();
    await running.stop();
    const visible = await liveRecords(conn, projected);
    const projectMs = done - (assignedAt ?? started);
    say(`  projected: ${visible.toLocaleString('en-US')} records visible in ${Math.round(projectMs)} ms after the join → ${rate(records, projectMs)}`);
    say(`             (joining the group took ${Math.round((assignedAt ?? started) - started)} ms; ${writes.length} writes of ${writes.map((w) => w.toLocaleString('en-US')).join(', ')} rows)`);

    // ── The same rows straight into ClickHouse, in batches of the projector's sizes ──
    const rawStore = await freshDatabase(conn, raw);
    const held = new Map<string, ProjectedDataset>();
    const rows: ProjectedRow[] = [];
    const heads: ProjectedHead[] = [];
    events.forEach((e, i) => {
      const key = streamKey(e.account, e.dataset);
      const step = project(held.get(key), decodeEvent(encodeEvent(e)), positions[i]!);
      held.set(key, step.dataset);
      rows.push(...step.rows);
      if (step.head !== undefined) heads.push(step.head);
    });
    t = performance.now();
    let from = 0;
    for (const size of writes.length > 0 ? writes : [rows.length]) {
      const batch = rows.slice(from, from + size);
      from += size;
      const covering = new Map<string, ProjectedHead>();
      for (const h of heads) covering.set(`${streamKey(h.account, h.dataset)}/${h.incarnation}`, h);
      await rawStore.write(batch, [...covering.values()]);
    }
    const rawMs = performance.now() - t;
    say(`  raw insert: ${(await liveRecords(conn, raw)).toLocaleString('en-US')} records in ${Math.round(rawMs)} ms → ${rate(records, rawMs)}`);
    say(`  ratio projected / raw: ${(rawMs / projectMs).toFixed(2)}`);
  } finally {
    await admin.deleteTopics({ topics: [topic, defaultAccountsTopic(topic)] }).catch(() => undefined);
    await admin.disconnect();
    for (const db of [projected, raw]) await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(db)}` });
    await conn.close();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench:projector: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});

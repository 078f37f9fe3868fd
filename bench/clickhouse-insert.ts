/*
 * `npx tsx bench/clickhouse-insert.ts [batches] [rows-per-batch]` — prints figures; asserts nothing.
 *
 * The ClickHouse projection store's write rate against the server at PUSHBASE_CLICKHOUSE_URL, in a database
 * of its own (pb_bench_<random>, dropped at the end): batches of 5000 rows by default, each a store.write
 * (rows + head rows in one insert, then the heads table), rows of five fields (date, datetime, number,
 * money, string) spread over 100 datasets. In the same run, alternating batch by batch so both see the
 * same machine, the same rows go raw into a table with the same columns via the client's own insert() of
 * plain objects (numbers as JSON text, no heads): the ratio store/raw is what the store's format costs.
 * A third figure, `same_table`, sends the store's own encoded rows (no head rows, no heads table, no
 * validation) into a copy of the records table: the server's cost of the wide layout alone.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ProjectedHead, ProjectedRow } from '@pushbase/contracts';
import { parseDefinition, formatUtcMillis } from '@pushbase/domain';
import { ClickHouseProjectionStore, connectClickHouse, INDEX_GRANULARITY, migrate, quoteIdentifier } from '@pushbase/clickhouse';
import { insertBody } from '../services/clickhouse/src/client';
import { storedPlan } from '../services/clickhouse/src/layout';
import { RowBinaryWriter } from '../services/clickhouse/src/row-binary';
import { RECORDS_INSERT_COLUMNS, writeRecordsRow } from '../services/clickhouse/src/write-store';

const batches = Number(process.argv[2] ?? 20);
const perBatch = Number(process.argv[3] ?? 5000);
const url = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

const definition = parseDefinition({
  fields: {
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'At' },
    visits: { type: 'number', name: 'Visits' },
    revenue: { type: 'money', name: 'Revenue', currency_code: 'EUR' },
    page: { type: 'string', name: 'Page', optional: true },
  },
});

function batch(b: number): { rows: ProjectedRow[]; heads: ProjectedHead[] } {
  const rows: ProjectedRow[] = [];
  const heads = new Map<string, ProjectedHead>();
  for (let i = 0; i < perBatch; i++) {
    const offset = b * perBatch + i;
    const dataset = `ds-${offset % 100}`;
    const version = offset * 8192;
    const ms = 1_700_000_000_000 + offset * 1000;
    rows.push({
      account: 'bench',
      dataset,
      incarnation: 'i1',
      row_key: String(offset),
      // Every row is a new one of its dataset (offset % 100), so each takes the next slot.
      slot: Math.floor(offset / 100) + 1,
      version,
      seq: version,
      deleted: false,
      record: { day: formatUtcMillis(ms).slice(0, 10), at: formatUtcMillis(ms), visits: (offset % 977) * 1.5, revenue: offset * 100, page: `/products/item-${offset % 5000}` },
    });
    heads.set(dataset, {
      account: 'bench', dataset, incarnation: 'i1', definition, created_at: 0, updated_at: ms, record_count: 0, next_row: offset + 1,
      position: { partition: 0, offset }, version: version + 8191, deleted: false,
    });
  }
  return { rows, heads: [...heads.values()] };
}

async function main(): Promise<void> {
  const conn = connectClickHouse(url);
  const database = `pb_bench_${randomBytes(5).toString('hex')}`;
  try {
    await migrate(conn, database);
    const store = new ClickHouseProjectionStore(conn, database);
    const raw = `${quoteIdentifier(database)}.raw`;
    await conn.client.command({
      query: `CREATE TABLE ${raw} (account String, dataset String, incarnation String, row_key String, version UInt64, seq UInt64, deleted UInt8,
        num_0 Nullable(Float64), num_1 Nullable(Float64), str_0 Nullable(String), time_0 Nullable(Int64), time_1 Nullable(Int64))
        ENGINE = ReplacingMergeTree(version) ORDER BY (account, dataset, incarnation, row_key) SETTINGS index_granularity = ${INDEX_GRANULARITY}`,
    });
    const copy = `${quoteIdentifier(database)}.records_copy`;
    await conn.client.command({ query: `CREATE TABLE ${copy} AS ${store.tables.records}` });
    const times = { store: [] as number[], raw: [] as number[], same: [] as number[] };
    for (let b = 0; b < batches; b++) {
      const { rows, heads } = batch(b);
      const plainRows = rows.map((r) => ({
        account: r.account, dataset: r.dataset, incarnation: r.incarnation, row_key: r.row_key, version: r.version, seq: r.seq, deleted: 0,
        num_0: r.record?.visits, num_1: r.record?.revenue, str_0: r.record?.page,
        time_0: Date.parse(String(r.record?.day)), time_1: Date.parse(String(r.record?.at)),
      }));
      // The store's own RowBinary rows (write-store.ts), without its head rows, checks or heads table.
      const w = new RowBinaryWriter();
      const plan = storedPlan(definition);
      for (const r of rows) writeRecordsRow(w, r, '', plan, r.record);
      const encoded = w.bytes();
      let t = performance.now();
      await insertBody(conn, copy, encoded, 'the same rows', { format: 'RowBinary', columns: RECORDS_INSERT_COLUMNS });
      times.same.push(performance.now() - t);
      t = performance.now();
      await store.write(rows, heads);
      times.store.push(performance.now() - t);
      t = performance.now();
      await conn.client.insert({ table: raw, values: plainRows, format: 'JSONEachRow' });
      times.raw.push(performance.now() - t);
    }
    const rate = (ms: number[]) => Math.round((ms.length * perBatch) / (ms.reduce((a, b) => a + b, 0) / 1000));
    const median = (ms: number[]) => [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)]?.toFixed(1);
    const storeRate = rate(times.store);
    const rawRate = rate(times.raw);

    console.log(JSON.stringify({ url, batches, rows_per_batch: perBatch, store_rows_per_s: storeRate, store_median_ms: median(times.store), raw_rows_per_s: rawRate, raw_median_ms: median(times.raw), same_table_rows_per_s: rate(times.same), same_table_median_ms: median(times.same), ratio: Number((storeRate / rawRate).toFixed(2)) }));
  } finally {
    await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}` });
    await conn.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

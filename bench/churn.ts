/*
 * `npm run bench:churn -- [appends] [reads]` — prints figures; asserts nothing.
 *
 * The projection's cost with history: two datasets each receive `appends` appends of 500 records (default
 * 2,000: 1M records through the 5000-record window), one without unique_by, one with a datetime unique_by
 * whose keys keep changing. Events are folded by the projector's own `project` and written in the
 * projector's batches into a database of its own at PUSHBASE_CLICKHOUSE_URL (pb_bench_churn_<random>,
 * dropped at the end). Measured on each dataset once it first holds 5000 records ("before") and again
 * after the whole history ("after"), side by side:
 *   - rows: the dataset's rows in the records table as it stands (no FINAL: what FINAL has to read),
 *     distinct row slots, and the rows once merged (OPTIMIZE … FINAL, after everything else);
 *   - read p50/p99: the read API's query of the newest 100 records (the store's queryRecords, the SQL the
 *     records service runs), `reads` times;
 *   - load p50/p99: the projector's load of the dataset (loadMany with `values: 'dates'`), reads / 4 times.
 * The ratio after/before of each p99 is the figure the bound is about (target ≤ 1.2).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProjectedHead, ProjectedRow } from '@pushbase/contracts';
import { ClickHouseProjectionStore, ClickHouseReadModel, connectClickHouse, migrate, quoteIdentifier, type ClickHouseConnection } from '@pushbase/clickhouse';
import { project, type ProjectedDataset } from '@pushbase/projector';
import { parseRecordQuery, type DatasetDefinition, type DatasetEvent } from '@pushbase/domain';
import { selectRows } from '../services/clickhouse/src/client';
import { CHURN_PLAIN, CHURN_TIMED, churnEvents, mergeFully } from '../services/clickhouse/test/churn';

const appends = Number(process.argv[2] ?? 2000);
const reads = Number(process.argv[3] ?? 300);
const url = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const ACCOUNT = 'bench';
/** Appends folded into one write: ~4000 rows, about what the projector flushes under a steady load. */
const EVENTS_PER_WRITE = 8;
/** Appends before the first measurement: the window full, nothing evicted yet. */
const FILL = 10;

const DATASETS: readonly { readonly id: string; readonly definition: DatasetDefinition; readonly what: string }[] = [
  { id: 'plain', definition: CHURN_PLAIN, what: 'no unique_by' },
  { id: 'timed', definition: CHURN_TIMED, what: 'datetime unique_by' },
];

const quantile = (xs: readonly number[], q: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
};

interface Figures {
  rows: number;
  slots: number;
  readP50: number;
  readP99: number;
  loadP50: number;
  loadP99: number;
}

async function rowsOf(conn: ClickHouseConnection, store: ClickHouseProjectionStore, dataset: string): Promise<{ rows: number; slots: number }> {
  const [r] = await selectRows<{ rows: string; slots: string }>(
    conn,
    `SELECT toString(count()) AS rows, toString(uniqExact(row_slot)) AS slots FROM ${store.tables.records} WHERE account = '${ACCOUNT}' AND dataset = '${dataset}'`,
    'counting rows',
  );
  return { rows: Number(r?.rows ?? 0), slots: Number(r?.slots ?? 0) };
}

/** Waits until no merge of the database runs, so both measurements find the table at rest. */
async function settle(conn: ClickHouseConnection, database: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const [m] = await selectRows<{ n: string }>(conn, `SELECT toString(count()) AS n FROM system.merges WHERE database = '${database}'`, 'running merges');
    if (Number(m?.n) === 0) return;
    await sleep(100);
  }
}

/**
 * The read API's query and the projector's load of each dataset, `reads` and reads / 4 times, the datasets
 * taken in turn so that each sees the same moments of a shared machine.
 */
async function measure(conn: ClickHouseConnection, store: ClickHouseProjectionStore, readModel: ClickHouseReadModel, datasets: readonly string[]): Promise<Map<string, Figures>> {
  await settle(conn, store.tables.database);
  const query = parseRecordQuery({ order: 'desc' });
  const read = new Map<string, number[]>(datasets.map((d) => [d, []]));
  const load = new Map<string, number[]>(datasets.map((d) => [d, []]));
  // Warm-up: the first statements parse and cache what later ones reuse.
  for (let i = 0; i < 5; i++) {
    for (const dataset of datasets) {
      await readModel.queryRecords(ACCOUNT, dataset, query);
      await store.loadMany([{ account: ACCOUNT, dataset }], { values: 'dates' });
    }
  }
  for (let i = 0; i < reads; i++) {
    for (const dataset of datasets) {
      let t = performance.now();
      const page = await readModel.queryRecords(ACCOUNT, dataset, query);
      read.get(dataset)?.push(performance.now() - t);
      if (page?.total !== 5000) throw new Error(`${dataset} shows ${page?.total} records, not 5000`);
      if (i % 4 === 0) {
        t = performance.now();
        await store.loadMany([{ account: ACCOUNT, dataset }], { values: 'dates' });
        load.get(dataset)?.push(performance.now() - t);
      }
    }
  }
  const figures = new Map<string, Figures>();
  for (const dataset of datasets) {
    const r = read.get(dataset) as number[];
    const l = load.get(dataset) as number[];
    figures.set(dataset, { ...(await rowsOf(conn, store, dataset)), readP50: quantile(r, 0.5), readP99: quantile(r, 0.99), loadP50: quantile(l, 0.5), loadP99: quantile(l, 0.99) });
  }
  return figures;
}

async function main(): Promise<void> {
  if (appends < FILL) throw new Error(`at least ${FILL} appends: the first measurement needs a full window`);
  const conn = connectClickHouse(url);
  const database = `pb_bench_churn_${randomBytes(5).toString('hex')}`;
  const started = performance.now();
  try {
    await migrate(conn, database);
    const store = new ClickHouseProjectionStore(conn, database);
    const readModel = new ClickHouseReadModel(conn, database);
    const held = new Map<string, ProjectedDataset | undefined>();
    let offset = 0;
    let written = 0;
    /** Folds the next `n` events of every stream (interleaved, as one partition) and writes them in batches. */
    const feed = async (streams: readonly Generator<DatasetEvent>[], n: number): Promise<void> => {
      let rows: ProjectedRow[] = [];
      let heads = new Map<string, ProjectedHead>();
      let events = 0;
      const flush = async (): Promise<void> => {
        if (rows.length === 0 && heads.size === 0) return;
        await store.write(rows, [...heads.values()]);
        written += rows.length;
        rows = [];
        heads = new Map();
      };
      for (let i = 0; i < n; i++) {
        for (const stream of streams) {
          const next = stream.next();
          if (next.done === true) continue;
          const event: DatasetEvent = next.value;
          const step = project(held.get(event.dataset), event, { partition: 0, offset: offset++ });
          held.set(event.dataset, step.dataset);
          for (const r of step.rows) rows.push(r);
          if (step.head !== undefined) heads.set(`${event.dataset}/${step.head.incarnation}`, step.head);
          if (++events % EVENTS_PER_WRITE === 0) await flush();
        }
      }
      await flush();
    };

    // The definitions and the first 5000 records of each.
    const churned = DATASETS.map((d) => churnEvents(ACCOUNT, d.id, d.definition, appends));
    await feed(churned, 1 + FILL);
    const before = await measure(conn, store, readModel, DATASETS.map((d) => d.id));
    const fedAt = performance.now();
    await feed(churned, appends - FILL);
    const feedSeconds = (performance.now() - fedAt) / 1000;
    // Controls: the same datasets fresh (5000 records, no history), measured beside the churned ones.
    await feed(DATASETS.map((d) => churnEvents(ACCOUNT, `${d.id}-fresh`, d.definition, FILL)), 1 + FILL);
    const after = await measure(conn, store, readModel, DATASETS.flatMap((d) => [d.id, `${d.id}-fresh`]));
    await mergeFully(conn, database, 'records');
    const merged = new Map<string, { rows: number; slots: number }>();
    for (const d of DATASETS) merged.set(d.id, await rowsOf(conn, store, d.id));

    const [version] = await selectRows<{ v: string }>(conn, 'SELECT version() AS v', 'the server version');
    const fmt = (v: number, digits = 1): string => v.toFixed(digits);
    const ratio = (a: number, b: number): string => fmt(a / b, 2);
    const lines = [
      `churn: ${appends} appends of 500 records into each dataset (${fmt((appends * 500) / 1e6, 2)}M records each), ClickHouse ${version?.v ?? '?'} at ${url}`,
      `  fed ${written} rows; the churn's ${fmt(feedSeconds)} s between the measurements; ${reads} reads and ${Math.ceil(reads / 4)} loads of each dataset per measurement`,
    ];
    for (const d of DATASETS) {
      const b = before.get(d.id) as Figures;
      const a = after.get(d.id) as Figures;
      const f = after.get(`${d.id}-fresh`) as Figures;
      const m = merged.get(d.id) as { rows: number; slots: number };
      lines.push(
        `  ${d.id} (${d.what}):`,
        `    rows            before ${b.rows} (${b.slots} keys); after ${a.rows} (${a.slots} keys), ${m.rows} once merged`,
        `    read p50 / p99  before ${fmt(b.readP50)} / ${fmt(b.readP99)} ms; after ${fmt(a.readP50)} / ${fmt(a.readP99)} ms; fresh beside it ${fmt(f.readP50)} / ${fmt(f.readP99)} ms`,
        `                    after/before p50 ${ratio(a.readP50, b.readP50)}, p99 ${ratio(a.readP99, b.readP99)}; after/fresh p50 ${ratio(a.readP50, f.readP50)}, p99 ${ratio(a.readP99, f.readP99)}`,
        `    load p50 / p99  before ${fmt(b.loadP50)} / ${fmt(b.loadP99)} ms; after ${fmt(a.loadP50)} / ${fmt(a.loadP99)} ms; fresh beside it ${fmt(f.loadP50)} / ${fmt(f.loadP99)} ms`,
        `                    after/before p50 ${ratio(a.loadP50, b.loadP50)}, p99 ${ratio(a.loadP99, b.loadP99)}; after/fresh p50 ${ratio(a.loadP50, f.loadP50)}, p99 ${ratio(a.loadP99, f.loadP99)}`,
      );
    }
    lines.push(`  total ${fmt((performance.now() - started) / 1000)} s`);
    console.log(lines.join('\n'));
  } finally {
    // 18.16 may take longer to drop a database than a request may last: the bench's figures stand anyway.
    await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}` }).catch((e: unknown) => console.error(`dropping ${database}: ${String(e)} (drop it by hand if it is still there)`));
    await conn.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});

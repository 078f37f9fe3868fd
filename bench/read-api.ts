/*
 * `npm run bench:read-api -- [rounds]` — prints figures; asserts nothing.
 *
 * The read API's queries on one full dataset (5000 records of five fields, pushed as ten appends of 500)
 * in both read models: the embedded memory projection and the ClickHouse projection at
 * PUSHBASE_CLICKHOUSE_URL (a database of its own, pb_bench_<random>, dropped at the end), the events written
 * the way the projector writes them. Rounds alternate between the two modes so both see the same machine;
 * the figure is the median milliseconds per query, and for ClickHouse also the rows the server sent back
 * (the aggregates ship groups, never records).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ReadModel } from '@pushbase/contracts';
import { ClickHouseProjectionStore, ClickHouseReadModel, connectClickHouse, migrate, quoteIdentifier } from '@pushbase/clickhouse';
import { MemoryProjection } from '@pushbase/app';
import { project, type ProjectedDataset } from '@pushbase/projector';
import { EVENT_SCHEMA_VERSION, formatUtcMillis, parseAggregateQuery, parseDefinition, parseRecordQuery, type DatasetEvent } from '@pushbase/domain';

const rounds = Number(process.argv[2] ?? 30);
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

const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'bench', dataset: 'visits', incarnation: 'i1' } as const;
const events: DatasetEvent[] = [{ ...base, at: 0, type: 'DatasetDefined', definition }];
for (let p = 0; p < 10; p++) {
  const records = Array.from({ length: 500 }, (_, i) => {
    const n = p * 500 + i;
    const ms = Date.UTC(2024, 0, 1) + n * 3_600_000;
    return { day: formatUtcMillis(ms).slice(0, 10), at: formatUtcMillis(ms), visits: (n % 977) * 1.5, revenue: n * 100, page: n % 7 === 0 ? null : `/page-${n % 40}` };
  });
  events.push({ ...base, at: p + 1, type: 'RecordsAppended', records, delete_by: null });
}

const QUERIES: Record<string, (m: ReadModel) => Promise<unknown>> = {
  'records: newest 100': (m) => m.queryRecords('bench', 'visits', parseRecordQuery({ order: 'desc' })),
  'records: top 50 visits, filtered': (m) => m.queryRecords('bench', 'visits', parseRecordQuery({ sort: 'visits', order: 'desc', limit: '50', 'filter.day.gte': '2024-02-01', 'filter.page.null': 'false' })),
  'aggregate: sum revenue': (m) => m.aggregate('bench', 'visits', parseAggregateQuery({ op: 'sum', field: 'revenue' })),
  'aggregate: sum visits by page (40 groups)': (m) => m.aggregate('bench', 'visits', parseAggregateQuery({ op: 'sum', field: 'visits', group_by: 'page' })),
  'aggregate: avg visits by week of at': (m) => m.aggregate('bench', 'visits', parseAggregateQuery({ op: 'avg', field: 'visits', group_by: 'at', bucket: 'week' })),
  'aggregate: count by month of day': (m) => m.aggregate('bench', 'visits', parseAggregateQuery({ op: 'count', group_by: 'day', bucket: 'month' })),
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function main(): Promise<void> {
  const memory = new MemoryProjection();
  memory.apply(JSON.parse(JSON.stringify(events)) as DatasetEvent[]);
  const conn = connectClickHouse(url);
  const database = `pb_bench_${randomBytes(6).toString('hex')}`;
  try {
    await migrate(conn, database);
    const store = new ClickHouseProjectionStore(conn, database);
    const clickhouse = new ClickHouseReadModel(conn, database);
    let held: ProjectedDataset | undefined;
    for (const [offset, e] of (JSON.parse(JSON.stringify(events)) as DatasetEvent[]).entries()) {
      const step = project(held, e, { partition: 0, offset });
      held = step.dataset;
      await store.write(step.rows, step.head === undefined ? [] : [step.head]);
    }
    const times: Record<string, { memory: number[]; clickhouse: number[] }> = {};
    for (let r = 0; r < rounds; r++) {
      for (const [name, q] of Object.entries(QUERIES)) {
        const t = (times[name] ??= { memory: [], clickhouse: [] });
        for (const [mode, m] of [['memory', memory], ['clickhouse', clickhouse]] as const) {
          const start = performance.now();
          await q(m);
          t[mode].push(performance.now() - start);
        }
      }
    }
    console.log(`5000 records, ${rounds} rounds, median ms per query`);
    for (const [name, t] of Object.entries(times)) {
      console.log(`${name.padEnd(44)} memory ${median(t.memory).toFixed(2).padStart(7)}   clickhouse ${median(t.clickhouse).toFixed(2).padStart(7)}`);
    }
  } finally {
    await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}` });
    await conn.close();
  }
}

void main();

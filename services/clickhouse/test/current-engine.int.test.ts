import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ProjectedHead, ProjectedRow, StoredDatasetRef } from '@pushbase/contracts';
import {
  EVENT_SCHEMA_VERSION,
  formatUtcMillis,
  initialState,
  parseDefinition,
  recordsOf,
  type AggregateQueryParams,
  type DatasetEvent,
  type DatasetRecord,
  type DatasetState,
  type FilterParam,
  type RecordQueryParams,
  type State,
} from '@pushbase/domain';
import { CLICKHOUSE_IMAGE } from '../../../deploy/local/containers';
import { describeReadApiContract } from '../../../test/contract/read-api.contract';
import { command, connectClickHouse, selectRows, type ClickHouseConnection } from '../src/client';
import { databaseExists, dropDatabase, listListedHeads, listStoredHeads, promoteProjection } from '../src/inventory';
import { migrate, MIGRATIONS, tablesIn } from '../src/migrations';
import { quoteIdentifier, quoteString } from '../src/sql';
import { ClickHouseProjectionStore } from '../src/write-store';
import { DatasetViews, viewName } from '../src/views';
import { connectChdb, type ChdbConnection } from './chdb';
import { CHURN_PLAIN, CHURN_TIMED, churnEvents, mergeFully, recreateEvents } from './churn';
import { CLICKHOUSE_URL, emptyBatch, plain, projectEvent, projectionIn, pureFold, type Batch, type Projection } from './support';

/*
 * What pushbase sends ClickHouse, on the oldest engine it supports and on a current one, in the same test:
 * the int tests' ClickHouse server over HTTP (Debian's 18.16 here, PUSHBASE_CLICKHOUSE_URL) and chDB, the
 * ClickHouse 26.7 engine in this process (chdb.ts). Every statement comes from the production modules
 * (migrate, the store's writes, loads and read API, the views and their reconcile, replay's promotion),
 * and each answer of one engine is compared with the other's. docs/clickhouse.md says what runs where.
 */

/** The engine chDB pins (test/chdb/package.json's `chdb`, whose `@chdb/lib-linux-x64-gnu` carries it). */
const CURRENT = /^26\.7\./;

interface Engine {
  readonly conn: ClickHouseConnection;
  readonly version: string;
}

/** The server's INSERT bodies, as client.ts sends them (the chDB connection records its own). */
function recordingBodies(conn: ClickHouseConnection): { conn: ClickHouseConnection; bodies: { query: string; body: Buffer }[] } {
  const bodies: { query: string; body: Buffer }[] = [];
  const client = new Proxy(conn.client, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (prop !== 'exec') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      return async (params: Parameters<typeof target.exec>[0]) => {
        if (!('values' in params) || params.values === undefined) return target.exec(params);
        const chunks: Buffer[] = [];
        for await (const chunk of params.values as AsyncIterable<Buffer>) chunks.push(Buffer.from(chunk));
        const body = Buffer.concat(chunks);
        bodies.push({ query: params.query, body });
        return target.exec({ ...params, values: Readable.from([body]) });
      };
    },
  });
  return { conn: { ...conn, client }, bodies };
}

let server: Engine & { bodies: { query: string; body: Buffer }[] };
let chdb: ChdbConnection;
let current: Engine;
const both = (): readonly Engine[] => [server, current];

beforeAll(async () => {
  const raw = connectClickHouse(CLICKHOUSE_URL);
  let version: string;
  try {
    version = (await selectRows<{ v: string }>(raw, 'SELECT version() AS v', 'the server version'))[0]?.v ?? '';
  } catch (e) {
    await raw.close();
    throw new Error(`ClickHouse at ${CLICKHOUSE_URL} is needed by this suite (npm run services:up): ${e instanceof Error ? e.message : String(e)}`);
  }
  const recorded = recordingBodies(raw);
  server = { conn: recorded.conn, version, bodies: recorded.bodies };
  // No skip: a chDB that cannot load (no engine package for this platform, a Node it does not run on) fails here.
  chdb = await connectChdb();
  current = { conn: chdb, version: chdb.version };
  // The first run on a machine installs chdb (scripts/ensure-chdb.js): ~540 MB from the registry.
}, 600_000);

/** Runs `f` on both engines; its two answers must be equal, and the server's is returned. */
async function alike<T>(f: (e: Engine) => Promise<T>, normalise: (v: T) => unknown = (v) => v): Promise<T> {
  const [onServer, onCurrent] = await Promise.all([f(server), f(current)]);
  expect(normalise(onCurrent)).toEqual(normalise(onServer));
  return onServer;
}

/** A database name of its own, the same on both engines, dropped (with its views database) at the end. */
const created: string[] = [];
afterAll(async () => {
  for (const name of created) for (const e of both()) await dropDatabase(e.conn, name);
  await server?.conn.close();
  await chdb?.close();
});
function freshDatabase(suffix = ''): string {
  const name = `pb_test_${randomBytes(6).toString('hex')}${suffix}`;
  created.push(name, `${name}_views`);
  return name;
}

// 18.16 prints the epoch, its zero Date and DateTime, as 0000-00-00 (current versions print 1970-01-01): the
// same value, read here as the epoch.
const epoch = (v: unknown): unknown => (v === '0000-00-00' ? '1970-01-01' : v === '0000-00-00 00:00:00' ? '1970-01-01 00:00:00' : v);
const epochRows = (rows: readonly Record<string, unknown>[]): unknown => rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, epoch(v)])));

it('runs chDB 26.7, the release the server images name', () => {
  expect(current.version).toMatch(CURRENT);
  expect(server.version).toMatch(/^\d+\.\d+\./);
  // The testcontainers and compose images stay in step with the engine proved here.
  const release = current.version.split('.').slice(0, 2).join('.');
  expect(CLICKHOUSE_IMAGE).toBe(`clickhouse/clickhouse-server:${release}`);
  expect(readFileSync(join(__dirname, '../../../deploy/compose.yaml'), 'utf8')).toContain(`image: clickhouse/clickhouse-server:${release}\n`);
});

describe('migrations', () => {
  it('create the same tables on both, and a second run sends nothing but its reads', async () => {
    const database = freshDatabase();
    const first = await alike((e) => migrate(e.conn, database));
    expect(first.applied).toEqual(MIGRATIONS.map((m) => m.version));
    // Columns, types, ALIAS expressions, engines with their keys and index_granularity: the same text on both.
    const schema = (e: Engine) =>
      Promise.all([
        selectRows(
          e.conn,
          `SELECT table, name, type, default_kind, default_expression FROM system.columns WHERE database = ${quoteString(database)} ORDER BY table, name`,
          'the columns',
        ),
        selectRows(e.conn, `SELECT name, engine_full FROM system.tables WHERE database = ${quoteString(database)} ORDER BY name`, 'the tables'),
      ]);
    const [columns, tables] = await alike(schema);
    expect(columns).toContainEqual({ table: 'records', name: 'num_0', type: 'Nullable(Float64)', default_kind: 'ALIAS', default_expression: 'reinterpretAsFloat64(reinterpretAsString(num_0_bits))' });
    expect(tables).toContainEqual({ name: 'records', engine_full: 'ReplacingMergeTree(version) ORDER BY (account, dataset, row_slot) SETTINGS index_granularity = 512' });
    await expect(alike((e) => migrate(e.conn, database))).resolves.toMatchObject({ applied: [], alreadyApplied: MIGRATIONS.map((m) => m.version) });
    // Each step again, unrecorded (a crash between a step and its record): a no-op on both.
    for (const m of MIGRATIONS) for (const statement of m.up(tablesIn(database))) await alike((e) => command(e.conn, statement, `migration ${m.version} again`));
    for (const m of MIGRATIONS) await alike(async (e) => m.run?.(e.conn, tablesIn(database)));
    await alike(schema);
  });

  it('bring a records table of the old layout to row slots alike: live rows into slots 1…n by seq, no tombstones', async () => {
    const database = freshDatabase();
    const head = (incarnation: string, count: number, offset: number) =>
      JSON.stringify({ incarnation, definition: NAMES, created_at: 1, updated_at: 2, record_count: count, next_row: 9, position: { partition: 0, offset } });
    const old = [
      { account: 'acc', dataset: 'd', incarnation: '', row_key: '', version: 90, seq: 0, deleted: 0, head: head('i2', 3, 9) },
      { account: 'acc', dataset: 'd', incarnation: 'i2', row_key: '0', version: 10, seq: 10, deleted: 0, str_0: 'zero' },
      { account: 'acc', dataset: 'd', incarnation: 'i2', row_key: '0', version: 40, seq: 40, deleted: 1 },
      { account: 'acc', dataset: 'd', incarnation: 'i2', row_key: '5', version: 30, seq: 30, deleted: 0, str_0: 'five' },
      { account: 'acc', dataset: 'd', incarnation: 'i2', row_key: '2', version: 20, seq: 20, deleted: 0, str_0: 'two' },
      { account: 'acc', dataset: 'd', incarnation: 'i2', row_key: '3', version: 50, seq: 50, deleted: 0, str_0: 'three' },
      { account: 'acc', dataset: 'd', incarnation: 'i1', row_key: '7', version: 5, seq: 5, deleted: 0, str_0: 'stale' },
      { account: 'acc', dataset: 'e', incarnation: '', row_key: '', version: 70, seq: 0, deleted: 1, head: head('g1', 0, 7) },
      { account: 'acc', dataset: 'e', incarnation: 'g1', row_key: '1', version: 69, seq: 69, deleted: 1 },
    ];
    const rows = await alike(async (e) => {
      await migrate(e.conn, database, MIGRATIONS.slice(0, 2));
      await command(e.conn, `INSERT INTO ${tablesIn(database).records} FORMAT JSONEachRow ${old.map((r) => JSON.stringify(r)).join('\n')}`, 'rows of the old layout');
      await migrate(e.conn, database);
      return selectRows(e.conn, `SELECT dataset, row_slot, incarnation, record_key, toString(version) AS v, str_0 FROM ${tablesIn(database).records} FINAL ORDER BY dataset, row_slot`, 'the slotted rows');
    });
    expect(rows).toEqual([
      { dataset: 'd', row_slot: 0, incarnation: '', record_key: '', v: '90', str_0: null },
      { dataset: 'd', row_slot: 1, incarnation: 'i2', record_key: '2', v: '20', str_0: 'two' },
      { dataset: 'd', row_slot: 2, incarnation: 'i2', record_key: '5', v: '30', str_0: 'five' },
      { dataset: 'd', row_slot: 3, incarnation: 'i2', record_key: '3', v: '50', str_0: 'three' },
      { dataset: 'e', row_slot: 0, incarnation: '', record_key: '', v: '70', str_0: null },
    ]);
  });
});

// ── A projector's writes: every field kind, edge values, rewrites, truncation, replace, delete, re-create ──

const at = 1_700_000_000_000;
const DAY = 86_400_000;
const base = (account: string, dataset: string, incarnation: string) => ({ schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION, account, dataset, incarnation, at });
const dt = (ms: number): string => formatUtcMillis(ms);

const SALES = parseDefinition({
  fields: {
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'At' },
    amount: { type: 'money', name: 'Amount', currency_code: 'EUR' },
    ratio: { type: 'percentage', name: 'Ratio' },
    n: { type: 'number', name: 'N', optional: true },
    took: { type: 'duration', name: 'Took', time_unit: 'seconds', optional: true },
    name: { type: 'string', name: 'Name', optional: true },
  },
});
const TEAMS = parseDefinition({ fields: { team: { type: 'string', name: 'Team' }, score: { type: 'number', name: 'Score', optional: true } }, unique_by: ['team'] });
// Keys that are the records table's own column names: a view must keep its filter and order (views.ts).
const COLUMNS = parseDefinition({
  fields: {
    deleted: { type: 'number', name: 'Deleted' },
    seq: { type: 'number', name: 'Seq' },
    account: { type: 'string', name: 'Account' },
    incarnation: { type: 'string', name: 'Incarnation' },
    num_0: { type: 'string', name: 'Num 0' },
    time_0: { type: 'date', name: 'Time 0' },
    version: { type: 'datetime', name: 'Version' },
  },
});
const LOG = parseDefinition({ fields: { day: { type: 'date', name: 'Day' }, v: { type: 'number', name: 'V' } } });
const NAMES = parseDefinition({ fields: { name: { type: 'string', name: 'Name' } } });

const NUMBERS = [0, -0, 1, -1, 0.1, 1 / 3, 5e-324, -2.2250738585072014e-308, 1e15, 1e21, 123456.789, Number.MAX_VALUE, -Number.MAX_SAFE_INTEGER];
const STRINGS = ['', 'a', "o'k", 'back\\slash', 'line\nbreak\ttab', 'nul\u0000byte', 'ä é', '😀', '\uffff', 'lone \ud800 surrogate'];
// A view shows dates and datetimes truly from 1970 to 2105 (views.ts); the read API and loads every year 0000–9999.
const IN_VIEW_RANGE = [0, 1, DAY - 1, Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2105, 11, 31, 23, 59, 59)];

/** The events of one account, each record a fresh object (project.ts knows rows by identity, as decoded from the log). */
function events(account: string): DatasetEvent[] {
  const sales = (i: number): DatasetRecord => ({
    day: dt(Math.floor((IN_VIEW_RANGE[i % IN_VIEW_RANGE.length] as number) / DAY) * DAY).slice(0, 10),
    at: dt(IN_VIEW_RANGE[(i + 2) % IN_VIEW_RANGE.length] as number),
    amount: (i % 7) * 100 - 250,
    ratio: NUMBERS[i % NUMBERS.length] as number,
    n: i % 4 === 3 ? null : (NUMBERS[(i * 5) % NUMBERS.length] as number),
    took: i % 5 === 4 ? null : i * 60.5,
    name: i % 6 === 5 ? null : (STRINGS[i % STRINGS.length] as string),
  });
  const longId = `a${'.b'.repeat(49)}z`;
  return [
    { ...base(account, 'sales.by-day_1', 's1'), type: 'DatasetDefined', definition: SALES },
    { ...base(account, 'sales.by-day_1', 's1'), type: 'RecordsAppended', records: Array.from({ length: 20 }, (_, i) => sales(i)), delete_by: null },
    { ...base(account, 'sales.by-day_1', 's1'), type: 'RecordsAppended', records: Array.from({ length: 13 }, (_, i) => sales(i + 20)), delete_by: null },
    { ...base(account, 'teams', 't1'), type: 'DatasetDefined', definition: TEAMS },
    { ...base(account, 'teams', 't1'), type: 'RecordsAppended', records: STRINGS.map((team, i) => ({ team, score: i })), delete_by: null },
    // Rewrites of unique keys: tombstones of the old rows and new rows, in a later write (another part).
    { ...base(account, 'teams', 't1'), type: 'RecordsAppended', records: [{ team: "o'k", score: null }, { team: '😀', score: -0 }], delete_by: null },
    { ...base(account, 'cols', 'c1'), type: 'DatasetDefined', definition: COLUMNS },
    {
      ...base(account, 'cols', 'c1'),
      type: 'RecordsAppended',
      records: [3, 1, 2].map((k) => ({ deleted: k % 2, seq: 10 - k, account: `k${k}`, incarnation: 'other', num_0: `n${k}`, time_0: `2024-01-0${k}`, version: dt(Date.UTC(2024, 0, k)) })),
      delete_by: null,
    },
    // More than the 5000 records a dataset holds, with delete_by: the oldest days go (the loads read their time slots).
    { ...base(account, 'log', 'l1'), type: 'DatasetDefined', definition: LOG },
    { ...base(account, 'log', 'l1'), type: 'RecordsAppended', records: Array.from({ length: 500 }, (_, i) => ({ day: dt(Date.UTC(2024, 0, 1) + (i % 90) * DAY).slice(0, 10), v: i })), delete_by: null },
    ...Array.from({ length: 10 }, (_, j): DatasetEvent => ({
      ...base(account, 'log', 'l1'),
      type: 'RecordsAppended',
      records: Array.from({ length: 500 }, (_, i) => ({ day: dt(Date.UTC(2023, 0, 1) + ((i * 7 + j) % 400) * DAY).slice(0, 10), v: j * 1000 + i })),
      delete_by: 'day',
    })),
    { ...base(account, 'snap', 'r1'), type: 'DatasetDefined', definition: NAMES },
    { ...base(account, 'snap', 'r1'), type: 'RecordsAppended', records: [{ name: 'before' }, { name: 'replaced' }], delete_by: null },
    { ...base(account, 'snap', 'r1'), type: 'RecordsReplaced', records: [{ name: 'after' }] },
    { ...base(account, 'gone', 'g1'), type: 'DatasetDefined', definition: NAMES },
    { ...base(account, 'gone', 'g1'), type: 'RecordsAppended', records: [{ name: 'x' }], delete_by: null },
    { ...base(account, 'gone', 'g1'), type: 'DatasetDeleted' },
    // Re-created with other fields: a new incarnation (one with a quote and a backslash, which views quote).
    { ...base(account, 'again', 'a1'), type: 'DatasetDefined', definition: LOG },
    { ...base(account, 'again', 'a1'), type: 'RecordsAppended', records: [{ day: '2024-05-01', v: 1 }], delete_by: null },
    { ...base(account, 'again', 'a1'), type: 'DatasetDeleted' },
    { ...base(account, 'again', "a'2\\z"), type: 'DatasetDefined', definition: NAMES },
    { ...base(account, 'again', "a'2\\z"), type: 'RecordsAppended', records: [{ name: 'new' }], delete_by: null },
    // A view name too long for a file name: cut and hashed (views.ts).
    { ...base(account, longId, 'x1'), type: 'DatasetDefined', definition: NAMES },
    { ...base(account, longId, 'x1'), type: 'RecordsAppended', records: [{ name: 'long' }], delete_by: null },
  ];
}

/** The projector's batches of `events`: folded once by its own `project`, the same rows and heads for both engines. */
function batches(evs: readonly DatasetEvent[], perBatch: number): Batch[] {
  let state: State = initialState();
  const out: Batch[] = [];
  evs.forEach((e, offset) => {
    if (offset % perBatch === 0) out.push(emptyBatch());
    state = projectEvent(state, e, { partition: 0, offset }, out[out.length - 1] as Batch);
  });
  return out;
}

const refsOf = (evs: readonly DatasetEvent[]): StoredDatasetRef[] => [...new Map(evs.map((e) => [`${e.account}/${e.dataset}`, { account: e.account, dataset: e.dataset }])).values()];

describe("the projector's writes, loads and the read API's statements", () => {
  const database = freshDatabase();
  const account = `acme-${process.pid}`;
  const evs = events(account);
  const stores = new Map<Engine, Projection>();
  const views = new Map<Engine, DatasetViews>();
  const projection = (e: Engine): Projection => stores.get(e) as Projection;

  beforeAll(async () => {
    for (const e of both()) {
      await migrate(e.conn, database);
      views.set(e, new DatasetViews(e.conn, database, `${database}_views`, { onViewError: (name, err) => { throw new Error(`view ${name}: ${String(err)}`); } }));
      stores.set(e, projectionIn(e.conn, database, { views: views.get(e) as DatasetViews, onViewsError: (err) => { throw err; } }));
    }
    const sent = server.bodies.length;
    const got = chdb.bodies.length;
    // Several events to a write, as the projector batches them: several parts, so FINAL has versions to collapse.
    for (const b of batches(evs, 4)) await alike((e) => projection(e).store.write(b.rows as readonly ProjectedRow[], [...b.heads.values()] as readonly ProjectedHead[]));
    // Views follow the writes in the background (a failure throws in onViewError: viewsSettled rejects).
    for (const e of both()) await projection(e).store.viewsSettled();
    // The same bodies, byte for byte, went to both: RowBinary to records, JSONEachRow to heads.
    const sentBodies = server.bodies.slice(sent);
    expect(sentBodies.map((b) => b.query)).toEqual(chdb.bodies.slice(got).map((b) => b.query));
    expect(Buffer.concat(chdb.bodies.slice(got).map((b) => b.body)).equals(Buffer.concat(sentBodies.map((b) => b.body)))).toBe(true);
    expect(new Set(sentBodies.map((b) => /FORMAT (\w+)$/.exec(b.query)?.[1]))).toEqual(new Set(['RowBinary', 'JSONEachRow']));
  });

  it('loads every dataset as the pure fold holds it, alike on both (all values, and the time slots only)', async () => {
    const refs = refsOf(evs);
    const fold = pureFold(JSON.parse(JSON.stringify(evs)) as DatasetEvent[]);
    const all = await alike((e) => projection(e).store.loadMany(refs), (ls) => ls.map((l) => l && { position: l.position, state: plain(l.state) }));
    // Lone surrogates are stored as U+FFFD (layout.ts): the one value that does not come back as the fold holds it.
    const wellFormed = (v: unknown): unknown => JSON.parse(JSON.stringify(v).replace(/\\ud800/g, '\ufffd'));
    expect(wellFormed(all.map((l) => plain(l?.state)))).toEqual(wellFormed(refs.map((r) => plain(fold.get(r.account)?.get(r.dataset)))));
    expect(all.filter((l) => l?.state === undefined).length).toBe(1); // gone
    await alike((e) => projection(e).store.loadMany(refs, { values: 'dates' }), (ls) => ls.map((l) => l && { position: l.position, state: plain(l.state) }));
    for (const r of refs) await alike((e) => projection(e).store.load(r.account, r.dataset), (l) => l && { position: l.position, state: plain(l.state) });
  });

  it('lists, counts and reads the datasets alike', async () => {
    const listing = await alike((e) => projection(e).readModel.listDatasets(account));
    expect(listing.map((d) => d.id)).toEqual(refsOf(evs).map((r) => r.dataset).filter((id) => id !== 'gone').sort());
    await alike((e) => projection(e).heads.count(account));
    for (const r of refsOf(evs)) {
      await alike((e) => projection(e).heads.get(r.account, r.dataset));
      await alike((e) => projection(e).readModel.listRecords(r.account, r.dataset));
    }
    await alike((e) => listStoredHeads(e.conn, database));
    await alike((e) => listListedHeads(e.conn, database));
  });

  it("answers the read API's filters, sorts, pages and aggregates alike", async () => {
    const filter = (field: string, op: FilterParam['op'], value: string): FilterParam => ({ field, op, value, param: op === 'eq' ? `filter.${field}` : `filter.${field}.${op}` });
    const id = 'sales.by-day_1';
    const queries: RecordQueryParams[] = [
      { filters: [], sort: null, order: 'asc', limit: 100, offset: 0 },
      { filters: [], sort: null, order: 'desc', limit: 7, offset: 3 },
      ...['day', 'at', 'amount', 'ratio', 'n', 'took', 'name'].flatMap((f): RecordQueryParams[] => [
        { filters: [], sort: f, order: 'asc', limit: 100, offset: 0 },
        { filters: [filter(f, 'null', 'false')], sort: f, order: 'desc', limit: 5, offset: 2 },
      ]),
      ...(['eq', 'lt', 'lte', 'gt', 'gte'] as const).flatMap((op): RecordQueryParams[] => [
        { filters: [filter('ratio', op, '0.1')], sort: 'ratio', order: 'asc', limit: 100, offset: 0 },
        { filters: [filter('n', op, '5e-324')], sort: null, order: 'asc', limit: 100, offset: 0 },
        { filters: [filter('day', op, '2024-02-29')], sort: 'day', order: 'asc', limit: 100, offset: 0 },
        { filters: [filter('at', op, '1970-01-01T00:00:00.001Z')], sort: 'at', order: 'desc', limit: 100, offset: 0 },
      ]),
      { filters: [filter('name', 'eq', "o'k")], sort: null, order: 'asc', limit: 100, offset: 0 },
      { filters: [filter('name', 'eq', 'nul\u0000byte')], sort: null, order: 'asc', limit: 100, offset: 0 },
      { filters: [filter('name', 'null', 'true')], sort: null, order: 'asc', limit: 100, offset: 0 },
    ];
    for (const q of queries) {
      const page = await alike((e) => projection(e).readModel.queryRecords(account, id, q));
      expect(page).toBeDefined();
    }
    // Every op, alone and by a string; every bucket of a date and of a datetime (the SQL arithmetic of read-sql.ts).
    const aggregates: AggregateQueryParams[] = [
      ...(['count', 'sum', 'avg', 'min', 'max'] as const).flatMap((op) => [null, 'name'].map((groupBy) => ({ op, field: op === 'count' ? null : 'took', groupBy, bucket: null, filters: [] }))),
      ...(['day', 'at'] as const).flatMap((groupBy) => (['day', 'week', 'month'] as const).map((bucket) => ({ op: 'sum' as const, field: 'amount', groupBy, bucket, filters: [] }))),
    ];
    for (const q of aggregates) await alike((e) => projection(e).readModel.aggregate(account, id, q));
    await alike((e) => projection(e).readModel.aggregate(account, 'log', { op: 'sum', field: 'v', groupBy: 'day', bucket: 'month', filters: [filter('v', 'gte', '100')] }));
    await alike((e) => projection(e).readModel.aggregate(account, 'teams', { op: 'max', field: 'score', groupBy: 'team', bucket: null, filters: [] }));
  });

  it("shows the same rows in every dataset's view, and reconcile finds nothing to mend right after", async () => {
    const viewsDb = `${database}_views`;
    const listViews = (e: Engine) =>
      selectRows<{ name: string }>(e.conn, `SELECT name FROM system.tables WHERE database = ${quoteString(viewsDb)} ORDER BY name`, 'the views').then((r) => r.map((v) => v.name));
    const names = await alike(listViews);
    const live = refsOf(evs).filter((r) => r.dataset !== 'gone');
    expect(names).toEqual(live.map((r) => viewName(r.account, r.dataset)).sort());
    for (const name of names) {
      await alike(
        (e) => selectRows<Record<string, unknown>>(e.conn, `SELECT * FROM ${quoteIdentifier(viewsDb)}.\`${name}\``, `reading ${name}`),
        epochRows,
      );
    }
    // The views were made by the writes; reconcile compares what each engine stores of their queries with
    // what it would make. It must recognise its own views on both, or it would recreate them at every start.
    await expect(alike((e) => (views.get(e) as DatasetViews).reconcile())).resolves.toEqual({ created: 0, dropped: 0, failed: 0 });
    await expect(alike((e) => new DatasetViews(e.conn, database, viewsDb).reconcile())).resolves.toEqual({ created: 0, dropped: 0, failed: 0 });

    // A view of the form before `_pb_seq` (its keys could shadow columns) is replaced once, then left alone.
    const name = viewName(account, 'snap');
    const view = `${quoteIdentifier(viewsDb)}.\`${name}\``;
    for (const e of both()) {
      await command(e.conn, `DROP TABLE ${view}`, 'dropping a view');
      await command(
        e.conn,
        `CREATE VIEW ${view} AS SELECT str_0 AS \`name\` FROM ${tablesIn(database).records} FINAL WHERE account = ${quoteString(account)} AND dataset = 'snap' AND incarnation = 'r1' AND deleted = 0 ORDER BY seq`,
        'an old-form view',
      );
    }
    await expect(alike((e) => new DatasetViews(e.conn, database, viewsDb).reconcile())).resolves.toEqual({ created: 1, dropped: 0, failed: 0 });
    await expect(alike((e) => new DatasetViews(e.conn, database, viewsDb).reconcile())).resolves.toEqual({ created: 0, dropped: 0, failed: 0 });
    await alike((e) => selectRows(e.conn, `SELECT * FROM ${view}`, 'the mended view'));
  });
});

describe('row slots: a long history keeps a bounded number of rows', () => {
  it('stores at most the window and the head per dataset on both engines, and reads the fold', async () => {
    const database = freshDatabase();
    const account = 'churn';
    const evs: DatasetEvent[] = [...churnEvents(account, 'plain', CHURN_PLAIN, 24), ...churnEvents(account, 'timed', CHURN_TIMED, 24), ...recreateEvents(account, 'recreated', 6)];
    const stores = new Map<Engine, Projection>();
    for (const e of both()) {
      await migrate(e.conn, database);
      stores.set(e, projectionIn(e.conn, database));
    }
    for (const b of batches(evs, 5)) await alike((e) => (stores.get(e) as Projection).store.write(b.rows as readonly ProjectedRow[], [...b.heads.values()] as readonly ProjectedHead[]));
    const stored = await alike(async (e) => {
      await mergeFully(e.conn, database, 'records');
      return selectRows<{ dataset: string; rows: string; slots: string; most: string }>(
        e.conn,
        `SELECT dataset, toString(count()) AS rows, toString(uniqExact(row_slot)) AS slots, toString(max(row_slot)) AS most FROM ${tablesIn(database).records} GROUP BY dataset ORDER BY dataset`,
        'counting stored rows',
      );
    });
    expect(stored).toEqual([
      { dataset: 'plain', rows: '5001', slots: '5001', most: '5000' },
      { dataset: 'recreated', rows: '1501', slots: '1501', most: '1500' },
      { dataset: 'timed', rows: '5001', slots: '5001', most: '5000' },
    ]);
    const fold = pureFold(JSON.parse(JSON.stringify(evs)) as DatasetEvent[]);
    for (const id of ['plain', 'timed', 'recreated']) {
      const records = await alike((e) => (stores.get(e) as Projection).readModel.listRecords(account, id));
      expect(records).toEqual(recordsOf(fold.get(account)?.get(id) as DatasetState));
    }
  }, 600_000);
});

describe("replay's promotion of a rebuilt projection", () => {
  it('moves the tables with one RENAME on both, and the views read the promoted tables', async () => {
    const live = freshDatabase();
    const fresh = freshDatabase('_fresh');
    const retired = freshDatabase('_retired');
    const account = `acme-${process.pid}-replay`;
    const evs = events(account).filter((e) => e.dataset === 'snap' || e.dataset === 'teams' || e.dataset === 'gone');
    // The live projection without `snap` and before `gone` was deleted; the rebuilt one holds every event.
    const before = evs.filter((e) => e.dataset === 'teams' || (e.dataset === 'gone' && e.type !== 'DatasetDeleted'));
    const after = evs;
    const swapped = await alike(async (e) => {
      await migrate(e.conn, live);
      await migrate(e.conn, fresh);
      const views = new DatasetViews(e.conn, live, `${live}_views`);
      const store = new ClickHouseProjectionStore(e.conn, live, { views });
      for (const b of batches(before, 10)) await store.write(b.rows, [...b.heads.values()]);
      await store.viewsSettled();
      for (const b of batches(after, 10)) await new ClickHouseProjectionStore(e.conn, fresh).write(b.rows, [...b.heads.values()]);
      await promoteProjection(e.conn, { fresh, live, retired });
      const mended = await views.reconcile();
      return { mended, fresh: await databaseExists(e.conn, fresh), retired: (await listStoredHeads(e.conn, retired)).map((h) => h.dataset) };
    });
    // As replay does after the swap: the views follow the promoted datasets (snap made, gone dropped).
    expect(swapped).toEqual({ mended: { created: 1, dropped: 1, failed: 0 }, fresh: true, retired: ['gone', 'teams'] });
    const heads = await alike((e) => listStoredHeads(e.conn, live));
    expect(heads.map((h) => [h.dataset, h.deleted])).toEqual([
      ['gone', true],
      ['snap', false],
      ['teams', false],
    ]);
    await alike((e) => selectRows(e.conn, `SELECT * FROM ${quoteIdentifier(`${live}_views`)}.\`${viewName(account, 'snap')}\``, 'a view after the swap'));
    await alike((e) => dropDatabase(e.conn, retired).then(() => databaseExists(e.conn, retired)));
  });
});

// The read API contract's random datasets and queries, each answer the same from both engines (and the
// contract checks it against the pure fold's reference).
describeReadApiContract(
  'ClickHouse server and chDB 26.7 alike',
  async () => {
    const database = freshDatabase();
    const stores = await Promise.all(
      both().map(async (e) => {
        await migrate(e.conn, database);
        return projectionIn(e.conn, database);
      }),
    );
    const [onServer, onCurrent] = stores as [Projection, Projection];
    const pair = async <T>(f: (s: Projection) => Promise<T>): Promise<T> => {
      const [a, b] = await Promise.all([f(onServer), f(onCurrent)]);
      expect(b).toEqual(a);
      return a;
    };
    let state: State = initialState();
    let offset = 0;
    return {
      readModel: {
        listDatasets: (account) => pair((s) => s.readModel.listDatasets(account)),
        listRecords: (account, id) => pair((s) => s.readModel.listRecords(account, id)),
        queryRecords: (account, id, q) => pair((s) => s.readModel.queryRecords(account, id, q)),
        aggregate: (account, id, q) => pair((s) => s.readModel.aggregate(account, id, q)),
      },
      load: async (events) => {
        const batch = emptyBatch();
        for (const e of JSON.parse(JSON.stringify(events)) as DatasetEvent[]) state = projectEvent(state, e, { partition: 0, offset: offset++ }, batch);
        await pair((s) => s.store.write(batch.rows, [...batch.heads.values()]));
      },
      cleanup: () => Promise.resolve(),
    };
  },
  6,
);

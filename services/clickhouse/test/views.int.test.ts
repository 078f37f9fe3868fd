import fc from 'fast-check';
import {
  EVENT_SCHEMA_VERSION,
  formatUtcMillis,
  initialState,
  parseDefinition,
  parseRecordQuery,
  type DatasetDefinition,
  type DatasetEvent,
  type DatasetRecord,
  type FieldType,
  type FieldValue,
  type State,
} from '@pushbase/domain';
import { command, selectRows, type ClickHouseConnection } from '../src/client';
import { loadClickHouseConfig } from '../src/config';
import { quoteIdentifier, quoteString } from '../src/sql';
import { ClickHouseProjectionStore } from '../src/write-store';
import { DatasetViews, viewName } from '../src/views';
import { emptyBatch, projectEvent, testDatabase, writeBatch, type TestDatabase } from './support';

/*
 * The Grafana-ready views against a real ClickHouse (18.16 here): a SELECT on a dataset's view returns
 * exactly the records the read side serves (listRecords), field by field under the field's own key, for
 * every field kind; views follow creates, deletes and re-creates of a dataset; reconcile mends views a
 * crash or a replay left out of step.
 */

const DAY = 86_400_000;
// A view shows dates and datetimes from 1970 to the end of 2105 (views.ts says why); the property stays inside.
const LAST_MS = Date.UTC(2106, 0, 1) - 1;
const base = (account: string, dataset: string, incarnation: string) => ({
  schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION,
  account,
  dataset,
  incarnation,
  at: 1_700_000_000_000,
});

const valueArb = (type: FieldType): fc.Arbitrary<FieldValue> => {
  switch (type) {
    case 'number':
    case 'percentage':
    case 'duration':
      return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(-0, 5e-324, 0.1, 1 / 3));
    case 'money':
      return fc.maxSafeInteger();
    case 'string':
      return fc.oneof(fc.string({ unit: 'grapheme', maxLength: 100 }), fc.constantFrom('', "'\\\n\t", '😀'));
    case 'date':
      return fc.integer({ min: 0, max: Math.floor(LAST_MS / DAY) }).map((d) => formatUtcMillis(d * DAY).slice(0, 10));
    case 'datetime':
      return fc.integer({ min: 0, max: LAST_MS }).map(formatUtcMillis);
  }
};

const TYPES: readonly FieldType[] = ['number', 'percentage', 'money', 'duration', 'string', 'date', 'datetime'];

const definitionArb: fc.Arbitrary<DatasetDefinition> = fc
  .array(fc.record({ type: fc.constantFrom(...TYPES), optional: fc.boolean() }), { minLength: 1, maxLength: 10 })
  .map((types) =>
    parseDefinition({
      fields: Object.fromEntries(
        types.map((t, i) => [
          `f${i}_${t.type}`,
          { type: t.type, name: `Field ${i}`, optional: t.optional, ...(t.type === 'money' ? { currency_code: 'EUR' } : {}), ...(t.type === 'duration' ? { time_unit: 'seconds' } : {}) },
        ]),
      ),
    }),
  );

const recordsArb = (def: DatasetDefinition): fc.Arbitrary<DatasetRecord[]> =>
  fc.array(
    fc.record(Object.fromEntries(Object.entries(def.fields).map(([k, f]) => [k, f.optional ? fc.option(valueArb(f.type), { freq: 4 }) : valueArb(f.type)]))),
    { maxLength: 30 },
  );

/** A record as its view shows it: dates as Date, datetimes as DateTime('UTC') to the second. */
function asViewRow(def: DatasetDefinition, record: DatasetRecord): Record<string, FieldValue> {
  return Object.fromEntries(
    Object.entries(def.fields).map(([k, f]) => {
      const v = record[k] ?? null;
      if (v === null || f.type !== 'datetime') return [k, v];
      return [k, `${(v as string).slice(0, 10)} ${(v as string).slice(11, 19)}`];
    }),
  );
}

describe('Grafana-ready dataset views (ClickHouse)', () => {
  let db: TestDatabase;
  let views: DatasetViews;
  let store: ClickHouseProjectionStore;
  let run = 0;
  const freshAccount = (): string => `acc_${process.pid}_${run++}`;
  const viewsDatabase = (): string => `${db.database}_views`;
  // 18.16 prints the epoch, its zero Date and DateTime, as 0000-00-00 (current versions print 1970-01-01): the
  // value is the epoch either way, so the test reads it as the epoch.
  const epoch = (v: unknown): unknown => (v === '0000-00-00' ? '1970-01-01' : v === '0000-00-00 00:00:00' ? '1970-01-01 00:00:00' : v);
  const selectView = async (account: string, dataset: string): Promise<Record<string, unknown>[]> =>
    (await selectRows<Record<string, unknown>>(db.conn, `SELECT * FROM ${quoteIdentifier(viewsDatabase())}.\`${viewName(account, dataset)}\``, 'reading a view')).map((row) =>
      Object.fromEntries(Object.entries(row).map(([k, v]) => [k, epoch(v)])),
    );
  const viewNames = async (): Promise<string[]> =>
    (await selectRows<{ name: string }>(db.conn, `SELECT name FROM system.tables WHERE database = '${viewsDatabase()}' ORDER BY name`, 'listing views')).map((r) => r.name);
  // The projector's held state, carried across the writes of one test (a delete needs the dataset it deletes).
  let held: State = initialState();
  const write = async (events: readonly DatasetEvent[], first = 0): Promise<void> => {
    const batch = emptyBatch();
    events.forEach((e, i) => (held = projectEvent(held, e, { partition: 0, offset: first + i }, batch)));
    await writeBatch(store, batch);
    await store.viewsSettled(); // views follow a write in the background
  };

  beforeAll(async () => {
    db = await testDatabase();
    views = new DatasetViews(db.conn, db.database, `${db.database}_views`);
    store = new ClickHouseProjectionStore(db.conn, db.database, { views });
  });
  afterAll(async () => {
    await command(db.conn, `DROP DATABASE IF EXISTS ${quoteIdentifier(viewsDatabase())}`, 'dropping the views');
    await db.drop();
  });

  it("returns exactly the read API's records under the fields' own keys, for every field kind (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        definitionArb.chain((def) => fc.record({ def: fc.constant(def), appends: fc.array(recordsArb(def), { minLength: 1, maxLength: 3 }) })),
        async ({ def, appends }) => {
          const account = freshAccount();
          await write([
            { ...base(account, 'sales.by-day_1', 'i1'), type: 'DatasetDefined', definition: def },
            ...appends.map((records): DatasetEvent => ({ ...base(account, 'sales.by-day_1', 'i1'), type: 'RecordsAppended', records, delete_by: null })),
          ]);
          // The read API's answer: every record, in insertion order (one page holds them all here).
          const page = await db.readModel.queryRecords(account, 'sales.by-day_1', parseRecordQuery({ limit: '1000' }));
          expect(page?.next_offset).toBeNull();
          const viewed = await selectView(account, 'sales.by-day_1');
          expect(viewed).toEqual((page?.records ?? []).map((r) => asViewRow(def, r)));
        },
      ),
      { numRuns: 20 },
    );
  });

  it("keeps its own filter and order when the field keys are the records table's column names", async () => {
    const account = freshAccount();
    // Every column the view's query reads (its filter, its order, the slots and the bits behind num_0) as a key.
    const def = parseDefinition({
      fields: {
        deleted: { type: 'number', name: 'Deleted' },
        seq: { type: 'number', name: 'Seq' },
        account: { type: 'string', name: 'Account' },
        dataset: { type: 'string', name: 'Dataset' },
        incarnation: { type: 'string', name: 'Incarnation' },
        num_0: { type: 'string', name: 'Num 0' },
        str_0: { type: 'number', name: 'Str 0' },
        num_0_bits: { type: 'number', name: 'Bits' },
        time_0: { type: 'date', name: 'Time 0' },
        version: { type: 'datetime', name: 'Version' },
      },
      unique_by: ['account'],
    });
    const record = (key: string, n: number): DatasetRecord => ({
      deleted: n % 2,
      seq: 100 - n,
      account: key,
      dataset: 'other',
      incarnation: 'other',
      num_0: `n${n}`,
      str_0: n,
      num_0_bits: n,
      time_0: `2024-01-0${n}`,
      version: formatUtcMillis(Date.UTC(2024, 0, n)),
    });
    // k2 appended again: its first row is a tombstone and the new one is the newest; user `seq` runs backwards.
    await write([
      { ...base(account, 'cols', 'c1'), type: 'DatasetDefined', definition: def },
      { ...base(account, 'cols', 'c1'), type: 'RecordsAppended', records: [record('k1', 1), record('k2', 2), record('k3', 3)], delete_by: null },
      { ...base(account, 'cols', 'c1'), type: 'RecordsAppended', records: [record('k2', 4)], delete_by: null },
    ]);
    const page = await db.readModel.queryRecords(account, 'cols', parseRecordQuery({ limit: '1000' }));
    expect(page?.records.map((r) => r.account)).toEqual(['k1', 'k3', 'k2']);
    await expect(selectView(account, 'cols')).resolves.toEqual((page?.records ?? []).map((r) => asViewRow(def, r)));

    // Only the filter's and the order's names: a view ClickHouse creates either way, so only its rows tell.
    const few = parseDefinition({ fields: { deleted: { type: 'number', name: 'Deleted' }, seq: { type: 'number', name: 'Seq' } } });
    await write(
      [
        { ...base(account, 'few', 'f1'), type: 'DatasetDefined', definition: few },
        { ...base(account, 'few', 'f1'), type: 'RecordsAppended', records: [{ deleted: 1, seq: 2 }, { deleted: 0, seq: 1 }, { deleted: 2, seq: 0 }], delete_by: null },
      ],
      10,
    );
    await expect(selectView(account, 'few')).resolves.toEqual([
      { deleted: 1, seq: 2 },
      { deleted: 0, seq: 1 },
      { deleted: 2, seq: 0 },
    ]);
  });

  it('follows a dataset through delete and re-create with other fields, and keeps other datasets apart', async () => {
    const account = freshAccount();
    const first = parseDefinition({ fields: { day: { type: 'date', name: 'Day' }, units: { type: 'number', name: 'Units' } } });
    const second = parseDefinition({ fields: { name: { type: 'string', name: 'Name' } } });
    await write([
      { ...base(account, 'a', 'i1'), type: 'DatasetDefined', definition: first },
      { ...base(account, 'a', 'i1'), type: 'RecordsAppended', records: [{ day: '2024-02-29', units: 3 }], delete_by: null },
      { ...base(account, 'b', 'j1'), type: 'DatasetDefined', definition: second },
      { ...base(account, 'b', 'j1'), type: 'RecordsAppended', records: [{ name: 'other' }], delete_by: null },
    ]);
    await expect(selectView(account, 'a')).resolves.toEqual([{ day: '2024-02-29', units: 3 }]);

    await write([{ ...base(account, 'a', 'i1'), type: 'DatasetDeleted' }], 10);
    expect(await viewNames()).not.toContain(viewName(account, 'a'));
    await expect(selectView(account, 'b')).resolves.toEqual([{ name: 'other' }]);

    // Re-created with other fields: a view of the new incarnation, with the new columns and none of the old rows.
    await write(
      [
        { ...base(account, 'a', 'i2'), type: 'DatasetDefined', definition: second },
        { ...base(account, 'a', 'i2'), type: 'RecordsAppended', records: [{ name: 'new' }], delete_by: null },
      ],
      20,
    );
    await expect(selectView(account, 'a')).resolves.toEqual([{ name: 'new' }]);
  });

  it('reconciles: creates missing views, replaces a stale one, drops views of datasets no longer live', async () => {
    const account = freshAccount();
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    // Written without views, as if the projector crashed after the rows landed and before their views.
    const bare = new ClickHouseProjectionStore(db.conn, db.database);
    const batch = emptyBatch();
    const s = projectEvent(initialState(), { ...base(account, 'missing', 'm1'), type: 'DatasetDefined', definition: def }, { partition: 1, offset: 0 }, batch);
    projectEvent(s, { ...base(account, 'missing', 'm1'), type: 'RecordsAppended', records: [{ n: 7 }], delete_by: null }, { partition: 1, offset: 1 }, batch);
    await writeBatch(bare, batch);
    const db_ = quoteIdentifier(viewsDatabase());
    await command(db.conn, `CREATE VIEW ${db_}.\`${account}/gone\` AS SELECT 1 AS x`, 'a stray view');
    await command(db.conn, `CREATE VIEW ${db_}.\`${viewName(account, 'missing')}x\` AS SELECT 1 AS x`, 'another stray view');
    const before = await viewNames();
    expect(before).not.toContain(viewName(account, 'missing'));

    const mended = await new DatasetViews(db.conn, db.database, viewsDatabase()).reconcile();
    expect(mended.created).toBeGreaterThanOrEqual(1);
    expect(mended.dropped).toBeGreaterThanOrEqual(2);
    const after = await viewNames();
    expect(after).toContain(viewName(account, 'missing'));
    expect(after).not.toContain(`${account}/gone`);
    await expect(selectView(account, 'missing')).resolves.toEqual([{ n: 7 }]);
    // A second reconcile finds nothing to do.
    await expect(new DatasetViews(db.conn, db.database, viewsDatabase()).reconcile()).resolves.toEqual({ created: 0, dropped: 0, failed: 0 });
  });

  it('reconciles a view of the form before its slots were renamed inside (aliases shadowed columns) into the current one', async () => {
    const account = freshAccount();
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    await write([
      { ...base(account, 'old', 'o1'), type: 'DatasetDefined', definition: def },
      { ...base(account, 'old', 'o1'), type: 'RecordsAppended', records: [{ n: 2 }, { n: 1 }], delete_by: null },
    ]);
    // The view as earlier versions made it: the incarnation is right, the form is not.
    const view = `${quoteIdentifier(viewsDatabase())}.\`${viewName(account, 'old')}\``;
    const records = `${quoteIdentifier(db.database)}.\`records\``;
    await command(db.conn, `DROP TABLE ${view}`, 'dropping the view');
    await command(
      db.conn,
      `CREATE VIEW ${view} AS SELECT num_0 AS \`n\` FROM ${records} FINAL WHERE account = ${quoteString(account)} AND dataset = 'old' AND incarnation = 'o1' AND deleted = 0 ORDER BY seq`,
      'an old-form view',
    );
    const mended = await new DatasetViews(db.conn, db.database, viewsDatabase()).reconcile();
    expect(mended).toMatchObject({ created: 1, failed: 0 });
    await expect(selectView(account, 'old')).resolves.toEqual([{ n: 2 }, { n: 1 }]);
    await expect(new DatasetViews(db.conn, db.database, viewsDatabase()).reconcile()).resolves.toEqual({ created: 0, dropped: 0, failed: 0 });
  });
});

/** A connection whose CREATE VIEW statements fail while `refuses` says so (as a missing grant would). */
/** A connection whose CREATE VIEW statements are refused when `refuses` says so, or wait for `until` first. */
function refusingViews(conn: ClickHouseConnection, refuses: (query: string) => boolean, until: Promise<void> = Promise.resolve()): ClickHouseConnection {
  const client = new Proxy(conn.client, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (prop === 'command') {
        return async (params: { query: string }) => {
          if (!params.query.startsWith('CREATE VIEW')) return target.command(params);
          await until;
          if (refuses(params.query)) throw new Error('simulated: not enough privileges');
          return target.command(params);
        };
      }
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { ...conn, client };
}

describe('Grafana-ready views when things go wrong', () => {
  let db: TestDatabase;
  const viewsDb = (): string => `${db.database}_views`;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    await command(db.conn, `DROP DATABASE IF EXISTS ${quoteIdentifier(viewsDb())}`, 'dropping the views');
    await db.drop();
  });

  it('refuses the projection database as the views database (reconcile would drop its tables)', () => {
    expect(() => new DatasetViews(db.conn, db.database, db.database)).toThrow(/PUSHBASE_CLICKHOUSE_VIEWS_DATABASE/);
    expect(() => loadClickHouseConfig({ PUSHBASE_CLICKHOUSE_DATABASE: 'pb', PUSHBASE_CLICKHOUSE_VIEWS_DATABASE: 'pb' })).toThrow(/of its own/);
  });

  it("leaves every table in the views database that is not one of its views alone, an operator's own included", async () => {
    const views = new DatasetViews(db.conn, db.database, viewsDb());
    await views.reconcile();
    const q = quoteIdentifier(viewsDb());
    await command(db.conn, `CREATE TABLE ${q}.\`notes\` (x UInt8) ENGINE = Memory`, 'a table of the operator');
    await command(db.conn, `CREATE VIEW ${q}.\`my view\` AS SELECT 1 AS x`, 'a view of the operator');
    await command(db.conn, `CREATE VIEW ${q}.\`ops/daily\` AS SELECT 1 AS x`, 'a view named like a dataset view');
    const mended = await views.reconcile();
    const left = (await selectRows<{ name: string }>(db.conn, `SELECT name FROM system.tables WHERE database = '${viewsDb()}' ORDER BY name`, 'listing')).map((r) => r.name);
    // The look-alike names no live dataset and goes; the rest are not views of datasets and stay.
    expect(left).toEqual(['my view', 'notes']);
    expect(mended).toEqual({ created: 0, dropped: 1, failed: 0 });
  });

  it("makes a dataset's view once: its later writes issue no statement", async () => {
    const statements: string[] = [];
    const conn = refusingViews(db.conn, (query) => (statements.push(query), false));
    const store = new ClickHouseProjectionStore(conn, db.database, { views: new DatasetViews(conn, db.database, viewsDb()) });
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const account = `acc_${process.pid}_once`;
    let s = initialState();
    for (let i = 0; i < 4; i++) {
      const batch = emptyBatch();
      if (i === 0) s = projectEvent(s, { ...base(account, 'once', 'o1'), type: 'DatasetDefined', definition: def }, { partition: 5, offset: 0 }, batch);
      s = projectEvent(s, { ...base(account, 'once', 'o1'), type: 'RecordsAppended', records: [{ n: i }], delete_by: null }, { partition: 5, offset: 1 + i }, batch);
      await writeBatch(store, batch);
      await store.viewsSettled();
    }
    expect(statements).toHaveLength(1);
  });

  it('lands a write without waiting for its views: the records are readable while the view is being made', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const conn = refusingViews(db.conn, () => false, held);
    const store = new ClickHouseProjectionStore(conn, db.database, { views: new DatasetViews(conn, db.database, viewsDb()) });
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const account = `acc_${process.pid}_held`;
    const batch = emptyBatch();
    const s = projectEvent(initialState(), { ...base(account, 'held', 'h1'), type: 'DatasetDefined', definition: def }, { partition: 4, offset: 0 }, batch);
    projectEvent(s, { ...base(account, 'held', 'h1'), type: 'RecordsAppended', records: [{ n: 7 }], delete_by: null }, { partition: 4, offset: 1 }, batch);
    await writeBatch(store, batch);
    await expect(db.readModel.listRecords(account, 'held')).resolves.toEqual([{ n: 7 }]);
    const names = async (): Promise<string[]> =>
      (await selectRows<{ name: string }>(db.conn, `SELECT name FROM system.tables WHERE database = '${viewsDb()}'`, 'listing')).map((r) => r.name);
    expect(await names()).not.toContain(viewName(account, 'held'));
    release();
    await store.viewsSettled();
    expect(await names()).toContain(viewName(account, 'held'));
  });

  it('keeps writing when a view cannot be made, reports it, and makes it at the next write', async () => {
    let refusing = true;
    const errors: unknown[] = [];
    const conn = refusingViews(db.conn, () => refusing);
    const views = new DatasetViews(conn, db.database, viewsDb(), { onViewError: (_name, e) => errors.push(e) });
    const store = new ClickHouseProjectionStore(conn, db.database, { views, onViewsError: (e) => errors.push(e) });
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const account = `acc_${process.pid}_refused`;
    const batch = emptyBatch();
    const s = projectEvent(initialState(), { ...base(account, 'first', 'f1'), type: 'DatasetDefined', definition: def }, { partition: 2, offset: 0 }, batch);
    projectEvent(s, { ...base(account, 'first', 'f1'), type: 'RecordsAppended', records: [{ n: 1 }], delete_by: null }, { partition: 2, offset: 1 }, batch);
    await writeBatch(store, batch); // the rows land although the view does not
    await store.viewsSettled();
    await expect(db.readModel.listRecords(account, 'first')).resolves.toEqual([{ n: 1 }]);
    expect(errors).toHaveLength(1);
    const names = async (): Promise<string[]> =>
      (await selectRows<{ name: string }>(db.conn, `SELECT name FROM system.tables WHERE database = '${viewsDb()}'`, 'listing')).map((r) => r.name);
    expect(await names()).not.toContain(viewName(account, 'first'));

    refusing = false;
    const next = emptyBatch();
    projectEvent(initialState(), { ...base(account, 'second', 's1'), type: 'DatasetDefined', definition: def }, { partition: 2, offset: 2 }, next);
    await writeBatch(store, next);
    await store.viewsSettled();
    expect(await names()).toEqual(expect.arrayContaining([viewName(account, 'first'), viewName(account, 'second')]));
  });

  it('makes every other view when one cannot be made, counts it, and makes it later', async () => {
    const account = `acc_${process.pid}_one_refused`;
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const defined = (id: string): DatasetEvent => ({ ...base(account, id, `${id}1`), type: 'DatasetDefined', definition: def });
    // Written without views, as at a projector's start after a crash; `a` sorts first, so it fails first.
    const batch = emptyBatch();
    let s = initialState();
    for (const [i, id] of ['a', 'b', 'c'].entries()) s = projectEvent(s, defined(id), { partition: 3, offset: i }, batch);
    await writeBatch(db.store, batch);
    const refused = new Set([viewName(account, 'a')]);
    const failures: string[] = [];
    const conn = refusingViews(db.conn, (query) => [...refused].some((name) => query.includes(`\`${name}\``)));
    const views = new DatasetViews(conn, db.database, viewsDb(), { onViewError: (name) => failures.push(name) });
    const store = new ClickHouseProjectionStore(conn, db.database, { views });
    const names = async (): Promise<string[]> =>
      (await selectRows<{ name: string }>(db.conn, `SELECT name FROM system.tables WHERE database = '${viewsDb()}'`, 'listing')).map((r) => r.name);

    await expect(views.reconcile()).resolves.toMatchObject({ failed: 1 });
    expect(failures).toEqual([viewName(account, 'a')]);
    expect(await names()).toEqual(expect.arrayContaining([viewName(account, 'b'), viewName(account, 'c')]));
    expect(await names()).not.toContain(viewName(account, 'a'));

    // A write's own views: one refused, the other made; `a` is tried again first, and fails again.
    refused.add(viewName(account, 'e'));
    const second = emptyBatch();
    s = projectEvent(s, defined('e'), { partition: 3, offset: 3 }, second);
    s = projectEvent(s, defined('f'), { partition: 3, offset: 4 }, second);
    await writeBatch(store, second);
    await store.viewsSettled();
    expect(failures).toEqual([viewName(account, 'a'), viewName(account, 'a'), viewName(account, 'e')]);
    expect(await names()).toContain(viewName(account, 'f'));
    expect(await names()).not.toContain(viewName(account, 'e'));

    // Refused no more: the next write (of another dataset) makes both.
    refused.clear();
    const third = emptyBatch();
    projectEvent(s, defined('g'), { partition: 3, offset: 5 }, third);
    await writeBatch(store, third);
    await store.viewsSettled();
    expect(await names()).toEqual(expect.arrayContaining(['a', 'b', 'c', 'e', 'f', 'g'].map((id) => viewName(account, id))));
    expect(failures).toHaveLength(3);
  });
});

describe('view names', () => {
  it('are account/dataset, or cut and hashed when too long for a file name, and stay distinct', () => {
    expect(viewName('acme', 'sales.by.day')).toBe('acme/sales.by.day');
    const longA = viewName('a'.repeat(100), '.'.repeat(99) + 'x');
    const longB = viewName('a'.repeat(100), '.'.repeat(99) + 'y');
    expect(longA).not.toBe(longB);
    // An account too long to keep whole is cut too, after the id, and the name keeps its slash.
    const longAccount = viewName('.'.repeat(100), 'x');
    expect(longAccount).toMatch(/^\.+\/~[0-9a-f]{12}$/);
    for (const n of [longA, longB, longAccount]) {
      expect(n).toMatch(/~[0-9a-f]{12}$/);
      const escaped = [...Buffer.from(n)].reduce((k, b) => k + (/[A-Za-z0-9_]/.test(String.fromCharCode(b)) ? 1 : 3), 0);
      expect(escaped).toBeLessThanOrEqual(140);
    }
  });
});

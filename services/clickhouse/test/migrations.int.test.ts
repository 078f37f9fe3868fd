import { randomBytes } from 'node:crypto';
import { command, connectClickHouse, selectRows } from '../src/client';
import { migrate, MIGRATIONS, promoteStatement, tablesIn } from '../src/migrations';
import { quoteIdentifier, quoteString } from '../src/sql';
import { parseDefinition } from '@pushbase/domain';
import { ClickHouseReadModel } from '../src/read-model';
import { ClickHouseProjectionStore } from '../src/write-store';
import { mergeFully } from './churn';
import { CLICKHOUSE_URL } from './support';

/*
 * `pushbase migrate`'s engine against a real ClickHouse: from nothing to every table, recorded in
 * schema_migrations; a second run changes nothing; a rebuilt database can take the live one's place.
 */
describe('migrations', () => {
  const conn = connectClickHouse(CLICKHOUSE_URL);
  const created: string[] = [];
  const fresh = (suffix = ''): string => {
    const name = `pb_test_${randomBytes(6).toString('hex')}${suffix}`;
    created.push(name);
    return name;
  };
  afterAll(async () => {
    for (const name of created) await command(conn, `DROP DATABASE IF EXISTS ${quoteIdentifier(name)}`, 'dropping a test database');
    await conn.close();
  });

  /** Everything a migration could change: the tables' definitions and the recorded versions. */
  const snapshot = async (database: string) => ({
    tables: await selectRows<{ name: string; create_table_query: string }>(
      conn,
      `SELECT name, create_table_query FROM system.tables WHERE database = ${quoteString(database)} ORDER BY name`,
      'tables',
    ),
    recorded: await selectRows<{ version: number; name: string; applied_at: string }>(
      conn,
      `SELECT version, name, applied_at FROM ${tablesIn(database).migrations} ORDER BY version, applied_at`,
      'recorded versions',
    ),
  });

  it('creates the database and every table, and records each version once', async () => {
    const database = fresh();
    const result = await migrate(conn, database);
    expect(result.applied).toEqual(MIGRATIONS.map((m) => m.version));
    const { tables, recorded } = await snapshot(database);
    expect(tables.map((t) => t.name)).toEqual(['heads', 'records', 'schema_migrations']);
    expect(recorded.map((r) => [r.version, r.name])).toEqual(MIGRATIONS.map((m) => [m.version, m.name]));
    const records = tables.find((t) => t.name === 'records')?.create_table_query ?? '';
    expect(records).toContain('ReplacingMergeTree(version)');
    expect(records).toMatch(/ORDER BY \(account, dataset, row_slot\)/);
    for (const column of ['row_slot UInt32', 'record_key String', 'incarnation String', 'num_9 Nullable(Float64) ALIAS', 'num_0_bits Nullable(UInt64)', 'str_9 Nullable(String)', 'time_9 Nullable(Int64)', 'seq UInt64', 'deleted UInt8']) {
      expect(records).toContain(column);
    }
  });

  it('creates records and heads at index_granularity 512, so a load of one dataset reads few rows besides its own', async () => {
    const database = fresh();
    await migrate(conn, database);
    const engines = await selectRows<{ name: string; engine_full: string }>(
      conn,
      `SELECT name, engine_full FROM system.tables WHERE database = ${quoteString(database)} AND name IN ('records', 'heads') ORDER BY name`,
      'engines',
    );
    expect(engines.map((t) => t.name)).toEqual(['heads', 'records']);
    for (const t of engines) expect(t.engine_full).toMatch(/SETTINGS index_granularity = 512$/);
  });

  it('changes nothing when run again', async () => {
    const database = fresh();
    await migrate(conn, database);
    const before = await snapshot(database);
    const again = await migrate(conn, database);
    expect(again.applied).toEqual([]);
    expect(again.alreadyApplied).toEqual(MIGRATIONS.map((m) => m.version));
    await expect(snapshot(database)).resolves.toEqual(before);
  });

  it('applies only the steps not recorded yet, and each step is idempotent by itself', async () => {
    const database = fresh();
    const first = MIGRATIONS.slice(0, 1);
    await expect(migrate(conn, database, first)).resolves.toMatchObject({ applied: [1] });
    // A crash after a step ran but before it was recorded: running it again must be harmless.
    for (const statement of MIGRATIONS[1]?.up(tablesIn(database)) ?? []) await command(conn, statement, 'a step, unrecorded');
    await expect(migrate(conn, database)).resolves.toMatchObject({ applied: MIGRATIONS.slice(1).map((m) => m.version) });
    expect((await snapshot(database)).recorded.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
  });

  it('lets a rebuilt database take the live one’s place with one RENAME (as replay will)', async () => {
    const live = fresh();
    const rebuilt = fresh('_fresh');
    const retired = fresh('_old');
    await migrate(conn, live);
    await migrate(conn, rebuilt);
    await command(conn, `CREATE DATABASE ${quoteIdentifier(retired)}`, 'the retired database');
    await command(conn, `INSERT INTO ${tablesIn(rebuilt).heads} (account, dataset, version) SELECT 'acc', 'rebuilt', 1`, 'a marker');
    await command(conn, promoteStatement(rebuilt, live, retired), 'the swap');
    await expect(selectRows(conn, `SELECT dataset FROM ${tablesIn(live).heads}`, 'live heads')).resolves.toEqual([{ dataset: 'rebuilt' }]);
    await expect(selectRows(conn, `SELECT toString(count()) AS n FROM ${tablesIn(retired).records}`, 'retired')).resolves.toEqual([{ n: '0' }]);
  });

  /*
   * A database of migrations 1–2 as a projector of that layout left it: rows keyed by their row key,
   * tombstones of removed rows, a row of an earlier incarnation never tombstoned, a deleted dataset.
   */
  const definition = parseDefinition({ fields: { n: { type: 'number', name: 'N' }, t: { type: 'string', name: 'T', optional: true } }, unique_by: [] });
  const keyed = parseDefinition({ fields: { k: { type: 'string', name: 'K' } }, unique_by: ['k'] });
  async function unslotted(database: string): Promise<void> {
    await migrate(conn, database, MIGRATIONS.slice(0, 2));
    const head = (incarnation: string, def: unknown, count: number, nextRow: number, offset: number) =>
      JSON.stringify({ incarnation, definition: def, created_at: 1, updated_at: 2, record_count: count, next_row: nextRow, position: { partition: 0, offset } });
    // num_0_bits holds a double's bits (layout.ts): 4607182418800017408 is 1.0, 4611686018427387904 is 2.0, 4613937818241073152 is 3.0.
    const rows = [
      { account: 'acc', dataset: 'plain', incarnation: '', row_key: '', version: 90, seq: 0, deleted: 0, head: head('i2', definition, 3, 5, 9) },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '0', version: 10, seq: 10, deleted: 0, num_0_bits: '4607182418800017408', str_0: 'zero' },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '0', version: 40, seq: 40, deleted: 1 },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '1', version: 11, seq: 11, deleted: 1 },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '4', version: 30, seq: 30, deleted: 0, num_0_bits: '4613937818241073152' },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '2', version: 20, seq: 20, deleted: 0, num_0_bits: '4607182418800017408', str_0: 'one' },
      { account: 'acc', dataset: 'plain', incarnation: 'i2', row_key: '3', version: 50, seq: 50, deleted: 0, num_0_bits: '4611686018427387904' },
      { account: 'acc', dataset: 'plain', incarnation: 'i1', row_key: '7', version: 5, seq: 5, deleted: 0, num_0_bits: '4607182418800017408' },
      { account: 'acc', dataset: 'keyed', incarnation: '', row_key: '', version: 99, seq: 0, deleted: 0, head: head('k1', keyed, 1, 0, 12) },
      { account: 'acc', dataset: 'keyed', incarnation: 'k1', row_key: 'sb', version: 60, seq: 60, deleted: 0, str_0: 'b' },
      { account: 'acc', dataset: 'keyed', incarnation: 'k1', row_key: 'sa', version: 61, seq: 61, deleted: 1 },
      { account: 'acc', dataset: 'gone', incarnation: '', row_key: '', version: 70, seq: 0, deleted: 1, head: head('g1', keyed, 0, 0, 7) },
      { account: 'acc', dataset: 'gone', incarnation: 'g1', row_key: 'sx', version: 69, seq: 69, deleted: 1 },
    ];
    await command(conn, `INSERT INTO ${tablesIn(database).records} FORMAT JSONEachRow ${rows.map((r) => JSON.stringify(r)).join('\n')}`, 'rows of the old layout');
  }

  async function expectSlotted(database: string): Promise<void> {
    const store = new ClickHouseProjectionStore(conn, database);
    const plain = await store.load('acc', 'plain');
    expect(plain?.position).toEqual({ partition: 0, offset: 9 });
    expect([...(plain?.state?.rows ?? [])]).toEqual([[2, { n: 1, t: 'one' }], [4, { n: 3, t: null }], [3, { n: 2, t: null }]]);
    // Slots 1…n in insertion order, the lowest free ones, as the projector would have taken them.
    expect([...(plain?.slots ?? [])]).toEqual([[2, 1], [4, 2], [3, 3]]);
    const keyedLoaded = await store.load('acc', 'keyed');
    expect([...(keyedLoaded?.state?.rows ?? [])]).toEqual([['sb', { k: 'b' }]]);
    expect([...(keyedLoaded?.slots ?? [])]).toEqual([['sb', 1]]);
    await expect(store.load('acc', 'gone')).resolves.toEqual({ state: undefined, slots: new Map(), position: { partition: 0, offset: 7 } });
    await expect(new ClickHouseReadModel(conn, database).listRecords('acc', 'plain')).resolves.toEqual([{ n: 1, t: 'one' }, { n: 3, t: null }, { n: 2, t: null }]);
    // No tombstone, nothing of the earlier incarnation: three heads and four live rows.
    await mergeFully(conn, database, 'records');
    const counts = await selectRows<{ n: string }>(conn, `SELECT toString(count()) AS n FROM ${tablesIn(database).records}`, 'rows');
    expect(counts).toEqual([{ n: '7' }]);
    const tables = await selectRows<{ name: string }>(conn, `SELECT name FROM system.tables WHERE database = ${quoteString(database)} ORDER BY name`, 'tables');
    expect(tables.map((t) => t.name)).toEqual(['heads', 'records', 'schema_migrations']);
  }

  it('brings a records table of the old layout to row slots: live rows copied into slots 1…n, tombstones left behind', async () => {
    const database = fresh();
    await unslotted(database);
    await expect(migrate(conn, database)).resolves.toMatchObject({ applied: [3] });
    await expectSlotted(database);
    // Run again by a crash before it was recorded: nothing changes.
    await MIGRATIONS[2]?.run?.(conn, tablesIn(database));
    await expectSlotted(database);
  });

  it('finishes the move after a crash at any stage of it', async () => {
    // Crashed after moving the old table aside: the slotted table is created and filled.
    const moved = fresh();
    await unslotted(moved);
    await command(conn, `RENAME TABLE ${tablesIn(moved).records} TO ${quoteIdentifier(moved)}.records_unslotted`, 'the move');
    await migrate(conn, moved);
    await expectSlotted(moved);
    // Crashed after the copy, before dropping the old table: the copy runs again, its rows collapse with the first's.
    const done = fresh();
    await unslotted(done);
    await migrate(conn, done);
    const copied = fresh();
    await unslotted(copied);
    await command(conn, `RENAME TABLE ${tablesIn(copied).records} TO ${quoteIdentifier(copied)}.records_unslotted`, 'the move');
    await command(conn, `CREATE TABLE ${tablesIn(copied).records} AS ${tablesIn(done).records}`, 'the slotted table');
    await command(conn, `INSERT INTO ${tablesIn(copied).records} SELECT * FROM ${tablesIn(done).records}`, 'the copy');
    await migrate(conn, copied);
    await expectSlotted(copied);
  });
});

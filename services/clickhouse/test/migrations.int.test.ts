import { randomBytes } from 'node:crypto';
import { command, connectClickHouse, selectRows } from '../src/client';
import { migrate, MIGRATIONS, promoteStatement, tablesIn } from '../src/migrations';
import { quoteIdentifier, quoteString } from '../src/sql';
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
    expect(records).toMatch(/ORDER BY \(account, dataset, incarnation, row_key\)/);
    for (const column of ['num_9 Nullable(Float64) ALIAS', 'num_0_bits Nullable(UInt64)', 'str_9 Nullable(String)', 'time_9 Nullable(Int64)', 'seq UInt64', 'deleted UInt8']) {
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
});

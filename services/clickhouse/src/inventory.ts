import type { ProjectedHead } from '@pushbase/contracts';
import { command, selectRows, type ClickHouseConnection } from './client';
import { promoteStatement, tablesIn } from './migrations';
import { quoteIdentifier } from './sql';
import type { HeadJson } from './records-table';

/*
 * Whole-projection operations for `pushbase replay`: every dataset's head (to compare a rebuilt
 * projection with the live one), totals, promotion of a rebuilt database, and dropping one. The SQL holds
 * no user value: database names are validated identifiers, everything else is constant.
 */

/** A dataset's head as its head row in the records table states it (the authoritative copy, docs/clickhouse.md → Crash safety). */
export type StoredHead = Omit<ProjectedHead, 'version'>;

/** Every dataset's head, deleted ones included, ordered by account and dataset. */
export async function listStoredHeads(conn: ClickHouseConnection, database: string): Promise<StoredHead[]> {
  const t = tablesIn(database);
  // row_slot is a sort-key column, so filtering on it before FINAL collapses is safe.
  const rows = await selectRows<{ account: string; dataset: string; head: string; deleted: number | string }>(
    conn,
    `SELECT account, dataset, head, deleted FROM ${t.records} FINAL WHERE row_slot = 0 ORDER BY account, dataset`,
    `listing the dataset heads of ${database}`,
  );
  return rows.map((r) => {
    const head = JSON.parse(r.head) as HeadJson;
    return {
      account: r.account,
      dataset: r.dataset,
      deleted: Number(r.deleted) === 1,
      incarnation: head.incarnation,
      definition: head.definition,
      created_at: head.created_at,
      updated_at: head.updated_at,
      record_count: head.record_count,
      next_row: head.next_row,
      position: head.position,
    };
  });
}

/** A row of the heads table (what the admin listing serves), for comparing listings. */
export interface ListedHead {
  readonly account: string;
  readonly dataset: string;
  readonly incarnation: string;
  readonly record_count: number;
  readonly deleted: boolean;
}

export async function listListedHeads(conn: ClickHouseConnection, database: string): Promise<ListedHead[]> {
  const rows = await selectRows<{ account: string; dataset: string; incarnation: string; record_count: string; deleted: number | string }>(
    conn,
    `SELECT account, dataset, incarnation, toString(record_count) AS record_count, deleted FROM ${tablesIn(database).heads} FINAL ORDER BY account, dataset`,
    `listing the heads table of ${database}`,
  );
  return rows.map((r) => ({ account: r.account, dataset: r.dataset, incarnation: r.incarnation, record_count: Number(r.record_count), deleted: Number(r.deleted) === 1 }));
}

export async function databaseExists(conn: ClickHouseConnection, database: string): Promise<boolean> {
  // EXISTS DATABASE is newer than 18.16; system.databases is in both. The name is a checked identifier.
  quoteIdentifier(database);
  const rows = await selectRows<{ name: string }>(conn, `SELECT name FROM system.databases`, 'listing databases');
  return rows.some((r) => r.name === database);
}

export async function dropDatabase(conn: ClickHouseConnection, database: string): Promise<void> {
  await command(conn, `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}`, `dropping ${database}`);
}

/**
 * Makes the rebuilt projection in `fresh` the live one: the live tables move to `retired` (created here,
 * empty), the fresh ones take their names, in one RENAME TABLE statement (promoteStatement). On 18.16 as on
 * current ClickHouse a RENAME of several tables runs table by table, not atomically: a query arriving
 * between two steps may find a table missing (code 60) or read the new records with the old heads for a
 * moment. EXCHANGE TABLES would make each table's swap atomic, but only on Atomic databases (20.x on).
 */
export async function promoteProjection(conn: ClickHouseConnection, names: { readonly fresh: string; readonly live: string; readonly retired: string }): Promise<void> {
  await command(conn, `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(names.retired)}`, `creating ${names.retired}`);
  await command(conn, promoteStatement(names.fresh, names.live, names.retired), `promoting ${names.fresh} to ${names.live}`);
}

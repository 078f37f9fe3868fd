import { command, selectRows, type ClickHouseConnection } from './client';
import { STORED_COLUMNS } from './layout';
import { quoteIdentifier, quoteString } from './sql';

/*
 * Numbered, idempotent up-steps. Every table of the projection lives in one database whose name is an
 * argument, with fixed table names inside it. Tests migrate a random database of their own; replay
 * migrates a fresh one, fills it, and makes it live with one statement that 18.16 and current ClickHouse
 * both run (`promoteStatement`): RENAME TABLE moves tables between databases of one server.
 *
 * Each step is idempotent (IF NOT EXISTS), so a crash between applying a step and recording it only
 * repeats a no-op. Applied versions are recorded in `schema_migrations`; a second `migrate` finds them all
 * recorded and sends nothing but its reads.
 */

export interface ProjectionTables {
  readonly database: string;
  /** Quoted, qualified names, ready for SQL text. */
  readonly records: string;
  readonly heads: string;
  readonly migrations: string;
}

export const TABLE_NAMES = ['records', 'heads'] as const;

export function tablesIn(database: string): ProjectionTables {
  const db = quoteIdentifier(database);
  return { database, records: `${db}.\`records\``, heads: `${db}.\`heads\``, migrations: `${db}.\`schema_migrations\`` };
}

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly up: (t: ProjectionTables) => readonly string[];
  /** A step that looks before it acts (so a crash in it only repeats it), run after `up`'s statements. */
  readonly run?: (conn: ClickHouseConnection, t: ProjectionTables) => Promise<void>;
}

// 18.16 and current ClickHouse: the `ENGINE … ORDER BY` syntax (18.16 knows it since 1.1.54310), Nullable,
// ALIAS columns and reinterpretAs* exist in both. No partition key: ReplacingMergeTree collapses
// versions only within a partition, and one partition also keeps each write a single part (docs/clickhouse.md → Crash safety).
const slotColumns = STORED_COLUMNS.map(({ kind, stored, column }) => {
  if (kind === 'num') {
    // The double is sent as its bits and derived here (layout.ts says why). reinterpretAsString drops
    // trailing zero bytes and reinterpretAsFloat64 pads them back, in 18.16 and current versions alike.
    // ALIAS, computed when read, not MATERIALIZED: on 18.16 every stored column is two files per stream
    // in every part, and ten more Nullable columns made 5000-row inserts 1.3–2× slower (measured).
    return `${stored} Nullable(UInt64),\n  ${column} Nullable(Float64) ALIAS reinterpretAsFloat64(reinterpretAsString(${stored}))`;
  }
  return `${column} Nullable(${kind === 'str' ? 'String' : 'Int64'})`;
}).join(',\n  ');

/*
 * Both tables are read a dataset at a time, and every part holding the dataset gives at least one whole
 * granule, so a small granularity makes those reads several times cheaper for a cheap growth in marks. It is
 * fixed when a table is created, so it sits in the CREATEs; an older database keeps 8192 until `pushbase
 * replay` rebuilds it. Why, and the figures: docs/clickhouse.md → Tables.
 */
export const INDEX_GRANULARITY = 512;

/** The records table as migration 3 makes it: keyed by row slot (see slotRecords). */
const slottedRecords = (table: string): string => `CREATE TABLE IF NOT EXISTS ${table} (
  account String,
  dataset String,
  -- 0 for the dataset's head row; a live row's slot from 1, which a later row of the dataset takes over
  -- once this one is removed (the projector's slots.ts), so a dataset keeps a bounded number of keys
  row_slot UInt32,
  -- '' marks a dataset's head row (docs/clickhouse.md → Crash safety: it lands in the same insert as the rows it covers)
  incarnation String,
  -- the fold's row key: the unique key under unique_by, else the row number in decimal; '' on head rows.
  -- Not named row_key as in the table of migration 1, so that an insert of a projector of that layout
  -- (still running during an upgrade) fails instead of landing every row in slot 0, the head's.
  record_key String,
  version UInt64,
  -- insertion order within the dataset: live rows by seq are the fold's oldest-first order
  seq UInt64,
  deleted UInt8,
  -- head rows only: the head as JSON (definition, counters, stream position)
  head String,
  ${slotColumns}
) ENGINE = ReplacingMergeTree(version)
ORDER BY (account, dataset, row_slot)
SETTINGS index_granularity = ${INDEX_GRANULARITY}`;

/** Datasets copied by one statement of migration 3: each statement holds their live rows in memory. */
const COPY_DATASETS = 64;

/*
 * Migration 3. Tables of migrations 1–2 key a row by its fold row key, which never repeats, so every row
 * ever removed stays as a tombstone and every FINAL read walks them all. This moves the old table aside
 * (`records_unslotted`), creates the slotted one under the old name, copies each dataset's head row and
 * its live rows (slots 1…n in insertion order: the lowest free slots, as the projector would have taken
 * them) and drops the old table. Tombstones are not copied: a slot nobody holds is free.
 * Each stage looks first, and the copy writes the same rows with the same versions every time, so a crash
 * anywhere only repeats work. A projector of the earlier layout still running cannot write into the new
 * table (it has no row_key column): its writes fail uncommitted, and the upgraded projector applies them.
 */
async function slotRecords(conn: ClickHouseConnection, t: ProjectionTables): Promise<void> {
  const old = `${quoteIdentifier(t.database)}.\`records_unslotted\``;
  const columnsOf = async (table: string): Promise<string[]> =>
    (
      await selectRows<{ name: string }>(
        conn,
        `SELECT name FROM system.columns WHERE database = ${quoteString(t.database)} AND table = ${quoteString(table)}`,
        `reading the columns of ${table}`,
      )
    ).map((c) => c.name);
  const records = await columnsOf('records');
  const moved = (await columnsOf('records_unslotted')).length > 0;
  if (records.length > 0 && !records.includes('row_slot')) {
    if (moved) throw new Error(`${t.database} holds records and records_unslotted, both without row slots: resolve by hand (docs/clickhouse.md)`);
    await command(conn, `RENAME TABLE ${t.records} TO ${old}`, 'moving the unslotted records table aside');
  }
  await command(conn, slottedRecords(t.records), 'creating the slotted records table');
  if (records.includes('row_slot') && !moved) return;

  const stored = STORED_COLUMNS.map((c) => c.stored);
  const heads = await selectRows<{ account: string; dataset: string; head: string }>(
    conn,
    `SELECT account, dataset, head FROM ${old} FINAL WHERE incarnation = '' AND row_key = '' ORDER BY account, dataset`,
    'listing the datasets to copy',
  );
  const columns = ['account', 'dataset', 'row_slot', 'incarnation', 'record_key', 'version', 'seq', 'deleted', 'head', ...stored].join(', ');
  // A row as a tuple, seq first: the sort orders by it (a live row's seq is unique in its dataset).
  const carried = ['seq', 'incarnation', 'row_key', 'version', 'deleted', 'head', ...stored];
  const element = (column: string): string => `tupleElement(r, ${carried.indexOf(column) + 1})`;
  for (let i = 0; i < heads.length; i += COPY_DATASETS) {
    const chunk = heads.slice(i, i + COPY_DATASETS);
    const datasets = chunk.map((h) => `(${quoteString(h.account)}, ${quoteString(h.dataset)})`).join(', ');
    const live = chunk.map((h) => `(${quoteString(h.account)}, ${quoteString(h.dataset)}, ${quoteString((JSON.parse(h.head) as { incarnation: string }).incarnation)})`).join(', ');
    await command(
      conn,
      `INSERT INTO ${t.records} (${columns}) SELECT account, dataset, toUInt32(0), ${['incarnation', 'row_key', 'version', 'seq', 'deleted', 'head', ...stored].join(', ')}
FROM ${old} FINAL WHERE (account, dataset) IN (${datasets}) AND incarnation = '' AND row_key = ''`,
      `copying ${chunk.length} dataset heads`,
    );
    await command(
      conn,
      `INSERT INTO ${t.records} (${columns})
SELECT account, dataset, toUInt32(n), ${element('incarnation')}, ${element('row_key')}, ${element('version')}, ${element('seq')}, ${element('deleted')}, ${element('head')}, ${stored.map(element).join(', ')}
FROM (
  SELECT account, dataset, arraySort(groupArray(tuple(${carried.join(', ')}))) AS rs
  FROM ${old} FINAL
  WHERE (account, dataset, incarnation) IN (${live}) AND deleted = 0
  GROUP BY account, dataset
) ARRAY JOIN rs AS r, arrayEnumerate(rs) AS n`,
      `copying the live rows of ${chunk.length} datasets`,
    );
  }
  await command(conn, `DROP TABLE IF EXISTS ${old}`, 'dropping the unslotted records table');
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'records: every row of every dataset, typed slots, tombstones, and each write’s dataset heads',
    up: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.records} (
  account String,
  dataset String,
  -- '' marks a dataset's head row (docs/clickhouse.md → Crash safety: it lands in the same insert as the rows it covers)
  incarnation String,
  -- the unique key under unique_by, else the row number in decimal; '' on head rows
  row_key String,
  version UInt64,
  -- insertion order within the dataset: live rows by seq are the fold's oldest-first order
  seq UInt64,
  deleted UInt8,
  -- head rows only: the head as JSON (definition, counters, stream position)
  head String,
  ${slotColumns}
) ENGINE = ReplacingMergeTree(version)
ORDER BY (account, dataset, incarnation, row_key)
SETTINGS index_granularity = ${INDEX_GRANULARITY}`,
    ],
  },
  {
    version: 2,
    name: 'heads: one row per dataset for listing and SQL readers',
    up: (t) => [
      `CREATE TABLE IF NOT EXISTS ${t.heads} (
  account String,
  dataset String,
  incarnation String,
  definition String,
  -- field key -> slot column of the records table, as JSON
  columns String,
  created_at Int64,
  updated_at Int64,
  record_count UInt64,
  next_row UInt64,
  position_partition Int32,
  position_offset Int64,
  version UInt64,
  deleted UInt8
) ENGINE = ReplacingMergeTree(version)
ORDER BY (account, dataset)
SETTINGS index_granularity = ${INDEX_GRANULARITY}`,
    ],
  },
  {
    version: 3,
    name: 'records: keyed by row slot, so removed rows leave no tombstone behind for good',
    up: () => [],
    run: slotRecords,
  },
];

export interface MigrateResult {
  readonly database: string;
  readonly applied: readonly number[];
  readonly alreadyApplied: readonly number[];
}

/** Creates the database if missing and applies every migration not recorded yet, in order. */
export async function migrate(conn: ClickHouseConnection, database: string, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrateResult> {
  const t = tablesIn(database);
  await command(conn, `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(database)}`, 'creating the database');
  await command(
    conn,
    `CREATE TABLE IF NOT EXISTS ${t.migrations} (version UInt32, name String, applied_at DateTime) ENGINE = ReplacingMergeTree ORDER BY version`,
    'creating schema_migrations',
  );
  const done = new Set(
    (await selectRows<{ version: number }>(conn, `SELECT DISTINCT version FROM ${t.migrations}`, 'reading schema_migrations')).map((r) => Number(r.version)),
  );
  const applied: number[] = [];
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (done.has(m.version)) continue;
    for (const statement of m.up(t)) await command(conn, statement, `migration ${m.version}`);
    await m.run?.(conn, t);
    // Version and name are this file's constants, not user values; the name still goes through the helper.
    await command(conn, `INSERT INTO ${t.migrations} (version, name, applied_at) SELECT ${m.version}, ${quoteString(m.name)}, now()`, `recording migration ${m.version}`);
    applied.push(m.version);
  }
  return { database, applied, alreadyApplied: [...done].sort((a, b) => a - b) };
}

/**
 * The statement that makes a rebuilt projection (database `fresh`, migrated and filled) the live one:
 * the live tables move to `retired` (an existing, empty database), the fresh ones take their names.
 * One RENAME TABLE statement, which 18.16 and current ClickHouse both run; readers see the old or the new
 * tables, and (as ClickHouse renames table by table) for a moment possibly one of each.
 */
export function promoteStatement(fresh: string, live: string, retired: string): string {
  const [f, l, r] = [fresh, live, retired].map(quoteIdentifier) as [string, string, string];
  return `RENAME TABLE ${TABLE_NAMES.flatMap((n) => [`${l}.\`${n}\` TO ${r}.\`${n}\``, `${f}.\`${n}\` TO ${l}.\`${n}\``]).join(', ')}`;
}

import { setTimeout as sleep } from 'node:timers/promises';
import { EVENT_SCHEMA_VERSION, formatUtcMillis, parseDefinition, type DatasetDefinition, type DatasetEvent, type DatasetRecord } from '@pushbase/domain';
import { command, selectRows, type ClickHouseConnection } from '../src/client';
import { quoteIdentifier, quoteString } from '../src/sql';

/*
 * Histories that push many more records through a dataset than its 5000-record window holds: what made
 * tombstones pile up when rows were keyed by row key (every removed row left one for good). Shared by the
 * int tests of the bound (churn.int.test.ts, current-engine.int.test.ts) and bench/churn.ts.
 */

const fields = {
  at: { type: 'datetime', name: 'At' },
  n: { type: 'number', name: 'N' },
  page: { type: 'string', name: 'Page', optional: true },
} as const;

/** No unique_by: rows keyed by position, the window evicting the oldest. */
export const CHURN_PLAIN: DatasetDefinition = parseDefinition({ fields });
/** A datetime unique_by whose keys keep changing: every record is a new key, the window evicting the oldest. */
export const CHURN_TIMED: DatasetDefinition = parseDefinition({ fields, unique_by: ['at'] });

const T0 = Date.UTC(2025, 0, 1);

/** Record i of a churn: a new datetime each (one a second), so under CHURN_TIMED a new key each. */
export const churnRecord = (i: number): DatasetRecord => ({ at: formatUtcMillis(T0 + i * 1000), n: i, page: i % 5 === 0 ? null : `/p/${i % 97}` });

/**
 * The events of `appends` appends of `perAppend` records each into one dataset (defined first), records
 * numbered from 0; each record a fresh object, as decoded from the log (project.ts knows rows by identity).
 */
export function* churnEvents(account: string, dataset: string, definition: DatasetDefinition, appends: number, perAppend = 500, incarnation = 'churn-1'): Generator<DatasetEvent> {
  const base = { schema_version: EVENT_SCHEMA_VERSION, account, dataset, incarnation, at: T0 } as const;
  yield { ...base, type: 'DatasetDefined', definition };
  for (let a = 0; a < appends; a++) {
    yield { ...base, at: T0 + a, type: 'RecordsAppended', records: Array.from({ length: perAppend }, (_, j) => churnRecord(a * perAppend + j)), delete_by: null };
  }
}

/** Replaces and delete / re-create, `rounds` times: each round a new incarnation filled, replaced and deleted. */
export function* recreateEvents(account: string, dataset: string, rounds: number): Generator<DatasetEvent> {
  for (let r = 0; r < rounds; r++) {
    const base = { schema_version: EVENT_SCHEMA_VERSION, account, dataset, incarnation: `round-${r}`, at: T0 + r } as const;
    yield { ...base, type: 'DatasetDefined', definition: CHURN_TIMED };
    for (let a = 0; a < 3; a++) yield { ...base, type: 'RecordsAppended', records: Array.from({ length: 500 }, (_, j) => churnRecord(r * 10_000 + a * 500 + j)), delete_by: null };
    yield { ...base, type: 'RecordsReplaced', records: Array.from({ length: 400 }, (_, j) => churnRecord(r * 10_000 + 5000 + j)) };
    if (r < rounds - 1) yield { ...base, type: 'DatasetDeleted' };
  }
}

/**
 * Merges a table's parts into one, so a ReplacingMergeTree holds one row per key. OPTIMIZE … FINAL does
 * nothing, silently, while a background merge holds some of the parts, so it is repeated until one part is
 * left.
 */
export async function mergeFully(conn: ClickHouseConnection, database: string, table: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await command(conn, `OPTIMIZE TABLE ${quoteIdentifier(database)}.${quoteIdentifier(table)} FINAL`, `merging ${table}`);
    const [parts] = await selectRows<{ n: string }>(
      conn,
      `SELECT toString(count()) AS n FROM system.parts WHERE database = ${quoteString(database)} AND table = ${quoteString(table)} AND active`,
      `counting the parts of ${table}`,
    );
    if (Number(parts?.n) <= 1) return;
    if (attempt === 100) throw new Error(`${table} still has ${parts?.n} parts after 100 OPTIMIZE … FINAL`);
    await sleep(200);
  }
}

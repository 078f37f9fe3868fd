import { randomBytes } from 'node:crypto';
import type { ProjectedHead, ProjectedRow, ProjectionStore, StreamPosition } from '@pushbase/contracts';
import { evolve, initialState, type DatasetEvent, type DatasetRecord, type DatasetState, type RowKey, type State } from '@pushbase/domain';
import { connectClickHouse, type ClickHouseConnection } from '../src/client';
import { migrate } from '../src/migrations';
import { quoteIdentifier } from '../src/sql';
import { ClickHouseProjection } from '../src/store';

export const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

/**
 * A migrated database of its own (pb_test_<random>) on the shared ClickHouse; `drop` removes it. Fails,
 * never skips, when ClickHouse cannot be reached.
 */
export interface TestDatabase {
  readonly conn: ClickHouseConnection;
  readonly database: string;
  readonly store: ClickHouseProjection;
  drop(): Promise<void>;
}

export async function testDatabase(): Promise<TestDatabase> {
  const conn = connectClickHouse(CLICKHOUSE_URL);
  const database = `pb_test_${randomBytes(6).toString('hex')}`;
  try {
    await migrate(conn, database);
  } catch (e) {
    await conn.close();
    throw new Error(`ClickHouse at ${CLICKHOUSE_URL} is needed by this suite (npm run services:up): ${e instanceof Error ? e.message : String(e)}`);
  }
  return {
    conn,
    database,
    store: new ClickHouseProjection(conn, database),
    drop: async () => {
      await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}` });
      await conn.close();
    },
  };
}

/*
 * The minimal "event → rows" of a projector, for the store's tests and the ReadModel contract only: the
 * projector (services/projector) owns the real one. It folds with the domain's `evolve` and diffs each
 * dataset's rows before and after an event: removed keys become tombstones, new or replaced records live
 * rows; versions and seqs come from the event's position (offset × 8192 + index), never a clock.
 */
const PER_EVENT = 8192;

export interface Batch {
  readonly rows: ProjectedRow[];
  readonly heads: Map<string, ProjectedHead>;
}
export const emptyBatch = (): Batch => ({ rows: [], heads: new Map() });

const headOf = (ds: DatasetState, position: StreamPosition, deleted: boolean, version: number): ProjectedHead => ({
  account: ds.account,
  dataset: ds.id,
  incarnation: ds.incarnation,
  definition: ds.definition,
  created_at: ds.created_at,
  updated_at: ds.updated_at,
  record_count: deleted ? 0 : ds.rows.size,
  next_row: ds.nextRow,
  position,
  version,
  deleted,
});

const rowOf = (ds: DatasetState, key: RowKey, version: number, record: DatasetRecord | null): ProjectedRow => ({
  account: ds.account,
  dataset: ds.id,
  incarnation: ds.incarnation,
  row_key: String(key),
  version,
  seq: version,
  deleted: record === null,
  record,
});

/** Folds one event into `state` and adds the rows and head it changes to `batch`; returns the new state. */
export function projectEvent(state: State, event: DatasetEvent, position: StreamPosition, batch: Batch): State {
  const before = state.get(event.account)?.get(event.dataset);
  const beforeRows = before === undefined ? undefined : new Map(before.rows);
  const next = evolve(state, event);
  const after = next.get(event.account)?.get(event.dataset);
  let version = position.offset * PER_EVENT;
  const sameIncarnation = before !== undefined && after !== undefined && before.incarnation === after.incarnation;
  if (before !== undefined && beforeRows !== undefined && !sameIncarnation) {
    for (const key of beforeRows.keys()) batch.rows.push(rowOf(before, key, version++, null));
    // Below the version of a successor's head in the same event, so the two never tie.
    batch.heads.set(`${before.account}/${before.id}/${before.incarnation}`, headOf(before, position, true, version++));
  }
  if (after !== undefined) {
    const previous = sameIncarnation && beforeRows !== undefined ? beforeRows : new Map<RowKey, DatasetRecord>();
    if (previous === beforeRows && before === after) return next; // the event changed nothing
    for (const key of previous.keys()) if (!after.rows.has(key)) batch.rows.push(rowOf(after, key, version++, null));
    for (const [key, record] of after.rows) if (previous.get(key) !== record) batch.rows.push(rowOf(after, key, version++, record));
    batch.heads.set(`${after.account}/${after.id}/${after.incarnation}`, headOf(after, position, false, position.offset * PER_EVENT + PER_EVENT - 1));
  }
  return next;
}

export const writeBatch = (store: ProjectionStore, batch: Batch): Promise<void> => store.write(batch.rows, [...batch.heads.values()]);

/** Folds events into a state of their own (a copy: evolve consumes what it is given). */
export function pureFold(events: readonly DatasetEvent[]): State {
  let s = initialState();
  for (const e of events) s = evolve(s, e);
  return s;
}

/** A dataset state as plain data, for toEqual: row keys and records in order. */
export const plain = (ds: DatasetState | undefined): unknown =>
  ds === undefined ? undefined : { ...ds, rows: [...ds.rows.entries()] };

import { randomBytes } from 'node:crypto';
import type { ProjectedHead, ProjectedRow, ProjectionStore, ReadModel, SchemaStore, StreamPosition } from '@pushbase/contracts';
import { evolve, initialState, type DatasetEvent, type DatasetState, type RowKey, type State } from '@pushbase/domain';
import { project } from '../../projector/src/project';
import { RowSlots } from '../../projector/src/slots';
import { connectClickHouse, type ClickHouseConnection } from '../src/client';
import { migrate } from '../src/migrations';
import { quoteIdentifier } from '../src/sql';
import { ClickHouseHeadsStore } from '../src/heads-store';
import { ClickHouseReadModel } from '../src/read-model';
import { ClickHouseProjectionStore } from '../src/write-store';

export const CLICKHOUSE_URL = process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

/** The projection's three adapters on one database: the projector's store, the read model, the heads view. */
export interface Projection {
  readonly store: ClickHouseProjectionStore;
  readonly readModel: ClickHouseReadModel;
  readonly heads: ClickHouseHeadsStore;
}

export const projectionIn = (conn: ClickHouseConnection, database: string, options?: ConstructorParameters<typeof ClickHouseProjectionStore>[2]): Projection => ({
  store: new ClickHouseProjectionStore(conn, database, options),
  readModel: new ClickHouseReadModel(conn, database),
  heads: new ClickHouseHeadsStore(conn, database),
});

/** The read side as one object, as the projection contract takes it (the memory projection is one). */
export const projectionReads = ({ readModel, heads }: Projection): SchemaStore & ReadModel => ({
  get: (account, id) => heads.get(account, id),
  count: (account) => heads.count(account),
  listDatasets: (account) => readModel.listDatasets(account),
  listRecords: (account, id) => readModel.listRecords(account, id),
  queryRecords: (account, id, query) => readModel.queryRecords(account, id, query),
  aggregate: (account, id, query) => readModel.aggregate(account, id, query),
});

/**
 * A migrated database of its own (pb_test_<random>) on the shared ClickHouse, with the projection's adapters
 * on it; `drop` removes it. Fails, never skips, when ClickHouse cannot be reached.
 */
export interface TestDatabase extends Projection {
  readonly conn: ClickHouseConnection;
  readonly database: string;
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
    ...projectionIn(conn, database),
    drop: async () => {
      await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(database)}` });
      await conn.close();
    },
  };
}

/*
 * Events reach the store the way the projector delivers them: each folded by the projector's own
 * `project` (the domain's evolve, rows and heads derived from the stream position), gathered into one
 * batch per write. Imported by path, not as a package: the projector depends on this package, and only
 * these tests go the other way.
 */
export interface Batch {
  readonly rows: ProjectedRow[];
  readonly heads: Map<string, ProjectedHead>;
}
export const emptyBatch = (): Batch => ({ rows: [], heads: new Map() });

/** The row slots of each state projectEvent made (a State holds none). */
const slotsOf = new WeakMap<DatasetState, RowSlots>();

/** A state loaded from the store, with its row slots, as projectEvent then takes it. */
export function holdLoaded(state: DatasetState, slots: ReadonlyMap<RowKey, number>): DatasetState {
  slotsOf.set(state, RowSlots.of(slots));
  return state;
}

/** Folds one event into `state` and adds the rows and head it changes to `batch`; returns the new state. */
export function projectEvent(state: State, event: DatasetEvent, position: StreamPosition, batch: Batch): State {
  const held = state.get(event.account)?.get(event.dataset);
  // The tests never redeliver through this path: any earlier offset of the partition stands for "before".
  const slots = held === undefined ? undefined : slotsOf.get(held);
  if (held !== undefined && slots === undefined && held.rows.size > 0) throw new Error(`the slots of ${event.dataset}'s rows are unknown: hold a loaded state with holdLoaded`);
  const step = project(held === undefined ? undefined : { state: held, slots: slots ?? new RowSlots(), position: { partition: position.partition, offset: -1 } }, event, position);
  if (step.dataset.state !== undefined) slotsOf.set(step.dataset.state, step.dataset.slots);
  batch.rows.push(...step.rows);
  if (step.head !== undefined) batch.heads.set(`${step.head.account}/${step.head.dataset}/${step.head.incarnation}`, step.head);
  const next = step.dataset.state;
  let datasets = state.get(event.account);
  if (next === undefined) {
    datasets?.delete(event.dataset);
    if (datasets?.size === 0) state.delete(event.account);
  } else {
    if (datasets === undefined) state.set(event.account, (datasets = new Map<string, DatasetState>()));
    datasets.set(event.dataset, next);
  }
  return state;
}

/**
 * One partition's stream from an empty state: each event given is folded at the partition's next offset
 * (from 0), its rows and head added to the batch given with it.
 */
export function partitionStream(partition: number): (batch: Batch, event: DatasetEvent) => void {
  let state: State = initialState();
  let offset = 0;
  return (batch, event) => {
    state = projectEvent(state, event, { partition, offset: offset++ }, batch);
  };
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

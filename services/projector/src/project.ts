import { LIMITS, RowMap, evolve, type DatasetDefinition, type DatasetEvent, type DatasetRecord, type DatasetState, type RowChanges, type RowKey, type State } from '@pushbase/domain';
import type { LoadedDataset, ProjectedHead, ProjectedRow, StreamPosition } from '@pushbase/contracts';
import { RowSlots } from './slots';

/*
 * The pure heart of the projector: one event, one dataset, no I/O. The fold is the domain's own `evolve`;
 * this module only looks at what evolve changed and names it as rows for a ReplacingMergeTree.
 */

/**
 * Versions are `offset × VERSION_STRIDE + index`, the index counting the rows one event writes. An event
 * writes at most LIMITS.recordsPerRequest live rows (decide caps a request at 500 records) and at most
 * LIMITS.recordsPerDataset tombstones (it can remove no more rows than the dataset held), 5500 in all, so
 * 8192 leaves room and versions never collide across events. 2^53 / 8192 ≈ 1.1 × 10^12 offsets fit in a
 * JavaScript number (and in ClickHouse's UInt64).
 */
export const VERSION_STRIDE = 8192;
export const MAX_ROWS_PER_EVENT = LIMITS.recordsPerRequest + LIMITS.recordsPerDataset;

/**
 * A dataset as the projector holds it between events: the fold's state, its records held as heldRecord()
 * keeps them, the store slot of each of its rows (slots.ts), and the last position applied.
 */
export interface ProjectedDataset {
  /** undefined once the dataset is deleted (or before it was ever defined). */
  readonly state: DatasetState | undefined;
  /** The slot of every row of `state` (empty without a state). Consumed with the dataset by project(). */
  readonly slots: RowSlots;
  readonly position: StreamPosition;
}

export interface ProjectionStep {
  /** What to hold for the dataset afterwards. */
  readonly dataset: ProjectedDataset;
  /** false when the event was at or before the dataset's last applied position (a redelivery). */
  readonly applied: boolean;
  /** New or changed live rows in insertion order, then a tombstone for every removed row whose slot no new row took. */
  readonly rows: readonly ProjectedRow[];
  /** The dataset's head after the event; undefined when the event changed nothing. */
  readonly head: ProjectedHead | undefined;
}

/** Thrown for an event the version scheme cannot hold, or a dataset that left its partition. */
export class ProjectionError extends Error {
  override readonly name = 'ProjectionError';
}

export const versionOf = (position: StreamPosition, index: number): number => position.offset * VERSION_STRIDE + index;

/**
 * Whether `position` is at or before `last`. One dataset's events live in one partition (the topic is
 * keyed by account/dataset), so only offsets within that partition compare. A dataset met in another
 * partition means the topic's partition count changed, which remaps keys: its versions would no longer
 * grow, so the projection must be rebuilt by replay rather than silently corrupted.
 */
export function isRedelivery(position: StreamPosition, last: StreamPosition): boolean {
  if (position.partition !== last.partition) {
    throw new ProjectionError(
      `dataset events moved from partition ${last.partition} to ${position.partition}: the topic's partition count changed; rebuild the projection with replay`,
    );
  }
  return position.offset <= last.offset;
}

/** evolveDataset with `before`'s RowMap noting its changes in `changes` (when given). */
function evolveTracked(before: DatasetState | undefined, event: DatasetEvent, changes: RowChanges | undefined): DatasetState | undefined {
  if (changes === undefined) return evolveDataset(before, event);
  const rows = (before as DatasetState).rows as RowMap;
  rows.track(changes);
  try {
    return evolveDataset(before, event);
  } finally {
    rows.track(undefined);
  }
}

/** The fold of one event on one dataset, through the domain's whole-state evolve. Consumes `before`. */
function evolveDataset(before: DatasetState | undefined, event: DatasetEvent): DatasetState | undefined {
  const state: State = new Map();
  if (before !== undefined) state.set(event.account, new Map([[event.dataset, before]]));
  return evolve(state, event).get(event.account)?.get(event.dataset);
}

/*
 * What the projector keeps of a stored record between events. Its rows already carry every value to the
 * store; the fold reads a stored record again in one place only: the window ordering rows by a request's
 * `delete_by`, which decide accepts only for a date or datetime field (records.ts, parseDeleteBy). So a
 * held record keeps the values of the dataset's date and datetime fields and nothing else, and a dataset
 * without such fields holds one shared empty record per row. A held 5000-row dataset is then the size of
 * its row keys (and dates), not of its records, so the memory bound (PUSHBASE_PROJECTOR_MAX_ROWS) covers
 * several times more datasets before states must be dropped and read back from the store.
 */
const NO_VALUES: DatasetRecord = Object.freeze({});
const windowFieldsOf = new WeakMap<DatasetDefinition, readonly string[]>();

/** The fields a `delete_by` may name: the definition's date and datetime fields. */
function windowFields(definition: DatasetDefinition): readonly string[] {
  let fields = windowFieldsOf.get(definition);
  if (fields === undefined) {
    fields = Object.entries(definition.fields)
      .filter(([, f]) => f.type === 'date' || f.type === 'datetime')
      .map(([key]) => key);
    windowFieldsOf.set(definition, fields);
  }
  return fields;
}

function heldRecord(fields: readonly string[], record: DatasetRecord): DatasetRecord {
  if (fields.length === 0) return NO_VALUES;
  const held: Record<string, DatasetRecord[string]> = {};
  for (const f of fields) held[f] = record[f] ?? null;
  return held;
}

/** A state as the projector holds it (see heldRecord); for states read back from the store. Consumes `state`. */
export function heldState(state: DatasetState): DatasetState {
  const fields = windowFields(state.definition);
  // Setting an existing key keeps its place in the map, so the insertion order the window needs is kept.
  for (const [key, record] of state.rows) state.rows.set(key, heldRecord(fields, record));
  return state;
}

/**
 * A dataset loaded from the store as project() takes it: its state (its rows in a RowMap, which project()
 * reads appends from without scanning it) and the slots of its rows.
 */
export const loadedDataset = (loaded: LoadedDataset): ProjectedDataset => ({ state: asRowMap(loaded.state), slots: RowSlots.of(loaded.slots), position: loaded.position });

function asRowMap(state: DatasetState | undefined): DatasetState | undefined {
  if (state === undefined || state.rows instanceof RowMap) return state;
  const rows = new RowMap();
  for (const [key, record] of state.rows) rows.set(key, record);
  return { ...state, rows };
}

const rowKeyText = (key: RowKey): string => (typeof key === 'number' ? String(key) : key);

const recordsOfEvent = (event: DatasetEvent): readonly DatasetRecord[] =>
  event.type === 'RecordsAppended' || event.type === 'RecordsReplaced' ? event.records : [];

/**
 * Folds `event` (at `position`) into the dataset held in `before` and derives the rows and head that make
 * the durable projection equal to the fold. `before` is consumed (evolve reuses its maps): use the
 * returned dataset afterwards. `before` must be the dataset the event names.
 *
 * Live rows are recognised by identity: a row the event inserted holds one of the event's record
 * objects. That holds for events decoded from the log (every record a fresh object; the rows held from
 * earlier events are heldRecord copies, never an event's objects).
 */
export function project(before: ProjectedDataset | undefined, event: DatasetEvent, position: StreamPosition): ProjectionStep {
  if (before !== undefined && isRedelivery(position, before.position)) return { dataset: before, applied: false, rows: [], head: undefined };

  const old = before?.state;
  // An append changes its dataset's RowMap in place, and the map notes the keys it sets and deletes: the
  // rows come from those alone, not from reading the whole 5000-row map before and after (most of the
  // fold's cost when it did). Any other event (a define, a replace, a delete) builds a new map or none;
  // evolve consumes the old state, so the keys that may be removed are read first.
  const tracked: RowChanges | undefined = event.type === 'RecordsAppended' && old?.rows instanceof RowMap && old.incarnation === event.incarnation ? { set: [], deleted: [] } : undefined;
  const oldKeys: readonly RowKey[] = old === undefined || tracked !== undefined ? [] : Array.from(old.rows.keys());
  const oldIncarnation = old?.incarnation;
  const oldNextRow = old?.nextRow;
  const slots = before?.slots ?? new RowSlots();
  const next = evolveTracked(old, event, tracked);
  const dataset: ProjectedDataset = { state: next, slots, position };
  if (next === old) return { dataset, applied: true, rows: [], head: undefined };

  const rows: ProjectedRow[] = [];
  const version = (): number => {
    const index = rows.length;
    if (index >= VERSION_STRIDE) {
      throw new ProjectionError(`event at ${position.partition}/${position.offset} writes more than ${VERSION_STRIDE} rows (the bound is ${MAX_ROWS_PER_EVENT})`);
    }
    return versionOf(position, index);
  };

  // Removed rows free their slots first, so the event's new rows take them: a reused slot's live row
  // replaces the removed one in the store and needs no tombstone (slots.ts).
  const removed: { key: RowKey; slot: number }[] = [];
  if (tracked !== undefined) {
    const rows = (next as DatasetState).rows;
    for (const key of tracked.deleted) {
      // A key deleted and set again is a unique_by merge: its row is rewritten below, in its own slot.
      if (rows.has(key)) continue;
      // No slot: a row this very event set, then the window dropped (or a key already released).
      const slot = slots.release(key);
      if (slot !== undefined) removed.push({ key, slot });
    }
  } else if (oldIncarnation !== undefined) {
    const kept = next !== undefined && next.incarnation === oldIncarnation ? next.rows : undefined;
    for (const key of oldKeys) {
      if (kept?.has(key) === true) continue;
      const slot = slots.release(key);
      if (slot === undefined) throw new ProjectionError(`row ${rowKeyText(key)} of ${event.account}/${event.dataset} has no slot`);
      removed.push({ key, slot });
    }
  }
  const taken = new Set<number>();
  const insert = (key: RowKey, record: DatasetRecord, fields: readonly string[]): void => {
    const live = next as DatasetState;
    let slot = slots.get(key);
    if (slot === undefined) {
      slot = slots.take(key);
      taken.add(slot);
    }
    const v = version();
    rows.push({ account: event.account, dataset: event.dataset, incarnation: live.incarnation, row_key: rowKeyText(key), slot, version: v, seq: v, deleted: false, record });
    live.rows.set(key, heldRecord(fields, record));
  };
  if (next !== undefined && tracked !== undefined) {
    // The fold sets each key of a request once, in the order the map then holds them (a merged key is
    // deleted first, so it moves to the end): the order of the notes is the map's order.
    const fields = windowFields(next.definition);
    const done = new Set<RowKey>();
    for (const key of tracked.set) {
      const record = next.rows.get(key);
      // Not there: set, then dropped by the window in the same event.
      if (record === undefined || done.has(key)) continue;
      done.add(key);
      insert(key, record, fields);
    }
  } else if (next !== undefined) {
    const inserted = new Set(recordsOfEvent(event));
    if (inserted.size > 0) {
      const fields = windowFields(next.definition);
      // The fold's map order is the insertion order; a version taken in that order is also the row's seq,
      // so listing live rows by seq gives recordsOf(). Each inserted record goes to its row whole and
      // stays held as heldRecord keeps it (setting an existing key keeps its place).
      for (const [key, record] of next.rows) {
        if (inserted.has(record)) insert(key, record, fields);
      }
    }
  }
  for (const { key, slot } of removed) {
    if (taken.has(slot)) continue;
    const v = version();
    rows.push({ account: event.account, dataset: event.dataset, incarnation: oldIncarnation as string, row_key: rowKeyText(key), slot, version: v, seq: v, deleted: true, record: null });
  }

  const shown = next ?? old;
  if (shown === undefined) return { dataset, applied: true, rows, head: undefined };
  const head: ProjectedHead = {
    account: event.account,
    dataset: event.dataset,
    incarnation: shown.incarnation,
    definition: shown.definition,
    created_at: shown.created_at,
    updated_at: next === undefined ? event.at : next.updated_at,
    record_count: next === undefined ? 0 : next.rows.size,
    next_row: next === undefined ? (oldNextRow ?? 0) : next.nextRow,
    position,
    // Above every row of the event: the store needs a dataset's head at least as new as the rows it covers.
    version: versionOf(position, VERSION_STRIDE - 1),
    deleted: next === undefined,
  };
  return { dataset, applied: true, rows, head };
}

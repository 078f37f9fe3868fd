import type { DatasetEvent, RecordsAppended, RecordsReplaced } from './events';
import { uniqueKey } from './records';
import { encodedRecordsOf, RowMap, type RowKey } from './rows';
import { LIMITS, type DatasetDefinition, type DatasetRecord, type FieldValue } from './types';

/** What the schema side knows of a dataset: enough to decide commands, no records. */
export interface DatasetSummary {
  readonly account: string;
  readonly id: string;
  readonly incarnation: string;
  readonly definition: DatasetDefinition;
  readonly created_at: number;
  readonly updated_at: number;
}

/**
 * One dataset's state. `rows` iterates oldest insertion first (a Map keeps insertion order, and a
 * unique_by merge deletes then re-inserts, which makes the merged record the newest, as docs/api.md → Append records says).
 * The fold makes it a RowMap, which may hold the newest rows still encoded (rows.ts).
 */
export interface DatasetState extends DatasetSummary {
  readonly rows: Map<RowKey, DatasetRecord>;
  /** Row keys of datasets without unique_by come from this counter, i.e. from event position. */
  readonly nextRow: number;
}

/** The whole read model: account → dataset id → state. */
export type State = Map<string, Map<string, DatasetState>>;

export const initialState = (): State => new Map();

/**
 * Applies the records of one request to a row map: unique_by merge (the new record replaces the stored
 * one whole), later-wins inside the request, row keys from the event position otherwise.
 * Returns the next row counter.
 */
function insertRows(rows: Map<RowKey, DatasetRecord>, uniqueBy: readonly string[], event: RecordsAppended | RecordsReplaced, nextRow: number): number {
  let next = nextRow;
  if (uniqueBy.length === 0) {
    // Keys by position need nothing of the records: an encoded event's stay encoded until used.
    const encoded = rows instanceof RowMap ? encodedRecordsOf(event) : undefined;
    if (encoded !== undefined) {
      (rows as RowMap).appendEncoded(next, encoded);
      return next + encoded.count;
    }
    for (const r of event.records) rows.set(next++, r);
    return next;
  }
  const records = event.records;
  // Within one request a later duplicate wins but keeps the first one's place (docs/api.md → Append records:
  // [d1→1, d2→2, d1→3, d3→4] → d1→3, d2→2, d3→4). Against a stored record, the new one replaces it whole
  // and is re-inserted, so it counts as newly inserted for the window.
  const request = new Map<string, DatasetRecord>();
  for (const r of records) request.set(uniqueKey(uniqueBy, r), r);
  for (const [key, r] of request) {
    rows.delete(key);
    rows.set(key, r);
  }
  return next;
}

/**
 * The 5000-record window (docs/api.md → The 5000-record window). Runs only when the dataset holds more
 * than the limit. Without `deleteBy` the oldest insertions go. With it, records are ordered by that field
 * and dropped from the oldest end in whole groups of equal value (a whole day for a date, an exact
 * instant for a datetime), so fewer than the limit may remain. Null values are the oldest and go first,
 * one by one, oldest insertion first.
 */
export function enforceWindow(rows: Map<RowKey, DatasetRecord>, deleteBy: string | null, limit: number = LIMITS.recordsPerDataset): void {
  let excess = rows.size - limit;
  if (excess <= 0) return;
  if (deleteBy === null) {
    if (rows instanceof RowMap) {
      rows.deleteOldest(excess);
      return;
    }
    for (const key of rows.keys()) {
      rows.delete(key);
      if (--excess === 0) return;
    }
    return;
  }
  const nulls: RowKey[] = [];
  const valued: { key: RowKey; value: string }[] = [];
  for (const [key, r] of rows) {
    const v: FieldValue = r[deleteBy] ?? null;
    if (v === null) nulls.push(key);
    else valued.push({ key, value: String(v) });
  }
  for (const key of nulls) {
    rows.delete(key);
    if (--excess === 0) return;
  }
  // Normalised dates and UTC datetimes sort as strings in time order. Array#sort is stable.
  valued.sort((a, b) =>
    a.value < b.value
      ? -1
      : // V8's sort only asks whether compare(a, b) < 0, so "after" and "equal" answer alike here.
        // Stryker disable next-line EqualityOperator,ConditionalExpression: equivalent, as said above
        a.value > b.value ? 1 : 0,
  );
  let i = 0;
  while (
    excess > 0 &&
    // excess never exceeds the valued rows left (the limit is not negative), so this bound is a guard only.
    // Stryker disable next-line EqualityOperator: equivalent, as said above
    i < valued.length
  ) {
    const group = (valued[i] as { value: string }).value;
    while (i < valued.length && (valued[i] as { value: string }).value === group) {
      rows.delete((valued[i] as { key: RowKey }).key);
      excess--;
      i++;
    }
  }
}

function evolveDataset(current: DatasetState | undefined, event: DatasetEvent): DatasetState | undefined {
  switch (event.type) {
    case 'DatasetDefined':
      // A redelivered definition of the live incarnation changes nothing.
      if (current !== undefined && current.incarnation === event.incarnation) return current;
      return {
        account: event.account,
        id: event.dataset,
        incarnation: event.incarnation,
        definition: event.definition,
        created_at: event.at,
        updated_at: event.at,
        rows: new RowMap(),
        nextRow: 0,
      };
    case 'RecordsAppended': {
      if (current === undefined || current.incarnation !== event.incarnation) return current;
      const nextRow = insertRows(current.rows, current.definition.unique_by, event, current.nextRow);
      enforceWindow(current.rows, event.delete_by);
      return { ...current, nextRow, updated_at: event.at };
    }
    case 'RecordsReplaced': {
      if (current === undefined || current.incarnation !== event.incarnation) return current;
      const rows = new RowMap();
      const nextRow = insertRows(rows, current.definition.unique_by, event, current.nextRow);
      enforceWindow(rows, null);
      return { ...current, rows, nextRow, updated_at: event.at };
    }
    case 'DatasetDeleted':
      if (current === undefined || current.incarnation !== event.incarnation) return current;
      return undefined;
    default: {
      const unknown: never = event;
      return unknownEvent(current, unknown);
    }
  }
}

// evolve never throws: an event of a type this version does not know leaves the state as it is.
const unknownEvent = (current: DatasetState | undefined, _event: never): DatasetState | undefined => current;

/**
 * evolve(state, event) → state. For speed with 5000-row datasets it reuses the given state's maps, so the
 * state passed in is consumed; fold from `initialState()` to get an independent copy. Deterministic: the
 * same events give the same state, whatever the clock says.
 */
export function evolve(state: State, event: DatasetEvent): State {
  let datasets = state.get(event.account);
  const current = datasets?.get(event.dataset);
  const next = evolveDataset(current, event);
  if (next === current) return state;
  if (next === undefined) {
    // A dataset was there to delete (next !== current), so its account's map exists.
    const remaining = datasets as Map<string, DatasetState>;
    remaining.delete(event.dataset);
    if (remaining.size === 0) state.delete(event.account);
    return state;
  }
  if (datasets === undefined) {
    datasets = new Map();
    state.set(event.account, datasets);
  }
  datasets.set(event.dataset, next);
  return state;
}

export const fold = (events: Iterable<DatasetEvent>, state: State = initialState()): State => {
  let s = state;
  for (const e of events) s = evolve(s, e);
  return s;
};

/** The records of a dataset, oldest insertion first. */
export const recordsOf = (ds: DatasetState): DatasetRecord[] => [...ds.rows.values()];

import type { LoadedValues, ProjectedHead, StoredDatasetRef } from '@pushbase/contracts';
import type { DatasetRecord, DatasetState, DatasetSummary, FieldValue, RowKey } from '@pushbase/domain';
import { selectCompact, type ClickHouseConnection } from './client';
import { decodeValue, slotsOf, STORED_COLUMNS } from './layout';
import type { ProjectionTables } from './migrations';
import { accountLiteral, datasetLiteral } from './sql';

/*
 * A dataset read back from the records table: its head row and its live rows in one SELECT, so both are of
 * one moment (docs/clickhouse.md → Crash safety): loads, record listings and head lookups all read a
 * dataset this way. FINAL … WHERE, never PREWHERE on `deleted` (docs/clickhouse.md → Statements).
 */

/** The row slot of a dataset's head row; its records' rows hold slots from 1 (ProjectedRow.slot). */
export const HEAD_SLOT = 0;

/** What a head row's JSON holds: the projected head but its key (the row's own columns) and its version and deletion (columns too). */
export type HeadJson = Omit<ProjectedHead, 'account' | 'dataset' | 'version' | 'deleted'>;

// Unambiguous: an account has no '/' (checkAccount).
export const datasetKey = (account: string, dataset: string): string => `${account}/${dataset}`;

/** The newest head (the highest version) of each dataset among `heads`, by datasetKey: a write may hold several of one dataset. */
export function newestHeads(heads: readonly ProjectedHead[]): Map<string, ProjectedHead> {
  const newest = new Map<string, ProjectedHead>();
  for (const h of heads) {
    const key = datasetKey(h.account, h.dataset);
    const seen = newest.get(key);
    if (seen === undefined || seen.version <= h.version) newest.set(key, h);
  }
  return newest;
}

/** The WHERE clause of some datasets: `(account, dataset) IN (…)` uses the primary key on 18.16 too. */
export function whereDatasets(refs: readonly StoredDatasetRef[]): string {
  if (refs.length === 1) {
    const [r] = refs as [StoredDatasetRef];
    return `account = ${accountLiteral(r.account)} AND dataset = ${datasetLiteral(r.dataset)}`;
  }
  return `(account, dataset) IN (${refs.map((r) => `(${accountLiteral(r.account)}, ${datasetLiteral(r.dataset)})`).join(', ')})`;
}

export interface StoredDataset {
  readonly head: HeadJson;
  readonly headVersion: number;
  readonly deleted: boolean;
  readonly state: DatasetState;
  readonly slots: Map<RowKey, number>;
}

/** A cell of a load's JSONCompact answer: numbers as numbers, 64-bit ones and the slots as text (toString). */
type Cell = string | number | null;
type StoredRow = readonly Cell[];

/** Where each selected column sits in a row of the answer. */
interface RowLayout {
  readonly account: number;
  readonly dataset: number;
  readonly slot: number;
  readonly incarnation: number;
  readonly key: number;
  readonly head: number;
  readonly deleted: number;
  readonly version: number;
  /** Stored slot column → its index. */
  readonly slots: ReadonlyMap<string, number>;
}

function rowLayout(columns: readonly string[]): RowLayout {
  const at = (name: string): number => {
    const i = columns.indexOf(name);
    if (i === -1) throw new Error(`a load's answer lacks the column ${name}`);
    return i;
  };
  const slots = new Map<string, number>();
  for (const c of STORED_COLUMNS) {
    const i = columns.indexOf(c.stored);
    if (i !== -1) slots.set(c.stored, i);
  }
  return { account: at('account'), dataset: at('dataset'), slot: at('row_slot'), incarnation: at('incarnation'), key: at('record_key'), head: at('head'), deleted: at('deleted'), version: at('version'), slots };
}

const text = (cell: Cell | undefined): string => (cell === null || cell === undefined ? '' : String(cell));

const slotSelect = (columns: typeof STORED_COLUMNS): string => columns.map((c) => `, toString(${c.stored}) AS ${c.stored}`).join('');
// What a read selects besides the keys and the head. `dates` reads every time slot (the columns of every
// date and datetime field, layout.ts): the one SELECT does not know the definition yet, and one query with
// every time slot beat a head-first pair of queries (docs/performance.md → Measurements behind the code).
const SLOT_SELECT: Readonly<Record<LoadedValues | 'head', string>> = {
  all: slotSelect(STORED_COLUMNS),
  dates: slotSelect(STORED_COLUMNS.filter((c) => c.kind === 'time')),
  head: '',
};

/**
 * The head rows and the live rows of some datasets, read in one SELECT so each dataset's are of one
 * moment: records with the `values` asked for, or (`head`) the head row alone and no records. In the
 * order of `refs`; undefined for a dataset the store never saw.
 */
export async function readDatasets(conn: ClickHouseConnection, tables: ProjectionTables, refs: readonly StoredDatasetRef[], values: LoadedValues | 'head'): Promise<(StoredDataset | undefined)[]> {
  if (refs.length === 0) return [];
  const headOnly = values === 'head';
  const { columns, rows } = await selectCompact<Cell>(
    conn,
    `SELECT account, dataset, row_slot, incarnation, record_key, head, deleted, toString(version) AS version${SLOT_SELECT[values]}
FROM ${tables.records} FINAL
WHERE ${whereDatasets(refs)} AND ${headOnly ? `row_slot = ${HEAD_SLOT}` : `(row_slot = ${HEAD_SLOT} OR deleted = 0)`}
ORDER BY account, dataset, seq`,
    refs.length === 1 ? `loading ${datasetKey(refs[0]?.account ?? '', refs[0]?.dataset ?? '')}` : `loading ${refs.length} datasets`,
  );
  const layout = rowLayout(columns);
  // Rows come grouped by dataset, each dataset's by seq.
  const byDataset = new Map<string, StoredRow[]>();
  for (const r of rows) {
    const key = datasetKey(text(r[layout.account]), text(r[layout.dataset]));
    let group = byDataset.get(key);
    if (group === undefined) byDataset.set(key, (group = []));
    group.push(r);
  }
  return refs.map(({ account, dataset }) => {
    const group = byDataset.get(datasetKey(account, dataset));
    return group === undefined ? undefined : decodeDataset(account, dataset, group, layout, values);
  });
}

/** One dataset's head row and live rows (readDatasets). */
export async function readDataset(conn: ClickHouseConnection, tables: ProjectionTables, account: string, dataset: string, values: LoadedValues | 'head'): Promise<StoredDataset | undefined> {
  const [stored] = await readDatasets(conn, tables, [{ account, dataset }], values);
  return stored;
}

/** A live dataset's summary from its head row, which is never behind its rows; undefined once deleted. */
export async function readSummary(conn: ClickHouseConnection, tables: ProjectionTables, account: string, id: string): Promise<DatasetSummary | undefined> {
  const stored = await readDataset(conn, tables, account, id, 'head');
  if (stored === undefined || stored.deleted) return undefined;
  const { rows: _rows, nextRow: _nextRow, ...summary } = stored.state;
  return summary;
}

function decodeDataset(account: string, dataset: string, rows: readonly StoredRow[], layout: RowLayout, values: LoadedValues | 'head'): StoredDataset | undefined {
  const headRow = rows.find((r) => Number(r[layout.slot]) === HEAD_SLOT);
  if (headRow === undefined) return undefined;
  const head = JSON.parse(text(headRow[layout.head])) as HeadJson;
  const deleted = Number(headRow[layout.deleted]) === 1;
  // Date and datetime fields are exactly the fields in time slots (layout.ts).
  const read = values === 'head' ? [] : values === 'dates' ? slotsOf(head.definition).filter((s) => s.kind === 'time') : slotsOf(head.definition);
  const slots = read.map((s) => {
    const at = layout.slots.get(s.stored);
    if (at === undefined) throw new Error(`a load's answer lacks the column ${s.stored}`);
    return { slot: s, at };
  });
  const numbered = head.definition.unique_by.length === 0;
  const records = new Map<RowKey, DatasetRecord>();
  const rowSlots = new Map<RowKey, number>();
  if (!deleted && values !== 'head') {
    for (const r of rows) {
      const slot = Number(r[layout.slot]);
      // Rows of an earlier incarnation that were never tombstoned are not this dataset's: their slots
      // count as free, and the next rows written take them over.
      if (r[layout.incarnation] !== head.incarnation || slot === HEAD_SLOT) continue;
      const key = numbered ? Number(r[layout.key]) : text(r[layout.key]);
      const record: Record<string, FieldValue> = {};
      for (const { slot: s, at } of slots) record[s.key] = decodeValue(s, r[at] as string | null);
      records.set(key, record);
      rowSlots.set(key, slot);
    }
  }
  const state: DatasetState = {
    account,
    id: dataset,
    incarnation: head.incarnation,
    definition: head.definition,
    created_at: head.created_at,
    updated_at: head.updated_at,
    rows: records,
    nextRow: head.next_row,
  };
  return { head, headVersion: Number(headRow[layout.version]), deleted, state, slots: rowSlots };
}

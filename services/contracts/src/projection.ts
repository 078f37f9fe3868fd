import type { DatasetDefinition, DatasetRecord, DatasetState, RowKey } from '@pushbase/domain';
import type { StreamPosition } from './ports';

/*
 * What the projector hands to a durable read model (ClickHouse), in the product's terms. The projector
 * folds events with the domain's `evolve` and turns each change of a dataset's rows into rows of this shape;
 * the store maps them onto its tables. Every `version` comes from the stream position, never a clock, so a
 * redelivered event writes identical rows, which collapse.
 */

/** One row of a dataset as of one event: a live record, or a tombstone for a removed one. */
export interface ProjectedRow {
  readonly account: string;
  readonly dataset: string;
  readonly incarnation: string;
  /** The fold's row key as a string: the unique key under unique_by, else the row's number in decimal. */
  readonly row_key: string;
  /**
   * Where the row sits in the store, from 1: a live row holds its slot until it is removed, then a new
   * row of the dataset may take it, so the store keeps a bounded number of rows per dataset (the
   * projector's slots.ts). Rows are keyed in the store by account, dataset and slot.
   */
  readonly slot: number;
  /** Grows along the stream: position-derived (e.g. offset × 8192 + index within the event). */
  readonly version: number;
  /** Insertion order within the dataset: listing live rows by `seq` gives the fold's oldest-first order. */
  readonly seq: number;
  /** true for a removal (window eviction, replace, clear, delete); `record` is then null. */
  readonly deleted: boolean;
  readonly record: DatasetRecord | null;
}

/** A dataset's head: its definition and where its projection stands in the stream. */
export interface ProjectedHead {
  readonly account: string;
  readonly dataset: string;
  readonly incarnation: string;
  readonly definition: DatasetDefinition;
  readonly created_at: number;
  readonly updated_at: number;
  readonly record_count: number;
  /** The fold's row counter (row keys of datasets without unique_by). */
  readonly next_row: number;
  /** The last event applied to this dataset: events at or before it are skipped on redelivery. */
  readonly position: StreamPosition;
  readonly version: number;
  /** true once the dataset is deleted (the head of a deleted incarnation). */
  readonly deleted: boolean;
}

/**
 * A dataset loaded back from the store, to resume folding after its state was dropped from memory: the
 * state as of `position` (undefined once the dataset is deleted), and that position, the last event
 * applied to it. Both come from one moment of the store, also after a crash in the middle of a write.
 */
export interface LoadedDataset {
  readonly state: DatasetState | undefined;
  /** The slot (ProjectedRow.slot) of every row of `state`; empty without a state. */
  readonly slots: ReadonlyMap<RowKey, number>;
  readonly position: StreamPosition;
}

/**
 * Which values a load gives back. `all`: every field of every record. `dates`: only the values of the
 * dataset's date and datetime fields (the only ones the fold reads again: a `delete_by` window orders rows
 * by one of them), every other field left out of the record; a dataset without such fields loads empty
 * records. Row order, keys and the rest of the state are the same either way. The projector loads `dates`:
 * it holds no more than that (project.ts, heldRecord), and a store may read less for it.
 */
export type LoadedValues = 'all' | 'dates';

export interface LoadOptions {
  /** Default `all`. */
  readonly values?: LoadedValues;
}

/** One dataset of one account, as the projection stores it. */
export interface StoredDatasetRef {
  readonly account: string;
  readonly dataset: string;
}

/** A write checked and encoded ahead of its turn (ProjectionStore.prepare). */
export interface PreparedWrite {
  /** Stores the write, as `write` does; after an `unavailable` rejection it may be sent again. */
  send(): Promise<void>;
}

/**
 * Rows of a coming write, checked (and encoded, by a store that encodes) as they are added, so that a caller
 * need not hold the row objects of a large write until it is prepared (ProjectionStore.begin).
 */
export interface PendingRows {
  /**
   * Adds rows; `heads` are heads whose definitions the live rows take (an event's head after it, or the
   * write's heads). Throws for a row that breaks the write's rules; the rows are then not to be written.
   */
  add(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): void;
  /** Rows added so far. */
  readonly size: number;
}

export interface ProjectionStore {
  /** Rows for a later prepare(), added as they come. */
  begin(): PendingRows;
  /**
   * `write`'s checks and encoding without the sending, so that a caller can encode its next write while the
   * store still takes the one before: throws what `write` rejects with for a write that breaks its rules.
   * `write(rows, heads)` is `prepare([rows added to begin()], heads).send()`; each PendingRows is used once.
   */
  prepare(pending: readonly PendingRows[], heads: readonly ProjectedHead[]): PreparedWrite;
  /**
   * Writes rows and heads of many events at once, atomically per dataset; resolves when the store has them.
   * Every dataset with rows in the write needs a head in it whose version is at least that of its rows
   * (the head's position is where a reload resumes), and every live row needs the head of its own
   * incarnation (for its definition); a batch that deletes and re-creates a dataset passes one head per
   * incarnation. Rejects with a DomainError of code `unavailable` when the store cannot take the write now
   * (retry later; nothing, or the whole write, is stored), and with a plain Error for a write that breaks
   * these rules or is larger than one atomic insert (MAX_INSERT_ROWS of the ClickHouse store).
   */
  write(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): Promise<void>;
  /**
   * The live dataset (rows oldest insertion first, as the fold holds them) and the last applied position;
   * the last applied position of a deleted dataset comes back with `state` undefined, so redelivered
   * events of it are skipped too; undefined when the store never saw the dataset.
   */
  load(account: string, dataset: string, options?: LoadOptions): Promise<LoadedDataset | undefined>;
  /**
   * `load` of several datasets at once (fewer, larger reads of the store), in the order of `refs`. Each
   * dataset's state and position are of one moment, as load's; different datasets' need not be.
   */
  loadMany(refs: readonly StoredDatasetRef[], options?: LoadOptions): Promise<(LoadedDataset | undefined)[]>;
}

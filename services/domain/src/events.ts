import type { DatasetDefinition, DatasetRecord } from './types';
import type { IdempotencyMark } from './idempotency';

/**
 * Bumped when an event's stored shape changes; readers upcast older versions (services/contracts/src/
 * event-codec.ts). 2: records stored by position (fields once, then rows of values) instead of as objects;
 * the in-memory shape below did not change.
 */
export const EVENT_SCHEMA_VERSION = 2;

interface EventBase {
  readonly schema_version: typeof EVENT_SCHEMA_VERSION;
  readonly account: string;
  readonly dataset: string;
  /**
   * A new value each time the id is created, so events of a deleted dataset can never touch its successor.
   */
  readonly incarnation: string;
  /** Server time in epoch ms. Informational: row order comes from the event's position, never from this. */
  readonly at: number;
  /**
   * The Idempotency-Key the write was sent with, and its request's fingerprint (idempotency.ts). Optional
   * and ignored by the fold: an event without it is a write sent without a key.
   */
  readonly idempotency?: IdempotencyMark;
}

export interface DatasetDefined extends EventBase {
  readonly type: 'DatasetDefined';
  readonly definition: DatasetDefinition;
}
export interface RecordsAppended extends EventBase {
  readonly type: 'RecordsAppended';
  /** Normalised records in request order. */
  readonly records: readonly DatasetRecord[];
  /** The date or datetime field that orders truncation, or null for insertion order. */
  readonly delete_by: string | null;
}
export interface RecordsReplaced extends EventBase {
  readonly type: 'RecordsReplaced';
  readonly records: readonly DatasetRecord[];
}
export interface DatasetDeleted extends EventBase {
  readonly type: 'DatasetDeleted';
}

export type DatasetEvent = DatasetDefined | RecordsAppended | RecordsReplaced | DatasetDeleted;

/** The stream an event belongs to; one dataset's events keep their order within it. */
export const streamKey = (account: string, dataset: string): string => `${account}/${dataset}`;

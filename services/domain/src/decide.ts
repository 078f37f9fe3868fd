import { definitionDifferences, parseDatasetId, parseDefinition } from './definition';
import { DomainError, invalid } from './errors';
import { EVENT_SCHEMA_VERSION, type DatasetDefined, type DatasetDeleted, type RecordsAppended, type RecordsReplaced } from './events';
import type { DatasetSummary } from './fold';
import { checkWriteBody, parseDeleteBy, parseRecords } from './records';
import { LIMITS } from './types';

/*
 * Commands are decided from the schema side only (a DatasetSummary), never from the records, so the
 * record service is stateless and needs no single-writer lock: the window is enforced by the fold.
 * Time (`at`) and the fresh incarnation are inputs, chosen by the caller.
 */

export const notFound = (): DomainError => new DomainError('not_found', 'Dataset not found');

// Keeps a leading byte-order mark in the text, so that the one rule below applies to bytes and strings alike.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });
const BYTE_ORDER_MARK = 0xfeff;

/**
 * Parses a request body (its bytes, or its text) as JSON whatever its Content-Type said; an empty body reads
 * as absent. One leading UTF-8 byte-order mark is skipped: RFC 8259 §8.1 lets a parser ignore it, and
 * Windows clients send one — Windows PowerShell's `Out-File`/`Set-Content -Encoding UTF8` write it into the
 * files that `Invoke-RestMethod -InFile` sends, and .NET's `Encoding.UTF8` emits it through a StreamWriter.
 * Every write route parses here (create in the gateway, append and replace in the record service, maybe in
 * a worker thread), so they all accept the same bodies.
 */
export function parseJsonBody(body: string | Uint8Array): unknown {
  const decoded = typeof body === 'string' ? body : utf8.decode(body);
  const text = decoded.charCodeAt(0) === BYTE_ORDER_MARK ? decoded.slice(1) : decoded;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (e: unknown) {
    if (text.trim() === '') return undefined;
    throw invalid(`The request body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  // JSON.parse takes any depth, but whatever walks the value recursively later (JSON.stringify to forward a
  // definition over gRPC, structured clone) overflows the stack on a million levels: refused here, once.
  if (nestedDeeper(value, LIMITS.jsonDepth)) {
    throw invalid(`The request body nests arrays and objects more than ${LIMITS.jsonDepth} levels deep; a valid body needs at most 3`);
  }
  return value;
}

/** Whether `v` holds arrays and objects more than `levels` deep; recurses at most `levels` times. */
function nestedDeeper(v: unknown, levels: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (levels === 0) return true;
  if (Array.isArray(v)) return v.some((x) => nestedDeeper(x, levels - 1));
  for (const key in v) if (nestedDeeper((v as Record<string, unknown>)[key], levels - 1)) return true;
  return false;
}

const asBody = (body: unknown): Readonly<Record<string, unknown>> => {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('The request body must be a JSON object');
  }
  return body as Record<string, unknown>;
};

export interface DefineCommand {
  readonly account: string;
  readonly id: string;
  readonly body: unknown;
  readonly at: number;
  /** Used only when the dataset is created. */
  readonly newIncarnation: string;
}

export type DefineDecision =
  | { readonly outcome: 'found'; readonly dataset: DatasetSummary }
  | { readonly outcome: 'created'; readonly dataset: DatasetSummary; readonly event: DatasetDefined };

/**
 * Find or create (`PUT /datasets/:id`). `existing` is the live dataset with this id, `count` the account's
 * datasets, `limit` the account's dataset quota in force (the API's limit unless the account has its own).
 */
export function decideDefine(cmd: DefineCommand, existing: DatasetSummary | undefined, count: number, limit: number = LIMITS.datasetsPerAccount): DefineDecision {
  const id = parseDatasetId(cmd.id);
  const definition = parseDefinition(cmd.body);
  if (existing !== undefined) {
    const diff = definitionDifferences(existing.definition, definition);
    if (diff.length > 0) {
      throw new DomainError('conflict', `A dataset with different fields already exists with the ID "${id}": ${diff.join('; ')}`);
    }
    return { outcome: 'found', dataset: existing };
  }
  if (count >= limit) {
    throw new DomainError(
      'dataset_limit',
      `You have reached the limit of ${limit} datasets for this account. Delete datasets you no longer need to make room for new ones.`,
    );
  }
  const event: DatasetDefined = {
    type: 'DatasetDefined',
    schema_version: EVENT_SCHEMA_VERSION,
    account: cmd.account,
    dataset: id,
    incarnation: cmd.newIncarnation,
    at: cmd.at,
    definition,
  };
  const dataset: DatasetSummary = { account: cmd.account, id, incarnation: cmd.newIncarnation, definition, created_at: cmd.at, updated_at: cmd.at };
  return { outcome: 'created', dataset, event };
}

export interface WriteCommand {
  readonly account: string;
  readonly id: string;
  readonly body: unknown;
  readonly at: number;
}

/** The envelope of an event about a live dataset, as of the command's time. */
const about = (cmd: { readonly account: string; readonly at: number }, dataset: DatasetSummary) =>
  ({ schema_version: EVENT_SCHEMA_VERSION, account: cmd.account, dataset: dataset.id, incarnation: dataset.incarnation, at: cmd.at }) as const;

/** Append (`POST /datasets/:id/data`). */
export function decideAppend(cmd: WriteCommand, dataset: DatasetSummary | undefined): RecordsAppended {
  parseDatasetId(cmd.id);
  const body = asBody(cmd.body);
  checkWriteBody(body, 'append');
  if (dataset === undefined) throw notFound();
  const records = parseRecords(dataset.definition, body.data);
  const delete_by = parseDeleteBy(dataset.definition, body);
  return {
    type: 'RecordsAppended',
    ...about(cmd, dataset),
    records,
    delete_by,
  };
}

/** Replace (`PUT /datasets/:id/data`); `data: []` clears the dataset and keeps its schema. */
export function decideReplace(cmd: WriteCommand, dataset: DatasetSummary | undefined): RecordsReplaced {
  parseDatasetId(cmd.id);
  const body = asBody(cmd.body);
  checkWriteBody(body, 'replace');
  if (dataset === undefined) throw notFound();
  const records = parseRecords(dataset.definition, body.data);
  return {
    type: 'RecordsReplaced',
    ...about(cmd, dataset),
    records,
  };
}

/** Delete (`DELETE /datasets/:id`): the schema and records go and the id is free again. */
export function decideDelete(cmd: Omit<WriteCommand, 'body'>, dataset: DatasetSummary | undefined): DatasetDeleted {
  parseDatasetId(cmd.id);
  if (dataset === undefined) throw notFound();
  return {
    type: 'DatasetDeleted',
    ...about(cmd, dataset),
  };
}

import { Readable } from 'node:stream';
import { ClickHouseError, ClickHouseLogLevel, createClient, drainStream, type ClickHouseClient } from '@clickhouse/client';
import { redactUrl } from '@pushbase/telemetry';
import { DomainError } from '@pushbase/domain';
import { quoteIdentifier } from './sql';

/*
 * A thin door onto @clickhouse/client: one client per store (no module-level singleton), errors turned into
 * what a caller can act on. "Cannot reach / overloaded" becomes a DomainError of code `unavailable`, which
 * the projector retries with backoff; anything else (a statement ClickHouse refuses) is a bug and is
 * thrown as an Error naming the statement.
 */

export interface ClickHouseConnection {
  readonly url: string;
  readonly client: ClickHouseClient;
  close(): Promise<void>;
}

export function connectClickHouse(url: string, options: { requestTimeoutMs?: number } = {}): ClickHouseConnection {
  const client = createClient({
    url,
    request_timeout: options.requestTimeoutMs ?? 60_000,
    // The server is on the same network; compressing 5000-row inserts costs more CPU than it saves.
    compression: { request: false, response: false },
    // Failures reach the caller as rejections; the client's own console logging would only repeat them.
    log: { level: ClickHouseLogLevel.OFF },
  });
  return { url, client, close: () => client.close() };
}

// Server error codes that say "not now" rather than "never": the same statement may succeed later.
const TRANSIENT_CODES = new Set([
  '159', // TIMEOUT_EXCEEDED
  '164', // READONLY (a replica in read-only mode)
  '202', // TOO_MANY_SIMULTANEOUS_QUERIES
  '209', // SOCKET_TIMEOUT
  '210', // NETWORK_ERROR
  '241', // MEMORY_LIMIT_EXCEEDED
  '242', // TABLE_IS_READ_ONLY
  '252', // TOO_MANY_PARTS
  '319', // UNKNOWN_STATUS_OF_INSERT
  '425', // SYSTEM_ERROR
]);

const describe = (e: unknown): string => (e instanceof Error ? e.message.split('\n')[0] ?? e.name : String(e));

/** The server's error code when the server answered at all (18.16's messages lack the type the client parses). */
function serverCode(e: unknown): string | undefined {
  if (e instanceof ClickHouseError) return e.code;
  return e instanceof Error ? /^Code: (\d+)/.exec(e.message)?.[1] : undefined;
}

/** Wraps a failure of `what` so the caller can tell "retry later" from "this is a bug". */
export function storeError(configuredUrl: string, what: string, e: unknown): Error {
  if (e instanceof DomainError) return e;
  const url = redactUrl(configuredUrl);
  const code = serverCode(e);
  if (code === undefined) {
    // Not an answer of the server: a refused or reset connection, a timeout, DNS.
    return new DomainError('unavailable', `ClickHouse at ${url} cannot be reached for ${what}: ${describe(e)}`);
  }
  if (TRANSIENT_CODES.has(code)) {
    return new DomainError('unavailable', `ClickHouse at ${url} cannot take ${what} now (code ${code}): ${describe(e)}`);
  }
  return new Error(`ClickHouse at ${url} refused ${what} (code ${code}): ${describe(e)}`, { cause: e });
}

export async function command(conn: ClickHouseConnection, query: string, what: string): Promise<void> {
  try {
    await conn.client.command({ query });
  } catch (e) {
    throw storeError(conn.url, what, e);
  }
}

/**
 * Every read runs with the automatic move of WHERE conditions to PREWHERE switched off. With FINAL, a
 * condition on `deleted` moved to PREWHERE filters the tombstone out before versions collapse and brings
 * the removed row back. 18.16 does not move conditions when FINAL is present (a test shows it), releases
 * from 2019 to mid-2021 did (ClickHouse issue 8684, fixed by `optimize_move_to_prewhere_if_final`, off by
 * default); the setting exists in all of them, so reads are right whichever version answers.
 */
const READ_SETTINGS = { optimize_move_to_prewhere: 0 } as const;

/** A JSONCompact answer: the column names, and each row's values in that order. */
export interface CompactRows<Cell> {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly Cell[])[];
}

/**
 * A SELECT whose rows come as arrays in one JSONCompact document: for reads of thousands of rows (a
 * dataset's load), whose per-row objects and per-line parses cost about as long as the server's own work
 * (docs/performance.md → Measurements behind the code). An answer the server broke off (an exception
 * written into the body after rows went out) is refused, never taken for fewer rows.
 */
export async function selectCompact<Cell>(conn: ClickHouseConnection, query: string, what: string): Promise<CompactRows<Cell>> {
  let text: string;
  try {
    const rs = await conn.client.query({ query, format: 'JSONCompact', clickhouse_settings: READ_SETTINGS });
    text = await rs.text();
  } catch (e) {
    throw storeError(conn.url, what, e);
  }
  let answer: { meta?: readonly { name: string }[]; data?: readonly (readonly Cell[])[]; rows?: number; exception?: string };
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    // Newer servers append the exception after the document (the last such line: a value may hold the words
    // too); its code says whether to retry.
    throw storeError(conn.url, what, new Error([...text.matchAll(/Code: \d+[^\n]*/g)].at(-1)?.[0] ?? 'an answer that is not one JSON document'));
  }
  if (answer.exception !== undefined) throw storeError(conn.url, what, new Error(answer.exception.trim()));
  const { meta, data } = answer;
  if (meta === undefined || data === undefined || answer.rows !== data.length) throw new Error(`ClickHouse gave ${what} an incomplete JSONCompact answer`);
  return { columns: meta.map((c) => c.name), rows: data };
}

export async function selectRows<T>(conn: ClickHouseConnection, query: string, what: string): Promise<T[]> {
  try {
    const rs = await conn.client.query({ query, format: 'JSONEachRow', clickhouse_settings: READ_SETTINGS });
    return await rs.json<T>();
  } catch (e) {
    throw storeError(conn.url, what, e);
  }
}

/**
 * Sends an INSERT whose body was serialised here, not by the client, so its exact size is known before it
 * is sent (see MAX_INSERT_BYTES in write-store.ts) and no second copy of it is made. JSONEachRow by default;
 * RowBinary (row-binary.ts) needs the column list its rows follow. Column names are the store's own
 * constants, never user input.
 */
export async function insertBody(
  conn: ClickHouseConnection,
  table: string,
  body: Buffer,
  what: string,
  as: { readonly format: 'JSONEachRow' } | { readonly format: 'RowBinary'; readonly columns: readonly string[] } = { format: 'JSONEachRow' },
): Promise<void> {
  const query = as.format === 'RowBinary' ? `INSERT INTO ${table} (${as.columns.map(quoteIdentifier).join(', ')}) FORMAT RowBinary` : `INSERT INTO ${table} FORMAT JSONEachRow`;
  try {
    const { stream } = await conn.client.exec({ query, values: Readable.from([body]) });
    await drainStream(stream);
  } catch (e) {
    throw storeError(conn.url, what, e);
  }
}

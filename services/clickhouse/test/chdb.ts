import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createClient, parseError } from '@clickhouse/client';
import type { ClickHouseConnection } from '../src/client';

/*
 * A current ClickHouse engine for the tests: chDB (npm `chdb`, ClickHouse 26.x in this process) behind
 * @clickhouse/client, so client.ts's command / selectRows / insertBody and every module built on them
 * run unchanged against it. The client takes a ready connection in place of its HTTP one
 * (`createClient({ connection })`, the hook it keeps for chDB); this is that connection.
 *
 * Written here rather than taken from chdb's own (`chdb/connection`): that one reads an INSERT's body as
 * UTF-8 text, which would spoil the records table's RowBinary, and its types do not resolve under this
 * project's moduleResolution. Here every body goes to a file byte for byte and the INSERT reads it with
 * `FROM INFILE`, the clickhouse-client way of sending a body: the engine parses the very bytes the store
 * sends to an HTTP server.
 *
 * Settings sent with a statement (client.ts sends `optimize_move_to_prewhere = 0` with every read) are
 * applied with SET before it, as chDB has no per-request settings; they stay set for the session.
 */

/** What is used here of chdb's Session (its own types come with the package, which lives outside node_modules). */
interface Session {
  queryAsync(sql: string, options?: { format?: string }): Promise<{ bytes(): Uint8Array }>;
  close(): void;
}

/**
 * chdb from the per-machine tool cache (scripts/ensure-chdb.js installs it there on first use: seconds from
 * npm's cache, a minute or so cold, so the suite's setup allows for it). A failed install fails the suite
 * with the reason.
 */
function chdbSession(path: string): Session {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain CommonJS script of the repository
  const { ensureChdb } = require('../../../scripts/ensure-chdb.js') as { ensureChdb: () => string };
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a package outside node_modules, found at run time
  const chdb = require(join(ensureChdb(), 'node_modules', 'chdb')) as { Session: new (path: string) => Session };
  return new chdb.Session(path);
}

type Backend = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>;
type BaseParams = Parameters<Backend['query']>[0];

/** An INSERT whose body the client sends after the statement, as client.ts's insertBody writes it. */
const INSERT_WITH_BODY = /^(INSERT INTO [\s\S]+?)\s+(FORMAT \w+)$/;

export interface ChdbConnection extends ClickHouseConnection {
  /** `SELECT version()` of the engine. */
  readonly version: string;
  /** Every INSERT body the engine was given, in order, as the store sent it. */
  readonly bodies: { readonly query: string; readonly body: Buffer }[];
}

class ChdbBackend implements Backend {
  private readonly session: Session;
  private readonly files: string;
  private n = 0;

  constructor(
    private readonly dir: string,
    readonly bodies: { query: string; body: Buffer }[],
  ) {
    this.session = chdbSession(join(dir, 'data'));
    this.files = mkdtempSync(join(dir, 'bodies-'));
  }

  private async run(params: BaseParams, sql: string): Promise<Buffer> {
    const settings = Object.entries(params.clickhouse_settings ?? {}).filter(([, v]) => v !== undefined);
    const set = settings.map(([k, v]) => `SET ${k} = ${typeof v === 'string' ? `'${v.replace(/[\\']/g, '\\$&')}'` : String(v)}; `).join('');
    try {
      const result = await this.session.queryAsync(`${set}${sql}`, { format: 'JSONEachRow' });
      return Buffer.from(result.bytes());
    } catch (e) {
      // The engine's message reads `Code: N. DB::Exception: … (TYPE)`: parsed into the client's ClickHouseError, as an HTTP answer is.
      throw parseError(e instanceof Error ? e.message.replace(/^Query failed: /, '') : String(e));
    }
  }

  private result(params: BaseParams) {
    return { query_id: params.query_id ?? randomUUID(), response_headers: {}, http_status_code: 200 };
  }

  async ping(): Promise<{ success: true } | { success: false; error: Error }> {
    try {
      await this.session.queryAsync('SELECT 1');
      return { success: true };
    } catch (e) {
      return { success: false, error: e instanceof Error ? e : new Error(String(e)) };
    }
  }

  async query(params: BaseParams) {
    const out = await this.run(params, params.query);
    return { ...this.result(params), stream: Readable.from([out]) };
  }

  async command(params: Parameters<Backend['command']>[0]) {
    await this.run(params, params.query);
    return this.result(params);
  }

  async exec(params: Parameters<Backend['exec']>[0]) {
    let sql = params.query;
    if (params.values !== undefined) {
      const chunks: Buffer[] = [];
      for await (const chunk of params.values as AsyncIterable<Buffer | string>) chunks.push(Buffer.from(chunk));
      const body = Buffer.concat(chunks);
      const m = INSERT_WITH_BODY.exec(sql);
      if (m === null) throw new Error(`chDB test connection: a body only follows INSERT … FORMAT X, not ${sql.slice(0, 80)}`);
      const file = join(this.files, `${this.n++}.body`);
      writeFileSync(file, body);
      this.bodies.push({ query: sql, body });
      sql = `${m[1] as string} FROM INFILE '${file}' ${m[2] as string}`;
    }
    const out = await this.run(params, sql);
    return { ...this.result(params), stream: Readable.from([out]) };
  }

  insert(): Promise<never> {
    // client.ts never calls the client's insert (it sends bodies it serialised itself through exec).
    return Promise.reject(new Error('chDB test connection: insert() is not used by pushbase'));
  }

  close(): Promise<void> {
    this.session.close();
    rmSync(this.dir, { recursive: true, force: true });
    return Promise.resolve();
  }
}

/**
 * A ClickHouseConnection onto a fresh chDB data directory of its own. chDB binds one data directory per
 * process: open one at a time, and close it before the next.
 */
export async function connectChdb(): Promise<ChdbConnection> {
  const dir = mkdtempSync(join(tmpdir(), 'pushbase-chdb-'));
  const bodies: { query: string; body: Buffer }[] = [];
  const backend = new ChdbBackend(dir, bodies);
  const client = createClient({ connection: backend });
  const rs = await client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
  const [row] = await rs.json<{ v: string }>();
  return { url: 'chdb:in-process', client, close: () => client.close(), version: row?.v ?? '', bodies };
}

import { createHash } from 'node:crypto';
import type { ProjectedHead } from '@pushbase/contracts';
import { FIELD_KEY, type DatasetDefinition } from '@pushbase/domain';
import { command, selectRows, type ClickHouseConnection } from './client';
import { slotsOf, type Slot } from './layout';
import { tablesIn } from './migrations';
import { newestHeads } from './records-table';
import { accountLiteral, datasetLiteral, isIdentifier, quoteIdentifier, quoteString } from './sql';

/*
 * Grafana-ready views: one view per live dataset, whose columns are its field keys, typed; a stored query over
 * the records table, so only its existence and columns must be kept in step (`sync` on each write,
 * `reconcile` at start and after replay). The SQL is built from validated names only (identifiers, patterns,
 * FIELD_KEY, quoteString): no record value ever reaches it. Column types, the 1970–2105 range and why a
 * view is two queries: docs/clickhouse.md → Grafana-ready views.
 */

/** A view's name: `account/dataset`, the stream key users already know, unless too long for a file name. */
export function viewName(account: string, dataset: string): string {
  const name = `${account}/${dataset}`;
  // ClickHouse keeps a table's metadata in a file named after it, every byte but [A-Za-z0-9_] escaped as
  // %XX; file names end at 255 bytes. An account and an id of 100 dots each would need 600.
  if (escapedLength(name) <= MAX_ESCAPED) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 12);
  // The dataset id is cut first, then the account, so the name keeps its `account/` part: reconcile knows
  // its views by that shape (VIEW_NAME), and a name cut through the slash would never be recognised.
  let [acc, id] = [account, dataset];
  const fits = (): boolean => escapedLength(`${acc}/${id}~${hash}`) <= MAX_ESCAPED;
  while (!fits() && id !== '') id = id.slice(0, -1);
  while (!fits()) acc = acc.slice(0, -1);
  return `${acc}/${id}~${hash}`;
}

/*
 * At most this many bytes of file name. 18.16 needs only the name and `.sql` within 255 bytes; current
 * versions also keep room for a dropped table's file, `<database>.<name>.<uuid>.sql` (and `.detached` in
 * newer sources), and refuse a longer name: 26.7 allows 213 bytes less the views database's name (code 69,
 * "The max length of table name for database … is 187"). 140 fits beside any views database name pushbase
 * accepts (63 characters at most) on both rules. Names made longer by an earlier pushbase (up to 200) name
 * no dataset now: reconcile drops them and makes the shorter ones at the projector's next start.
 */
const MAX_ESCAPED = 140;
const escapedLength = (name: string): number => [...Buffer.from(name, 'utf8')].reduce((n, b) => n + (/[A-Za-z0-9_]/.test(String.fromCharCode(b)) ? 1 : 3), 0);

/**
 * What a name `viewName` makes looks like: an account, `/`, a dataset id (cut, and a `~hash`, when long).
 * Reconcile touches only views whose names fit it, so any other table in the views database — an operator's
 * own — is left alone.
 */
const VIEW_NAME = /^[A-Za-z0-9._-]{1,100}\/[a-z0-9._-]{0,100}(?:~[0-9a-f]{12})?$/;

/** Backquotes a view name: its characters (VIEW_NAME's) need no escape inside backquotes. */
const quoteViewName = (name: string): string => {
  if (!VIEW_NAME.test(name)) throw new Error(`Not a view name: ${JSON.stringify(name.slice(0, 80))}`);
  return `\`${name}\``;
};

function columnExpression(s: Slot): string {
  // Date + n adds n days in 18.16 and current versions alike; toDate(<number>) does not mean days in both.
  if (s.type === 'date') return `toDate('1970-01-01') + intDiv(${s.column}, 86400000)`;
  if (s.type === 'datetime') return `toDateTime(intDiv(${s.column}, 1000), 'UTC')`;
  return s.column; // num_i (Float64, derived from its bits) and str_i as they are
}

/**
 * A column's name inside a view's inner query: a leading `_`, which FIELD_KEY refuses, and `pb_` to stay
 * clear of ClickHouse's virtual columns (`_part`…).
 */
const inner = (column: string): string => quoteIdentifier(`_pb_${column}`);

/** The view's SELECT: the dataset's fields by their keys, its live incarnation, oldest insertion first. */
export function viewQuery(recordsTable: string, head: { readonly account: string; readonly dataset: string; readonly incarnation: string; readonly definition: DatasetDefinition }): string {
  const slots = slotsOf(head.definition);
  const keys = slots.map((s) => {
    if (!FIELD_KEY.test(s.key)) throw new Error(`Not a field key: ${JSON.stringify(s.key.slice(0, 60))}`);
    return `${inner(s.column)} AS ${quoteIdentifier(s.key)}`;
  });
  const columns = slots.map((s) => `${columnExpression(s)} AS ${inner(s.column)}`);
  return `SELECT ${keys.join(', ')}
FROM (
  SELECT ${columns.join(', ')}, seq AS ${inner('seq')}
  FROM ${recordsTable} FINAL
  WHERE account = ${accountLiteral(head.account)} AND dataset = ${datasetLiteral(head.dataset)} AND incarnation = ${quoteString(head.incarnation)} AND deleted = 0
)
ORDER BY ${inner('seq')}`;
}

/**
 * Whether a view's stored query (ClickHouse's own rendering of viewQuery, which differs between versions)
 * is viewQuery's for this incarnation: the incarnation literal is in it verbatim, and `_pb_seq` (quoted or
 * not) marks the current form; views of the form before it, whose keys could shadow columns, lack it.
 */
const isCurrentView = (stored: string, incarnation: string): boolean =>
  stored.includes(`incarnation = ${quoteString(incarnation)}`) && /(?<![A-Za-z0-9_])_pb_seq(?![A-Za-z0-9_])/.test(stored);

/** Refuses a views database that is the projection's own: reconcile drops views there that name no live dataset. */
export function checkViewsDatabase(database: string, viewsDatabase: string): void {
  if (viewsDatabase === database) {
    throw new Error(`PUSHBASE_CLICKHOUSE_VIEWS_DATABASE must name a database of its own, not the projection's (${database})`);
  }
}

/** The default database of the views: the projection's name with `_views`, when that still fits. */
export function defaultViewsDatabase(database: string): string {
  const name = `${database}_views`;
  if (!isIdentifier(name)) throw new Error(`The projection database "${database}" is too long to derive its views database from; set PUSHBASE_CLICKHOUSE_VIEWS_DATABASE`);
  return name;
}

interface LiveHead {
  readonly account: string;
  readonly dataset: string;
  readonly incarnation: string;
  readonly definition: DatasetDefinition;
}

export class DatasetViews {
  private readonly records: string;
  private readonly db: string;
  /** view name → the incarnation it shows, as far as this process made or saw it. */
  private readonly known = new Map<string, string>();
  /** Views that failed since the last reconcile: a sync leaves them to the next one, not tries them twice. */
  private readonly failing = new Set<string>();
  private ready: Promise<void> | undefined;

  constructor(
    private readonly conn: ClickHouseConnection,
    /** The projection's database (its records table is what the views read). */
    private readonly database: string,
    /** Where the views live; a Grafana user is given read access to it. */
    readonly viewsDatabase: string,
    private readonly options: {
      /** One view that could not be made or dropped (the others still were); the next write tries it again. */
      readonly onViewError?: (view: string, e: unknown) => void;
    } = {},
  ) {
    checkViewsDatabase(database, viewsDatabase);
    this.records = tablesIn(database).records;
    this.db = quoteIdentifier(viewsDatabase);
  }

  /** Set when a sync or a view failed: the next sync reconciles every view first (write-store.ts keeps writing meanwhile). */
  private stale = false;

  /** Marks the views as possibly out of step (a sync failed); the next sync reconciles them first. */
  markStale(): void {
    this.stale = true;
  }

  /**
   * Brings the views in step with the heads of one write: a live head whose incarnation has no view gets
   * one (a re-created dataset's old view is replaced: its columns may differ), a deleted head's view goes.
   * Heads of datasets whose view is already right cost nothing but a map lookup.
   */
  async sync(heads: readonly ProjectedHead[]): Promise<void> {
    await this.ensureDatabase();
    if (this.stale) await this.reconcile();
    // A write may hold several heads of one dataset; the newest is the one in force.
    for (const h of newestHeads(heads).values()) {
      const name = viewName(h.account, h.dataset);
      if (this.failing.has(name)) continue;
      if (h.deleted) {
        if (this.known.get(name) !== '') await this.mend(name, () => this.drop(name));
      } else if (this.known.get(name) !== h.incarnation) {
        await this.mend(name, () => this.replace(name, h));
      }
    }
  }

  /** Whether `sync` of this head (the newest of its dataset) would change anything. */
  outOfStep(head: ProjectedHead): boolean {
    if (this.stale) return true;
    const name = viewName(head.account, head.dataset);
    if (this.failing.has(name)) return false;
    return this.known.get(name) !== (head.deleted ? '' : head.incarnation);
  }

  /**
   * Compares every view with the live heads of the heads table and mends what differs: missing views are
   * created, views of another incarnation or an older form replaced, views of datasets no longer live
   * dropped. For the projector's start (a view may have been missed by a crash between a write and its
   * view) and for after a replay promoted a rebuilt projection. A view that fails is counted and left to
   * the next sync; it never keeps another account's views from being made.
   */
  async reconcile(): Promise<{ created: number; dropped: number; failed: number }> {
    await this.ensureDatabase();
    // Views first, then heads: a dataset another projector creates between the two reads then has a head
    // here (its view is made again, the same) rather than a view without a head (which would be dropped).
    const views = (
      await selectRows<{ name: string; engine: string; create_table_query: string }>(
        this.conn,
        `SELECT name, engine, create_table_query FROM system.tables WHERE database = ${quoteString(this.viewsDatabase)}`,
        'listing the dataset views',
      )
    ).filter((v) => v.engine === 'View' && VIEW_NAME.test(v.name));
    const heads = await selectRows<{ account: string; dataset: string; incarnation: string; definition: string }>(
      this.conn,
      `SELECT account, dataset, incarnation, definition FROM ${tablesIn(this.database).heads} FINAL WHERE deleted = 0`,
      'listing the live datasets for their views',
    );
    const live = new Map<string, LiveHead>();
    for (const h of heads) live.set(viewName(h.account, h.dataset), { ...h, definition: JSON.parse(h.definition) as DatasetDefinition });
    let created = 0;
    let dropped = 0;
    let failed = 0;
    this.known.clear();
    this.failing.clear();
    this.stale = false;
    for (const v of views) {
      const head = live.get(v.name);
      if (head !== undefined && isCurrentView(v.create_table_query, head.incarnation)) this.known.set(v.name, head.incarnation);
      else if (head === undefined) {
        if (await this.mend(v.name, () => this.drop(v.name))) dropped++;
        else failed++;
      }
    }
    for (const [name, head] of live) {
      if (this.known.get(name) === head.incarnation) continue;
      if (await this.mend(name, () => this.replace(name, head))) created++;
      else failed++;
    }
    return { created, dropped, failed };
  }

  /** Runs one view's statements; a failure is reported and leaves the view to the next sync's reconcile. */
  private async mend(name: string, step: () => Promise<void>): Promise<boolean> {
    try {
      await step();
      return true;
    } catch (e) {
      this.known.delete(name);
      this.failing.add(name);
      this.stale = true;
      this.options.onViewError?.(name, e);
      return false;
    }
  }

  private ensureDatabase(): Promise<void> {
    this.ready ??= command(this.conn, `CREATE DATABASE IF NOT EXISTS ${this.db}`, `creating ${this.viewsDatabase}`).catch((e: unknown) => {
      this.ready = undefined;
      throw e;
    });
    return this.ready;
  }

  // 18.16 has no CREATE OR REPLACE VIEW: a replaced view is missing for the moment between the two statements.
  private async replace(name: string, head: LiveHead): Promise<void> {
    const view = `${this.db}.${quoteViewName(name)}`;
    await command(this.conn, `DROP TABLE IF EXISTS ${view}`, `dropping the view ${name}`);
    await command(this.conn, `CREATE VIEW ${view} AS ${viewQuery(this.records, head)}`, `creating the view ${name}`);
    this.known.set(name, head.incarnation);
  }

  private async drop(name: string): Promise<void> {
    await command(this.conn, `DROP TABLE IF EXISTS ${this.db}.${quoteViewName(name)}`, `dropping the view ${name}`);
    // '' marks "known to have no view", so further heads of a deleted dataset cost no statement.
    this.known.set(name, '');
  }
}

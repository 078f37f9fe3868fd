import type { LoadedDataset, LoadOptions, PendingRows, PreparedWrite, ProjectedHead, ProjectedRow, ProjectionStore, StoredDatasetRef } from '@pushbase/contracts';
import { parseDatasetId, type DatasetDefinition, type DatasetRecord } from '@pushbase/domain';
import { insertBody, selectRows, type ClickHouseConnection } from './client';
import { columnsOf, storedPlan, STORED_COLUMNS, writeSlots, type Slot } from './layout';
import { tablesIn, type ProjectionTables } from './migrations';
import { datasetKey, HEAD_SLOT, newestHeads, readDatasets, whereDatasets, type HeadJson, type StoredDataset } from './records-table';
import { RowBinaryWriter } from './row-binary';
import { checkAccount } from './sql';
import type { DatasetViews } from './views';

/*
 * The projector's ProjectionStore in ClickHouse: a write's rows and the head rows that cover them in one
 * atomic insert, and the loads the projector resumes from. Why that survives any crash: docs/clickhouse.md
 * → Crash safety.
 */

/** Rows per write, head rows included: below max_insert_block_size (1,048,576), so one block. */
export const MAX_INSERT_ROWS = 500_000;
/** Bytes per write: below min_insert_block_size_bytes (256 MiB) of current versions, so one block. */
export const MAX_INSERT_BYTES = 128 * 1024 * 1024;
/** The largest encoding buffer a store keeps for its next write (see `scratch`). */
const MAX_SCRATCH_BYTES = 32 * 1024 * 1024;

/** The records table's columns a write sends, in the order its RowBinary rows hold them (the num_i ALIAS columns are derived). */
export const RECORDS_INSERT_COLUMNS: readonly string[] = ['account', 'dataset', 'row_slot', 'incarnation', 'record_key', 'version', 'seq', 'deleted', 'head', ...STORED_COLUMNS.map((c) => c.stored)];

/**
 * One row of the records table in RowBinary, its columns in RECORDS_INSERT_COLUMNS order: `head` is the head
 * JSON of a head row ('' otherwise), and `record` null writes every slot NULL (head rows, tombstones).
 */
export function writeRecordsRow(
  w: RowBinaryWriter,
  r: Pick<ProjectedRow, 'account' | 'dataset' | 'slot' | 'incarnation' | 'row_key' | 'version' | 'seq' | 'deleted'>,
  head: string,
  plan: readonly (Slot | undefined)[],
  record: DatasetRecord | null,
): void {
  w.string(r.account);
  w.string(r.dataset);
  w.uint32(r.slot);
  w.string(r.incarnation);
  w.string(r.row_key);
  w.int64(r.version);
  w.int64(r.seq);
  w.uint8(r.deleted ? 1 : 0);
  w.string(head);
  writeSlots(w, plan, record);
}

/**
 * Datasets per load query at most, so an answer holds at most 16 × 5000 rows. Why several datasets to a
 * query at all: see LOAD_CHUNK in services/projector/src/projector.ts (the projector asks for 8).
 */
export const MAX_LOAD_DATASETS = 16;

/** The row_slot column is a UInt32. */
const MAX_ROW_SLOT = 4_294_967_295;

function checkSafeInteger(what: string, v: number, min = 0): void {
  if (!Number.isSafeInteger(v) || v < min) throw new Error(`${what} must be an integer from ${min} to 2^53-1, got ${v}`);
}

// '' is the head rows' marker. Incarnations are ids the schema service made (UUIDs); printable ASCII
// keeps them identical in the incarnation column and inside the head's JSON.
const INCARNATION = /^[!-~]{1,200}$/;
function checkIncarnation(incarnation: string): void {
  if (!INCARNATION.test(incarnation)) throw new Error(`An incarnation must be 1 to 200 printable ASCII characters, got ${JSON.stringify(incarnation.slice(0, 40))}`);
}

const NO_SLOTS: readonly (Slot | undefined)[] = STORED_COLUMNS.map(() => undefined);
/** Buffers of encoded rows a store keeps for its next writes' rows (a partition's each). */
const MAX_SCRATCH_PARTS = 8;
const FIRST_PART_BYTES = 256 * 1024;

/**
 * Rows checked and encoded as the projector adds them (ProjectionStore.begin): an event's row objects are
 * garbage right after its fold, instead of living until their write is prepared, long enough to reach the
 * projector's old generation and set off full collections of a heap of hundreds of MB of held states
 * (docs/performance.md → The projector's catch-up). What needs the write's heads (that they cover these
 * rows, and give the definitions the live rows were encoded with) is checked by prepare().
 */
class EncodedRows implements PendingRows {
  private w: RowBinaryWriter;
  private released = false;
  size = 0;
  /** datasetKey → the newest version of its rows added. */
  readonly newest = new Map<string, number>();
  /** `${datasetKey}/${incarnation}` → the incarnation whose live rows were added, and the definition they were encoded with. */
  readonly definitions = new Map<string, { readonly key: string; readonly incarnation: string; readonly definition: DatasetDefinition }>();

  constructor(buffer: Buffer | undefined) {
    this.w = new RowBinaryWriter(buffer ?? FIRST_PART_BYTES);
  }

  add(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): void {
    if (this.released) throw new Error('These rows went into a write already; begin() anew');
    const byIncarnation = new Map(heads.map((h) => [`${datasetKey(h.account, h.dataset)}/${h.incarnation}`, h.definition]));
    // Rows come grouped by dataset: the checks and lookups of a run of rows of one incarnation are done once.
    let last: ProjectedRow | undefined;
    let key = '';
    let incarnation = '';
    let definition: DatasetDefinition | undefined;
    let plan: readonly (Slot | undefined)[] = NO_SLOTS;
    let newest = 0;
    for (const r of rows) {
      if (last === undefined || r.account !== last.account || r.dataset !== last.dataset || r.incarnation !== last.incarnation) {
        if (last !== undefined) this.newest.set(key, Math.max(this.newest.get(key) ?? 0, newest));
        checkAccount(r.account);
        parseDatasetId(r.dataset);
        checkIncarnation(r.incarnation);
        key = datasetKey(r.account, r.dataset);
        incarnation = `${key}/${r.incarnation}`;
        definition = byIncarnation.get(incarnation);
        plan = definition === undefined ? NO_SLOTS : storedPlan(definition);
        newest = 0;
        last = r;
      }
      checkSafeInteger('A row version', r.version);
      checkSafeInteger('A row seq', r.seq);
      if (!Number.isInteger(r.slot) || r.slot <= HEAD_SLOT || r.slot > MAX_ROW_SLOT) throw new Error(`A row slot must be an integer from 1 to ${MAX_ROW_SLOT}, got ${r.slot}`);
      if (!r.deleted) {
        if (r.record === null) throw new Error(`A live row of ${key} has no record`);
        if (definition === undefined) throw new Error(`A live row of ${key}, incarnation ${r.incarnation}, needs that incarnation's head in the same write`);
        this.definitions.set(incarnation, { key, incarnation: r.incarnation, definition });
      }
      newest = Math.max(newest, r.version);
      writeRecordsRow(this.w, r, '', plan, r.deleted ? null : r.record); // head: head rows only
      this.size++;
    }
    if (last !== undefined) this.newest.set(key, Math.max(this.newest.get(key) ?? 0, newest));
  }

  bytes(): Buffer {
    // Its buffer may be another part's by now: rows added here would be lost, or another write's overwritten.
    if (this.released) throw new Error('These rows went into a write already; begin() anew');
    return this.w.bytes();
  }

  /** The buffer, for another part once these bytes are copied; this part is not used again. */
  release(): Buffer {
    this.released = true;
    const buffer = this.w.buffer();
    this.w = new RowBinaryWriter(0);
    return buffer;
  }
}

export class ClickHouseProjectionStore implements ProjectionStore {
  readonly tables: ProjectionTables;

  private readonly views: DatasetViews | undefined;

  constructor(
    private readonly conn: ClickHouseConnection,
    database: string,
    /** The live projector's Grafana-ready views, kept in step after each write (not a replay's scratch database's). */
    options: { readonly views?: DatasetViews; readonly onViewsError?: (e: unknown) => void } = {},
  ) {
    this.tables = tablesIn(database);
    this.views = options.views;
    this.onViewsError = options.onViewsError ?? (() => undefined);
  }

  private readonly onViewsError: (e: unknown) => void;

  /*
   * Buffers of landed writes, reused by the next ones: a fresh body per write lived long enough to reach the
   * old generation and set off full mark-compacts of the projector's heap (docs/performance.md → The
   * projector's write buffer). Two, because the projector encodes its next write while one is in flight;
   * one larger than MAX_SCRATCH_BYTES is not kept.
   */
  private readonly spares: Buffer[] = [];
  /** Buffers of EncodedRows whose bytes a prepared write copied, for the next ones. */
  private readonly scratch: Buffer[] = [];

  async write(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): Promise<void> {
    const pending = this.begin();
    pending.add(rows, heads);
    await this.prepare([pending], heads).send();
  }

  begin(): PendingRows {
    return new EncodedRows(this.scratch.pop());
  }

  prepare(pending: readonly PendingRows[], heads: readonly ProjectedHead[]): PreparedWrite {
    const parts = pending.map((p) => {
      if (!(p instanceof EncodedRows)) throw new Error('A ClickHouse write takes the rows of its own begin()');
      return p;
    });
    const rowCount = parts.reduce((n, p) => n + p.size, 0);
    if (rowCount === 0 && heads.length === 0) return { send: () => Promise.resolve() };
    if (rowCount + heads.length > MAX_INSERT_ROWS) {
      throw new Error(`A write holds ${rowCount + heads.length} rows; at most ${MAX_INSERT_ROWS} fit one atomic insert: flush smaller batches`);
    }
    // Which head covers which rows: the newest head of a dataset must be at least as new as its rows, and
    // a live row needs the definition of its own incarnation (a batch may delete and re-create a dataset).
    const newest = new Map<string, number>();
    const definitions = new Map<string, DatasetDefinition>();
    // RowBinary (row-binary.ts says why), columns in RECORDS_INSERT_COLUMNS order: the head rows, then the
    // rows encoded as they were added, into a spare buffer of a landed write when one is large enough.
    const estimate = 4096 + heads.length * 1024 + parts.reduce((n, p) => n + p.bytes().length, 0);
    const spare = this.spares.findIndex((b) => b.length >= estimate);
    // A new body gets a power of two, so that the next write, a little larger or smaller, fits its buffer.
    const w = new RowBinaryWriter(spare === -1 ? 2 ** Math.ceil(Math.log2(estimate)) : (this.spares.splice(spare, 1)[0] ?? estimate));
    for (const h of heads) {
      checkAccount(h.account);
      parseDatasetId(h.dataset);
      checkIncarnation(h.incarnation);
      checkSafeInteger('A head version', h.version);
      checkSafeInteger('A stream partition', h.position.partition);
      checkSafeInteger('A stream offset', h.position.offset);
      const key = datasetKey(h.account, h.dataset);
      newest.set(key, Math.max(newest.get(key) ?? 0, h.version));
      definitions.set(`${key}/${h.incarnation}`, h.definition);
      const head: HeadJson = {
        incarnation: h.incarnation,
        definition: h.definition,
        created_at: h.created_at,
        updated_at: h.updated_at,
        record_count: h.record_count,
        next_row: h.next_row,
        position: { partition: h.position.partition, offset: h.position.offset },
      };
      // row_slot 0 (HEAD_SLOT), incarnation '' and record_key '': a head row
      writeRecordsRow(w, { account: h.account, dataset: h.dataset, slot: HEAD_SLOT, incarnation: '', row_key: '', version: h.version, seq: 0, deleted: h.deleted }, JSON.stringify(head), NO_SLOTS, null);
    }
    for (const part of parts) {
      for (const [key, version] of part.newest) {
        const covered = newest.get(key);
        if (covered === undefined || covered < version) {
          throw new Error(`Rows of ${key} up to version ${version} need a head of at least that version in the same write (its position is where a reload resumes)`);
        }
      }
      for (const [id, used] of part.definitions) {
        const definition = definitions.get(id);
        if (definition === undefined) throw new Error(`A live row of ${used.key}, incarnation ${used.incarnation}, needs that incarnation's head in the same write`);
        if (definition !== used.definition && JSON.stringify(definition) !== JSON.stringify(used.definition)) {
          throw new Error(`The live rows of ${used.key}, incarnation ${used.incarnation}, were encoded with another definition than its head's`);
        }
      }
    }
    for (const part of parts) w.bytesFrom(part.bytes());
    // Copied: the parts' buffers serve the next writes' rows.
    for (const part of parts) {
      const buffer = part.release();
      if (this.scratch.length < MAX_SCRATCH_PARTS && buffer.length <= MAX_SCRATCH_BYTES) this.scratch.push(buffer);
    }
    const body = w.bytes();
    if (body.length > MAX_INSERT_BYTES) {
      throw new Error(`A write of ${body.length} bytes exceeds ${MAX_INSERT_BYTES}, the size of one atomic insert: flush smaller batches`);
    }
    const what = `a write of ${rowCount} rows and ${heads.length} heads`;
    // A request given up on may still be reading the body: after any failure (the retry sends the same
    // bytes) its buffer is never handed to another write.
    let reusable = true;
    return {
      send: async () => {
        // The two inserts run side by side: only the first carries the crash argument, the heads table is a
        // listing copy (docs/clickhouse.md → Crash safety).
        const [records, listing] = await Promise.allSettled([insertBody(this.conn, this.tables.records, body, what, { format: 'RowBinary', columns: RECORDS_INSERT_COLUMNS }), this.writeHeads(heads)]);
        for (const insert of [records, listing]) {
          if (insert.status === 'fulfilled') continue;
          reusable = false;
          throw insert.reason;
        }
        // Landed: the server has read the whole body, nothing holds it any more.
        if (reusable && w.buffer().length <= MAX_SCRATCH_BYTES && this.spares.length < 2) this.spares.push(w.buffer());
        reusable = false;
        this.followViews(heads);
      },
    };
  }

  /** Heads of landed writes whose views are not yet in step: the newest of each dataset. */
  private viewsPending = new Map<string, ProjectedHead>();
  private viewsRunning: Promise<void> | undefined;

  /*
   * Views follow the writes in the background, after their rows landed (so a view never shows an
   * incarnation whose rows are not written), and never hold a write up: each new dataset costs two DDL
   * statements, and a write that brought a thousand of them waited seconds for its views while the events
   * behind it waited too (docs/clickhouse.md → Grafana-ready views). Heads that arrive meanwhile are
   * coalesced. Views are derived, so their failure (a DDL refused, a missing grant) never fails a write:
   * the error is reported and the next sync reconciles every view first. A crash or stop leaves at worst
   * views missing until the projector's next start reconciles them.
   */
  private followViews(heads: readonly ProjectedHead[]): void {
    const views = this.views;
    if (views === undefined || heads.length === 0) return;
    // Most writes touch datasets whose views are right: those start nothing.
    for (const [key, h] of newestHeads(heads)) if (this.viewsPending.has(key) || views.outOfStep(h)) this.viewsPending.set(key, h);
    if (this.viewsPending.size === 0) return;
    this.viewsRunning ??= (async () => {
      try {
        while (this.viewsPending.size > 0) {
          const due = [...this.viewsPending.values()];
          this.viewsPending = new Map();
          try {
            await views.sync(due);
          } catch (e) {
            views.markStale();
            this.onViewsError(e);
          }
        }
      } finally {
        this.viewsRunning = undefined;
      }
    })();
  }

  /** Resolves once the views of every write landed so far are in step, or their failures reported. */
  viewsSettled(): Promise<void> {
    return this.viewsRunning ?? Promise.resolve();
  }

  private async writeHeads(heads: readonly ProjectedHead[]): Promise<void> {
    const body = heads
      .map((h) =>
        JSON.stringify({
          account: h.account,
          dataset: h.dataset,
          incarnation: h.incarnation,
          definition: JSON.stringify(h.definition),
          columns: JSON.stringify(columnsOf(h.definition)),
          created_at: h.created_at,
          updated_at: h.updated_at,
          record_count: h.record_count,
          next_row: h.next_row,
          position_partition: h.position.partition,
          position_offset: h.position.offset,
          version: h.version,
          deleted: h.deleted ? 1 : 0,
        }),
      )
      .join('\n');
    if (body !== '') await insertBody(this.conn, this.tables.heads, Buffer.from(`${body}\n`), `${heads.length} dataset heads`);
  }

  async load(account: string, dataset: string, options: LoadOptions = {}): Promise<LoadedDataset | undefined> {
    const [loaded] = await this.loadMany([{ account, dataset }], options);
    return loaded;
  }

  async loadMany(refs: readonly StoredDatasetRef[], options: LoadOptions = {}): Promise<(LoadedDataset | undefined)[]> {
    const out: (LoadedDataset | undefined)[] = [];
    for (let i = 0; i < refs.length; i += MAX_LOAD_DATASETS) {
      const chunk = refs.slice(i, i + MAX_LOAD_DATASETS);
      const stored = await readDatasets(this.conn, this.tables, chunk, options.values ?? 'all');
      await this.repairHeadsTable(chunk, stored);
      for (const s of stored) out.push(s === undefined ? undefined : { state: s.deleted ? undefined : s.state, slots: s.deleted ? new Map() : s.slots, position: s.head.position });
    }
    return out;
  }

  /** After a crash between the two inserts of a write, the heads table lags its head rows by that write. */
  private async repairHeadsTable(refs: readonly StoredDatasetRef[], stored: readonly (StoredDataset | undefined)[]): Promise<void> {
    const found = refs.flatMap((r, i) => {
      const s = stored[i];
      return s === undefined ? [] : [{ ...r, stored: s }];
    });
    if (found.length === 0) return;
    const listed = await selectRows<{ account: string; dataset: string; version: string }>(
      this.conn,
      `SELECT account, dataset, toString(version) AS version FROM ${this.tables.heads} FINAL WHERE ${whereDatasets(found)}`,
      found.length === 1 ? `reading the head of ${datasetKey(found[0]?.account ?? '', found[0]?.dataset ?? '')}` : `reading the heads of ${found.length} datasets`,
    );
    const at = new Map(listed.map((l) => [datasetKey(l.account, l.dataset), Number(l.version)]));
    const behind = found.filter((f) => (at.get(datasetKey(f.account, f.dataset)) ?? -1) < f.stored.headVersion);
    await this.writeHeads(behind.map(({ account, dataset, stored: s }) => ({ account, dataset, ...s.head, version: s.headVersion, deleted: s.deleted })));
  }
}

import type { DatasetRecord, DatasetState, RowKey } from '@pushbase/domain';
import { heldState } from '../src/project';
import type { LoadedDataset, LoadOptions, PendingRows, PreparedWrite, ProjectedHead, ProjectedRow, ProjectionStore, StoredDatasetRef } from '@pushbase/contracts';

/*
 * A ProjectionStore in memory with the semantics the ClickHouse tables have after `FINAL`: per key
 * (account, dataset, slot) the row of the highest version wins, tombstones hide, live rows list by seq. It
 * also insists that two writes of the same key and version are identical, which is what lets ClickHouse
 * collapse a redelivery.
 */
const rowId = (r: Pick<ProjectedRow, 'account' | 'dataset' | 'slot'>): string => JSON.stringify([r.account, r.dataset, r.slot]);
const headId = (account: string, dataset: string): string => JSON.stringify([account, dataset]);

export class MemoryProjectionStore implements ProjectionStore {
  readonly rows = new Map<string, ProjectedRow>();
  readonly heads = new Map<string, ProjectedHead>();
  loads = 0;
  writes = 0;

  write(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): Promise<void> {
    try {
      this.writeNow(rows, heads);
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  begin(): PendingRows & { readonly rows: ProjectedRow[] } {
    const rows: ProjectedRow[] = [];
    return {
      rows,
      add: (more: readonly ProjectedRow[]) => void rows.push(...more),
      get size() {
        return rows.length;
      },
    };
  }

  /** Checks now, as the ClickHouse store does; `send` goes through `write`, so a subclass's write sees it. */
  prepare(pending: readonly PendingRows[], heads: readonly ProjectedHead[]): PreparedWrite {
    const rows = pending.flatMap((p) => (p as ReturnType<MemoryProjectionStore['begin']>).rows);
    checkWrite(rows, heads);
    return { send: () => this.write(rows, heads) };
  }

  writeNow(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): void {
    this.writes++;
    checkWrite(rows, heads);
    for (const r of rows) keepNewest(this.rows, rowId(r), r);
    for (const h of heads) keepNewest(this.heads, headId(h.account, h.dataset), h);
  }

  load(account: string, dataset: string, options: LoadOptions = {}): Promise<LoadedDataset | undefined> {
    this.loads++;
    return Promise.resolve(this.loadNow(account, dataset, options));
  }

  loadMany(refs: readonly StoredDatasetRef[], options: LoadOptions = {}): Promise<(LoadedDataset | undefined)[]> {
    this.loads += refs.length;
    return Promise.resolve(refs.map((r) => this.loadNow(r.account, r.dataset, options)));
  }

  loadNow(account: string, dataset: string, options: LoadOptions = {}): LoadedDataset | undefined {
    const head = this.heads.get(headId(account, dataset));
    if (head === undefined) return undefined;
    if (head.deleted) return { state: undefined, slots: new Map(), position: head.position };
    const rows = new Map<RowKey, DatasetRecord>();
    const slots = new Map<RowKey, number>();
    const numbered = head.definition.unique_by.length === 0;
    for (const r of this.liveRows(account, dataset, head.incarnation)) {
      const key = numbered ? Number(r.row_key) : r.row_key;
      rows.set(key, r.record as DatasetRecord);
      slots.set(key, r.slot);
    }
    const state: DatasetState = {
      account,
      id: dataset,
      incarnation: head.incarnation,
      definition: head.definition,
      created_at: head.created_at,
      updated_at: head.updated_at,
      rows,
      nextRow: head.next_row,
    };
    // `dates`: the values of the date and datetime fields only, as ProjectionStore.load promises (and as
    // the projector holds records: heldState, which store.int checks the ClickHouse store's `dates` against).
    return { state: options.values === 'dates' ? heldState(state) : state, slots, position: head.position };
  }

  /** Every row the store keeps of a dataset, tombstones included: what `count()` after OPTIMIZE … FINAL gives. */
  storedRows(account: string, dataset: string): ProjectedRow[] {
    return [...this.rows.values()].filter((r) => r.account === account && r.dataset === dataset);
  }

  /** Live rows of one incarnation, oldest insertion first: what `FINAL … WHERE deleted = 0 ORDER BY seq` reads. */
  liveRows(account: string, dataset: string, incarnation?: string): ProjectedRow[] {
    const out: ProjectedRow[] = [];
    for (const r of this.rows.values()) {
      if (r.account === account && r.dataset === dataset && !r.deleted && (incarnation === undefined || r.incarnation === incarnation)) out.push(r);
    }
    return out.sort((a, b) => a.seq - b.seq);
  }

  head(account: string, dataset: string): ProjectedHead | undefined {
    return this.heads.get(headId(account, dataset));
  }

  /** The visible records of a dataset, or undefined when it does not exist (never defined, or deleted). */
  records(account: string, dataset: string): DatasetRecord[] | undefined {
    const head = this.head(account, dataset);
    if (head === undefined || head.deleted) return undefined;
    return this.liveRows(account, dataset, head.incarnation).map((r) => r.record as DatasetRecord);
  }
}

function keepNewest<T extends { readonly version: number }>(table: Map<string, T>, id: string, row: T): void {
  const stored = table.get(id);
  if (stored !== undefined && stored.version > row.version) return;
  if (stored !== undefined && stored.version === row.version && JSON.stringify(stored) !== JSON.stringify(row)) {
    throw new Error(`two different rows share key ${id} and version ${row.version}:\n${JSON.stringify(stored)}\n${JSON.stringify(row)}`);
  }
  table.set(id, row);
}

/**
 * The ClickHouse store's rules (ProjectionStore.write): a dataset's rows come with a head at least as new,
 * and a live row with the head of its own incarnation.
 */
function checkWrite(rows: readonly ProjectedRow[], heads: readonly ProjectedHead[]): void {
  const newest = new Map<string, number>();
  const incarnations = new Set<string>();
  for (const h of heads) {
    const id = headId(h.account, h.dataset);
    newest.set(id, Math.max(newest.get(id) ?? -1, h.version));
    incarnations.add(`${id}/${h.incarnation}`);
  }
  for (const r of rows) {
    const id = headId(r.account, r.dataset);
    if ((newest.get(id) ?? -1) < r.version) throw new Error(`row ${rowId(r)} v${r.version} has no head as new in the write`);
    if (!r.deleted && !incarnations.has(`${id}/${r.incarnation}`)) throw new Error(`live row ${rowId(r)} has no head of its incarnation`);
  }
}

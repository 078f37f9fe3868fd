import type { RowKey } from '@pushbase/domain';

/*
 * Where a dataset's rows sit in the store: keyed by slot, not by the fold's never-repeating row keys, so a
 * dataset keeps no tombstone per row ever removed. A new row takes the lowest free slot: a function of the
 * live slots alone (so a state loaded back assigns what the held one would), and never above the dataset's
 * largest record count. Slots count from 1: the store keeps the head row under 0. Why: docs/clickhouse.md →
 * Row slots.
 */
export const FIRST_SLOT = 1;

export class RowSlots {
  private readonly byKey = new Map<RowKey, number>();
  /** used[s] is 1 while slot s holds a live row. */
  private used = new Uint8Array(64);
  /** No slot below this one is free. */
  private lowest = FIRST_SLOT;

  /** Slots as a store gave them back; every key's slot must be its own. */
  static of(slots: Iterable<readonly [RowKey, number]>): RowSlots {
    const ring = new RowSlots();
    for (const [key, slot] of slots) ring.put(key, slot);
    return ring;
  }

  get size(): number {
    return this.byKey.size;
  }

  get(key: RowKey): number | undefined {
    return this.byKey.get(key);
  }

  entries(): IterableIterator<[RowKey, number]> {
    return this.byKey.entries();
  }

  /** Gives `key` the lowest free slot. */
  take(key: RowKey): number {
    let s = this.lowest;
    while (s < this.used.length && this.used[s] === 1) s++;
    this.mark(key, s);
    this.lowest = s + 1;
    return s;
  }

  /** Frees the slot of `key`; undefined when it had none. */
  release(key: RowKey): number | undefined {
    const s = this.byKey.get(key);
    if (s === undefined) return undefined;
    this.byKey.delete(key);
    this.used[s] = 0;
    if (s < this.lowest) this.lowest = s;
    return s;
  }

  private put(key: RowKey, slot: number): void {
    if (!Number.isSafeInteger(slot) || slot < FIRST_SLOT) throw new Error(`A row slot must be an integer from ${FIRST_SLOT}, got ${slot}`);
    if (this.byKey.has(key) || (slot < this.used.length && this.used[slot] === 1)) throw new Error(`Row slot ${slot} (key ${String(key)}) is given twice`);
    this.mark(key, slot);
    // Loading marks slots in any order: the lowest free one is found again from the start.
    this.lowest = FIRST_SLOT;
  }

  private mark(key: RowKey, slot: number): void {
    if (slot >= this.used.length) {
      const grown = new Uint8Array(Math.max(slot + 1, this.used.length * 2));
      grown.set(this.used);
      this.used = grown;
    }
    this.used[slot] = 1;
    this.byKey.set(key, slot);
  }
}

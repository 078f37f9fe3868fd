import type { SchemaStore } from '@pushbase/contracts';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import type { RedisSchemaStore } from '@pushbase/redis';

/*
 * The records service's view of the schema store: definitions cached by incarnation, the live incarnation
 * (and the account's pending intent) read from Redis on every request, so a write is never validated
 * against a deleted or stale incarnation. Why no cache lifetime or generation counter, and the races:
 * docs/architecture.md → The records service's schema cache.
 */

export interface CachedSchemaStoreOptions {
  /** How many definitions are kept (least recently used dropped first). Default 10000. */
  readonly maxEntries?: number;
}

interface Entry {
  readonly incarnation: string;
  readonly definition: DatasetSummary['definition'];
}

const pendingChange = (): DomainError =>
  new DomainError('unavailable', 'A change of this dataset is being completed; nothing was written, try again in a moment');

export class CachedSchemaStore implements SchemaStore {
  private readonly maxEntries: number;
  /** By `account/id`, in least-recently-used order (a Map keeps insertion order). */
  private readonly entries = new Map<string, Entry>();
  private counts = { hits: 0, misses: 0 };

  constructor(
    private readonly store: RedisSchemaStore,
    options: CachedSchemaStoreOptions = {},
  ) {
    this.maxEntries = options.maxEntries ?? 10_000;
  }

  async get(account: string, id: string): Promise<DatasetSummary | undefined> {
    const key = `${account}/${id}`;
    const { dataset: head, pending } = await this.store.settledHead(account, id);
    if (pending) throw pendingChange();
    if (head === undefined) {
      this.entries.delete(key);
      return undefined;
    }
    const cached = this.entries.get(key);
    if (cached !== undefined && cached.incarnation === head.incarnation) {
      this.counts.hits += 1;
      this.entries.delete(key);
      this.entries.set(key, cached);
      return { account, id, incarnation: head.incarnation, definition: cached.definition, created_at: head.created_at, updated_at: head.updated_at };
    }
    this.counts.misses += 1;
    // The intent again: a change may have begun since the head was read.
    const { dataset: full, pending: pendingNow } = await this.store.settledGet(account, id);
    if (pendingNow) throw pendingChange();
    this.entries.delete(key);
    if (full === undefined) return undefined;
    this.entries.set(key, { incarnation: full.incarnation, definition: full.definition });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return full;
  }

  count(account: string): Promise<number> {
    return this.store.count(account);
  }

  stats(): { hits: number; misses: number; entries: number } {
    return { ...this.counts, entries: this.entries.size };
  }
}

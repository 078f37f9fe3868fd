import type { SchemaStore } from '@pushbase/contracts';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import type { RedisSchemaStore } from '@pushbase/redis';

/*
 * The records service's view of the schema store: definitions cached by incarnation, the live incarnation
 * read from Redis on every request.
 *
 * Why not a cache with a lifetime, or one invalidated by a message: a write validated against a cached
 * incarnation that was deleted (and perhaps re-created with another definition) would be appended with the
 * old incarnation, acknowledged, and then dropped by the fold, which applies a write only to its own
 * incarnation — a 2xx for records that never appear, even when the delete was answered before the write
 * began. Any staleness window allows that. Why not a generation counter in Redis: it needs every writer of
 * the store (the schema service, the projector, replay) to bump it, for no gain over what is here: the
 * incarnation is already the generation of a dataset, one per create, and the store keeps it atomically
 * with the definition.
 *
 * So every get reads the dataset's incarnation (HMGET of three short fields, one round trip, as the
 * uncached read was) and takes the parsed definition from the cache only when it belongs to that very
 * incarnation; otherwise it reads the whole hash (one HGETALL: incarnation and definition together, so
 * they cannot come from two different incarnations) and caches that. What the cache saves is moving and
 * parsing the definition on every write. The schema service updates Redis before it answers a delete or a
 * create, so a write that begins after that answer always sees the new incarnation.
 *
 * A write that races a delete (validated against incarnation A while A is being deleted) may still be
 * acknowledged and not applied: it is ordered before the delete, whose effect removes its records with the
 * rest of A. It is never applied to another incarnation: the event names A.
 *
 * A change the store does not show yet. The schema service writes its decided event as the account's
 * intent before Kafka and removes it once Redis shows the event; a schema service that dies in between
 * leaves the event committed and Redis stale until the next holder of the account's lease rolls it
 * forward (up to a lease TTL). A write validated then against the deleted (or not yet re-created)
 * incarnation would be acknowledged and dropped by the fold. So both reads below come with the account's
 * intent, from one moment of Redis (RedisSchemaStore.settledHead/settledGet: one script), and while a change
 * of THIS dataset is pending the write is refused `unavailable` (503) before anything is sent: it will
 * never be applied, and a retry after the roll-forward is validated against the store as the log has it.
 * That holds whether the pending event is a deletion or a definition of a new incarnation: the write is
 * validated against no incarnation at all. An intent of another dataset of the account does not block.
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

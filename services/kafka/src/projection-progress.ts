import type { Admin, Kafka } from 'kafkajs';
import { DomainError, streamKey } from '@pushbase/domain';
import { fetchGroupOffsets } from './group-offsets';
import { partitionerFor } from './messages';

/*
 * How far the projector has folded the event topic into Redis. An Idempotency-Key attempt whose outcome is
 * unknown is settled from it (services/redis/src/idempotency.ts): once its lease is over, the end of its
 * dataset's partition is read ONCE and kept with the attempt; the attempt's event, if stored, is below that
 * end, so it is settled as soon as the projector's committed offset passes it — however many writes of other
 * datasets arrive meanwhile. The projector records every key it folds, so the key's record is then there
 * exactly when its event was stored.
 *
 * The end is the last stable offset (kafkajs's admin reads committed): a transaction of the schema service
 * still open in the partition holds it back, and the projector cannot read past one either. The caller's
 * lease outlasts the transaction timeout, so an event written before the lease ended is below it.
 *
 * The committed offsets are asked once per COMMITTED_FRESH_MS for all callers (they only grow: a value a
 * moment old can only answer "not yet", a 409 the client retries).
 */

/** A position in the log: an offset of one partition. */
export interface LogPosition {
  readonly partition: number;
  readonly offset: number;
}

const COMMITTED_FRESH_MS = 500;

export class ProjectionProgress {
  private admin: Promise<Admin> | undefined;
  private committed: { readonly offsets: Promise<Map<number, number>>; readonly at: number } | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly group: string,
    private readonly clock: { now(): number } = { now: () => Date.now() },
  ) {}

  /** The end now (last stable offset) of the partition holding `account/dataset`. */
  async end(account: string, dataset: string): Promise<LogPosition> {
    return this.asking(async () => {
      const ends = await (await this.connected()).fetchTopicOffsets(this.topic);
      const partition = partitionerFor(ends.length)(streamKey(account, dataset));
      return { partition, offset: Number(ends.find((p) => p.partition === partition)?.offset ?? '0') };
    });
  }

  /** Whether the projector's committed offset has reached `position`. */
  async projected(position: LogPosition): Promise<boolean> {
    if (position.offset <= 0) return true;
    const offsets = await this.asking(() => this.committedOffsets());
    return (offsets.get(position.partition) ?? -1) >= position.offset;
  }

  async close(): Promise<void> {
    const admin = await this.admin?.catch(() => undefined);
    this.admin = undefined;
    await admin?.disconnect();
  }

  private committedOffsets(): Promise<Map<number, number>> {
    const now = this.clock.now();
    if (this.committed === undefined || now - this.committed.at >= COMMITTED_FRESH_MS) {
      const offsets = this.connected().then((admin) => fetchGroupOffsets(admin, this.group, this.topic));
      const entry = { offsets, at: now };
      this.committed = entry;
      // A failed lookup is not kept: the next caller asks again.
      offsets.catch(() => {
        if (this.committed === entry) this.committed = undefined;
      });
    }
    return this.committed.offsets;
  }

  private async asking<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (e) {
      // Nothing of the request was done yet: a retry is safe, on a new client; the old one is let go.
      const dropped = this.admin;
      this.admin = undefined;
      void dropped?.then((admin) => admin.disconnect()).catch(() => undefined);
      throw new DomainError('unavailable', `Kafka could not tell how far the projector has read (${e instanceof Error ? e.message : String(e)})`);
    }
  }

  private connected(): Promise<Admin> {
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })();
    return this.admin;
  }
}

import type { Admin, Kafka } from 'kafkajs';
import { DomainError, streamKey } from '@pushbase/domain';
import { fetchGroupOffsets } from './group-offsets';
import { partitionerFor } from './messages';

/*
 * How far the projector has folded the event topic into Redis, which settles an Idempotency-Key attempt whose
 * outcome is unknown (services/redis/src/idempotency.ts): the end of its partition is read once, after its
 * lease, and the attempt is settled when the projector's committed offset passes it. Committed offsets are
 * cached for COMMITTED_FRESH_MS (a stale one only answers "not yet"). Why: docs/architecture.md → The
 * Idempotency-Key ledger.
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

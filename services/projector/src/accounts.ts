import { randomBytes } from 'node:crypto';
import { createKafka, decodeAccountMessage, KafkaEventConsumer, type KafkaConnection, type PositionedAccountEvent } from '@pushbase/kafka';
import type { RedisAccountStore } from '@pushbase/redis';
import type { Logger } from './projector';

/*
 * The accounts topic into the Redis account store (services/redis/src/account-store.ts): the follower in
 * every projector applies each account event in offset order, repairing a schema service that stopped
 * between its append and its apply, and re-reads the topic from the beginning at every start; replay
 * rebuilds the store into a fresh prefix. Why: docs/architecture.md → The accounts follower.
 */

export interface AccountFollower {
  /** Its own consumer group, deleted by stop(). */
  readonly groupId: string;
  /** Resolves once the follower has joined its group and reads. */
  readonly started: Promise<void>;
  stop(): Promise<void>;
}

/** How long stop() waits for Kafka to delete the follower's group before giving up on it. */
const DELETE_GROUP_TIMEOUT_MS = 5000;

export interface FollowAccountsOptions {
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** The projector's group: the follower's own group is named after it, with a random suffix. */
  readonly groupId: string;
  readonly store: Pick<RedisAccountStore, 'apply'>;
  readonly log: Logger;
  readonly onFatal?: (error: Error) => void;
}

export function followAccounts(options: FollowAccountsOptions): AccountFollower {
  const groupId = `${options.groupId.slice(0, 200)}-accounts-${randomBytes(4).toString('hex')}`;
  const consumer = new KafkaEventConsumer<PositionedAccountEvent>(
    {
      connection: options.connection,
      topic: options.topic,
      groupId,
      fromBeginning: true,
      decode: decodeAccountMessage,
      // Small fetches wait little: a change a writer left unapplied is repaired within about this long.
      maxWaitTimeMs: 250,
    },
    {
      onBatch: async ({ events }) => {
        // A failure (Redis unavailable) throws: the consumer fetches the batch again after a backoff.
        const applied = await options.store.apply(events);
        if (applied > 0) options.log('info', 'account events applied', { applied, offset: events[events.length - 1]!.position.offset });
      },
      onCrash: (e) => {
        options.log('error', 'account follower stopped', { error: e.message });
        options.onFatal?.(e);
      },
    },
  );
  const deleteGroup = async (): Promise<void> => {
    const admin = createKafka(options.connection).admin();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        (async () => {
          await admin.connect();
          await admin.deleteGroups([groupId]);
        })(),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${DELETE_GROUP_TIMEOUT_MS} ms`)), DELETE_GROUP_TIMEOUT_MS))),
      ]);
    } catch (e) {
      options.log('warn', 'could not delete the account follower\'s consumer group; it is empty and holds no offsets', { group: groupId, error: e instanceof Error ? e.message : String(e) });
    } finally {
      clearTimeout(timer);
      await admin.disconnect().catch(() => undefined);
    }
  };
  return {
    groupId,
    started: consumer.start(),
    stop: async () => {
      await consumer.stop();
      await deleteGroup();
    },
  };
}

export interface ReplayAccountsOptions {
  readonly connection: KafkaConnection;
  readonly topic: string;
  /** A throwaway group, deleted afterwards. */
  readonly groupId: string;
  /** The fresh generation's store. */
  readonly store: Pick<RedisAccountStore, 'apply'>;
  /**
   * Per partition, the offset to apply from (what an earlier replay's `end` said); below it events are
   * read but not applied. Default: the beginning. The consumer has no seek, and the topic is small.
   */
  readonly from?: ReadonlyMap<number, number>;
}

export interface ReplayedAccounts {
  /** Account events applied (offsets from `from` up to `end`). */
  readonly events: number;
  /** Per partition, the end offset taken at the start: read up to it, exclusive. */
  readonly end: ReadonlyMap<number, number>;
}

/** Applies the accounts topic from `from` (default its beginning) up to the end offsets taken now. */
export async function replayAccounts(options: ReplayAccountsOptions): Promise<ReplayedAccounts> {
  const admin = createKafka(options.connection).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(options.topic);
    const end = new Map(offsets.map((o) => [o.partition, Number(o.high)]));
    const next = new Map(offsets.map((o) => [o.partition, Number(o.low)]));
    const from = options.from ?? new Map<number, number>();
    const done = (): boolean => [...end].every(([p, e]) => (next.get(p) ?? 0) >= e || (from.get(p) ?? 0) >= e);
    if (done()) return { events: 0, end };
    let events = 0;
    let finish: () => void = () => undefined;
    let fail: (e: Error) => void = () => undefined;
    const finished = new Promise<void>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
    const advance = (partition: number, to: number): void => {
      next.set(partition, Math.max(next.get(partition) ?? 0, Math.min(to, end.get(partition) ?? 0)));
      if (done()) finish();
    };
    const consumer = new KafkaEventConsumer<PositionedAccountEvent>(
      { connection: options.connection, topic: options.topic, groupId: options.groupId, fromBeginning: true, decode: decodeAccountMessage },
      {
        onBatch: async (batch) => {
          const stop = end.get(batch.partition) ?? 0;
          const start = from.get(batch.partition) ?? 0;
          // Events appended after replay began are the live follower's, once the projectors run again.
          const mine = batch.events.filter((e) => e.position.offset >= start && e.position.offset < stop);
          if (mine.length > 0) await options.store.apply(mine);
          events += mine.length;
          advance(batch.partition, batch.events.some((e) => e.position.offset >= stop) ? stop : batch.next);
        },
        onSkipped: (partition, at) => advance(partition, at),
        onCrash: (e) => fail(e),
      },
    );
    await consumer.start();
    try {
      await finished;
    } finally {
      await consumer.stop();
      await admin.deleteGroups([options.groupId]).catch(() => undefined);
    }
    return { events, end };
  } finally {
    await admin.disconnect();
  }
}

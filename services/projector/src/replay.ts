import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SingleBar } from 'cli-progress';
import {
  ClickHouseProjectionStore,
  connectClickHouse,
  dropDatabase,
  listListedHeads,
  migrate,
  promoteProjection,
  DatasetViews,
  type ClickHouseConnection,
} from '@pushbase/clickhouse';
import { createKafka, KafkaEventConsumer, kafkaLogTo, type EventConsumerHandlers, type KafkaLogLevel } from '@pushbase/kafka';
import {
  dropAccountsGeneration,
  dropSchemaGeneration,
  holdSchemaChanges,
  openRedis,
  promoteAccountsGeneration,
  promoteSchemaGeneration,
  readAccountsGeneration,
  RedisAccountStore,
  RedisSchemaStore,
  writeGenerationState,
  type Redis,
} from '@pushbase/redis';
import { replayAccounts } from './accounts';
import type { Admin } from 'kafkajs';
import type { ReplayConfig } from './config';
import { Projector, type Logger } from './projector';
import { compareGenerations, formatReport, type Difference, type VerifyReport } from './verify';

/*
 * `pushbase replay`: rebuilds the ClickHouse projection and the Redis stores from the topics with the
 * projector's own code into a fresh database and key prefix, catches up under a hold of schema changes, then
 * swaps them in. Why the projector must be stopped and why the catch-up comes before the swap:
 * docs/architecture.md → Replay.
 */

export class ReplayRefused extends Error {
  override readonly name = 'ReplayRefused';
}

export interface ReplayHooks {
  /** Where warnings and errors go. Default: JSON lines on stderr. */
  readonly log?: Logger;
  /** Where the progress bar is drawn (when config.progress). Default stderr. */
  readonly progressStream?: NodeJS.WritableStream;
  /** Test hook: runs after the rebuild, before verify and swap, with the fresh generation's names. */
  readonly afterRebuild?: (fresh: { readonly database: string; readonly redisPrefix: string }) => Promise<void>;
  /** Test hook: runs holding schema changes, once caught up, before the swap. */
  readonly whileHeld?: () => Promise<void>;
}

export interface ReplayResult {
  /** Events read from the topic (up to `end`). */
  readonly events: number;
  /** Account events read from the accounts topic (likewise). */
  readonly accountEvents: number;
  /** Records carried by those events (appends and replaces). */
  readonly recordsReplayed: number;
  /** Rows written to ClickHouse (live rows and tombstones). */
  readonly rowsWritten: number;
  /** Live datasets and their records in the rebuilt projection. */
  readonly datasets: number;
  readonly records: number;
  readonly seconds: number;
  /** Per partition, the offset replay read up to (exclusive): the topic's end at the swap, when swapped. */
  readonly end: ReadonlyMap<number, number>;
  /** How long schema changes were held for the swap (ms); 0 without a swap. */
  readonly heldMs: number;
  readonly verify: VerifyReport | undefined;
  /** Whether the rebuilt state became the live one. */
  readonly swapped: boolean;
  /** Names of the replaced generation, when kept (--keep-retired). */
  readonly retired: { readonly database: string; readonly redisPrefix: string } | undefined;
}

const stderrLog: Logger = (level, msg, fields = {}) => {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, service: 'replay', msg, ...fields })}\n`);
};

/** Throws ReplayRefused unless no consumer is a member of the live projector group. */
async function requireStoppedGroup(admin: Admin, groupId: string): Promise<void> {
  const { groups } = await admin.describeGroups([groupId]);
  const members = groups[0]?.members ?? [];
  if (members.length > 0) {
    const who = members.map((m) => `${m.clientId}@${m.clientHost}`).join(', ');
    throw new ReplayRefused(
      `the projector group ${groupId} has ${members.length} running member(s) (${who}): stop every \`pushbase projector\` of it first; ` +
        'replay rebuilds from the topic and sets the group to continue where the rebuild ends',
    );
  }
}

interface Rebuilt {
  readonly events: number;
  readonly recordsReplayed: number;
  readonly rowsWritten: number;
}

/**
 * Folds the topic from `low` up to `end` into the fresh stores with the projector, in the consumer group
 * `fresh.group` (a later pass resumes where an earlier one committed), showing progress.
 */
async function rebuild(
  config: ReplayConfig,
  fresh: { readonly database: string; readonly redisPrefix: string; readonly group: string },
  low: ReadonlyMap<number, number>,
  end: ReadonlyMap<number, number>,
  conn: ClickHouseConnection,
  redis: Redis,
  hooks: ReplayHooks,
  log: Logger,
  kafkaLog: (level: KafkaLogLevel, message: string) => void,
): Promise<Rebuilt> {
  const total = [...end].reduce((n, [p, e]) => n + e - (low.get(p) ?? 0), 0);
  if (total === 0) return { events: 0, recordsReplayed: 0, rowsWritten: 0 };

  let fail: (e: Error) => void = () => undefined;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const projector = new Projector(new ClickHouseProjectionStore(conn, fresh.database), {
    // The applied Idempotency-Keys go to the live prefix: they are no part of the generation it promotes,
    // and recording them again is harmless (first one wins), so keys survive a replay, a lost Redis included.
    schemaStore: new RedisSchemaStore(redis, { prefix: fresh.redisPrefix, idempotency: { prefix: config.redis.prefix, ttlMs: config.idempotencyTtlMs } }),
    maxRows: config.maxRows,
    flushRows: config.flushRows,
    flushIntervalMs: config.flushIntervalMs,
    // The projector's per-write info lines would bury the progress bar; its warnings still show.
    log: (level, msg, fields) => {
      if (level !== 'info') log(level, msg, fields);
    },
    onFatal: (e) => fail(e),
  });

  // Where each partition stands (the next offset to read) and which are done.
  const next = new Map([...end.keys()].map((p) => [p, low.get(p) ?? 0]));
  const done = (p: number): boolean => (next.get(p) ?? 0) >= (end.get(p) ?? 0);
  let events = 0;
  let recordsReplayed = 0;
  const started = performance.now();
  const bar = config.progress
    ? new SingleBar({
        format: 'replay {bar} {percentage}% | {value}/{total} events | {records_rate} records/s | offsets {position} of {end} | ETA {eta_formatted}',
        stream: hooks.progressStream ?? process.stderr,
        hideCursor: true,
        etaBuffer: 200,
        fps: 4,
      })
    : undefined;
  const sum = (m: ReadonlyMap<number, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
  const endTotal = sum(end);
  bar?.start(total, 0, { records_rate: 0, position: sum(next), end: endTotal });

  const handlers = projector.handlers();
  const bounded: EventConsumerHandlers = {
    ...handlers,
    onBatch: async (batch, control) => {
      const stop = end.get(batch.partition) ?? 0;
      const start = low.get(batch.partition) ?? 0;
      // Events appended after replay started are left to the live projector (see the group offsets); those
      // before `low` were folded by an earlier pass, should the group have resumed before them.
      const events_ = batch.events.filter((e) => e.position.offset >= start && e.position.offset < stop);
      if (events_.length > 0) {
        await handlers.onBatch({ ...batch, events: events_ }, control);
        events += events_.length;
        for (const { event } of events_) if (event.type === 'RecordsAppended' || event.type === 'RecordsReplaced') recordsReplayed += event.records.length;
        next.set(batch.partition, events_[events_.length - 1]!.position.offset + 1);
        const seconds = (performance.now() - started) / 1000;
        bar?.update(events, { records_rate: Math.round(recordsReplayed / Math.max(seconds, 0.001)), position: sum(next), end: endTotal });
      }
      // Past the transaction markers too: the end (last stable offset) is usually one past the last event.
      next.set(batch.partition, Math.max(next.get(batch.partition) ?? 0, Math.min(batch.next, stop)));
      if (batch.events.some((e) => e.position.offset >= stop)) next.set(batch.partition, stop);
      settle(batch.partition);
    },
    onSkipped: (partition, at) => {
      next.set(partition, Math.max(next.get(partition) ?? 0, Math.min(at, end.get(partition) ?? 0)));
      settle(partition);
    },
  };
  const settle = (partition: number): void => {
    if (!done(partition)) return;
    // Batches come only after start(), so the consumer below exists by then.
    consumer.pause([partition]);
    if ([...end.keys()].every(done)) finish();
  };
  const consumer = new KafkaEventConsumer(
    {
      connection: { brokers: config.kafka.brokers, clientId: 'pushbase-replay', log: kafkaLog },
      topic: config.kafka.topic,
      groupId: fresh.group,
      fromBeginning: true,
      partitionsConsumedConcurrently: 1,
    },
    bounded,
  );
  await projector.start(consumer);
  try {
    await finished;
  } finally {
    // Writes what is pending (rows, heads, schema store), commits to the throwaway group, leaves it.
    await projector.stop();
    bar?.stop();
  }
  // A generation missing its last rows must never be swapped in (the projector only logs the failure).
  if (!projector.stoppedClean) throw new Error('the rebuild could not write its last rows (the log says why); nothing was swapped');
  return { events, recordsReplayed, rowsWritten: projector.stats().rows };
}

/** Runs a replay as configured; see the module comment. Throws ReplayRefused when it must not run. */
export async function runReplay(config: ReplayConfig, hooks: ReplayHooks = {}): Promise<ReplayResult> {
  const log = hooks.log ?? stderrLog;
  const kafkaLog = kafkaLogTo(log);
  const started = performance.now();
  const run = randomBytes(4).toString('hex');
  const live = { database: config.clickhouse.database, redisPrefix: config.redis.prefix };
  const fresh = { database: `${live.database.slice(0, 44)}_replay_${run}`, redisPrefix: `${live.redisPrefix}replay-${run}:`, group: `${config.kafka.groupId.slice(0, 200)}-replay-${run}` };
  const retired = { database: `${live.database.slice(0, 43)}_retired_${run}`, redisPrefix: `${live.redisPrefix}retired-${run}:` };

  const admin = createKafka({ brokers: config.kafka.brokers, clientId: 'pushbase-replay', log: kafkaLog }).admin();
  await admin.connect();
  const conn = connectClickHouse(config.clickhouse.url);
  let redis: Redis | undefined;
  try {
    redis = await openRedis(config.redis.url);
    await requireStoppedGroup(admin, config.kafka.groupId);
    // The live tables must exist and be current: the fresh ones are made by the same migrations, and the
    // live database's schema_migrations stays behind when the tables are swapped. A no-op when current.
    await migrate(conn, live.database);
    const offsets = await admin.fetchTopicOffsets(config.kafka.topic);
    const low = new Map(offsets.map((o) => [o.partition, Number(o.low)]));
    const end = new Map(offsets.map((o) => [o.partition, Number(o.high)]));

    await migrate(conn, fresh.database);
    let promoted = false;
    let tablesMoved = false;
    try {
      const rebuilt = await rebuild(config, fresh, low, end, conn, redis, hooks, log, kafkaLog);
      // Accounts and keys: the accounts topic into the fresh prefix's account store, swapped in below with
      // the schema store (a missing topic — a deployment never migrated since accounts came — is an error).
      const accountsConnection = { brokers: config.kafka.brokers, clientId: 'pushbase-replay', log: kafkaLog };
      const accountStore = new RedisAccountStore(redis, { prefix: fresh.redisPrefix });
      const accounts = await replayAccounts({ connection: accountsConnection, topic: config.kafka.accountsTopic, groupId: `${fresh.group}-accounts`, store: accountStore });
      await hooks.afterRebuild?.({ database: fresh.database, redisPrefix: fresh.redisPrefix });
      const verify = config.verify ? withAccounts(await compareGenerations(conn, redis, live, fresh), await compareAccounts(redis, live.redisPrefix, fresh.redisPrefix)) : undefined;
      const swap = !config.verifyOnly && (verify === undefined || verify.equal);
      let upTo = end;
      const caughtUp: Rebuilt[] = [];
      let accountEvents = accounts.events;
      let heldMs = 0;
      if (swap) {
        // The fresh generation carried on to the topic's end now, in the rebuild's group (which resumes
        // where it committed): first while schema changes go on, then holding them (see the top).
        const connected = redis;
        const catchUp = async (): Promise<void> => {
          const to = new Map((await admin.fetchTopicOffsets(config.kafka.topic)).map((o) => [o.partition, Number(o.high)]));
          caughtUp.push(await rebuild(config, fresh, upTo, to, conn, connected, hooks, log, kafkaLog));
          upTo = to;
        };
        await catchUp();
        const holding = performance.now();
        const hold = await holdSchemaChanges(redis, live.redisPrefix);
        try {
          // Side by side: each joins a consumer group, which takes a broker's initial rebalance delay (3 s by default).
          const [folded, held] = await Promise.allSettled([
            catchUp(),
            replayAccounts({ connection: accountsConnection, topic: config.kafka.accountsTopic, groupId: `${fresh.group}-accounts-held`, store: accountStore, from: accounts.end }),
          ]);
          if (folded.status === 'rejected') throw folded.reason;
          if (held.status === 'rejected') throw held.reason;
          accountEvents += held.value.events;
          // A newer generation, at the ends reached: a state regressed before is left behind with the old one.
          await writeGenerationState(redis, { fresh: fresh.redisPrefix, live: live.redisPrefix }, { d: upTo, a: held.value.end });
          await hooks.whileHeld?.();
          await requireStoppedGroup(admin, config.kafka.groupId);
          await hold.confirm();
          promoted = true;
          await promoteSchemaGeneration(redis, { fresh: fresh.redisPrefix, live: live.redisPrefix, ...(config.keepRetired ? { retired: retired.redisPrefix } : {}) });
          await promoteAccountsGeneration(redis, { fresh: fresh.redisPrefix, live: live.redisPrefix, ...(config.keepRetired ? { retired: retired.redisPrefix } : {}) });
        } finally {
          await hold.release().catch((e: unknown) => log('warn', 'could not release the hold on schema changes; it expires by itself within 30 s', { error: String(e) }));
          heldMs = Math.round(performance.now() - holding);
        }
        // The projection needs no hold: a projector folds from the group's offsets whatever came after.
        // setOffsets itself refuses a group with running members, so a projector that started just now
        // stops the swap here (Redis swapped alone is consistent: the group's projector re-applies to it
        // events it holds, which changes nothing).
        const partitions = [...upTo].map(([partition, offset]) => ({ partition, offset: String(offset) }));
        if (partitions.length > 0) await admin.setOffsets({ groupId: config.kafka.groupId, topic: config.kafka.topic, partitions });
        await promoteProjection(conn, { fresh: fresh.database, live: live.database, retired: retired.database });
        tablesMoved = true;
        // The views read the live records table by name, so they read the promoted one; which datasets have a view changes.
        await new DatasetViews(conn, live.database, config.clickhouse.viewsDatabase).reconcile();
        if (!config.keepRetired) await dropDatabase(conn, retired.database);
      }
      const alive = (await listListedHeads(conn, swap ? live.database : fresh.database)).filter((h) => !h.deleted);
      const sum = (k: keyof Rebuilt): number => [rebuilt, ...caughtUp].reduce((n, r) => n + r[k], 0);
      return {
        events: sum('events'),
        recordsReplayed: sum('recordsReplayed'),
        rowsWritten: sum('rowsWritten'),
        accountEvents,
        datasets: alive.length,
        records: alive.reduce((n, h) => n + h.record_count, 0),
        seconds: (performance.now() - started) / 1000,
        end: upTo,
        heldMs,
        verify,
        swapped: swap,
        retired: swap && config.keepRetired ? { database: retired.database, redisPrefix: retired.redisPrefix } : undefined,
      };
    } catch (e) {
      if (promoted) {
        throw new Error(
          `replay failed while swapping the rebuilt state in (${e instanceof Error ? e.message : String(e)}); ` +
            `the live projection may be partly swapped: tables in ${live.database}, ${retired.database} and ${fresh.database}, schema keys under ${live.redisPrefix} and ${fresh.redisPrefix}`,
          { cause: e },
        );
      }
      throw e;
    } finally {
      await admin.deleteGroups([fresh.group]).catch((e: unknown) => log('warn', 'could not delete the replay consumer group', { group: fresh.group, error: String(e) }));
      // Without a swap the fresh generation is scratch; after the tables moved the fresh database is empty.
      // Whatever a failed swap left behind is kept: the error names it.
      if (!promoted) await dropSchemaGeneration(redis, fresh.redisPrefix).catch(() => undefined);
      if (!promoted) await dropAccountsGeneration(redis, fresh.redisPrefix).catch(() => undefined);
      if (!promoted || tablesMoved) await dropDatabase(conn, fresh.database).catch(() => undefined);
    }
  } finally {
    redis?.disconnect();
    await conn.close();
    await admin.disconnect();
  }
}

/** The account stores compared as the schema stores are: every key, canonical text. */
async function compareAccounts(redis: Redis, livePrefix: string, freshPrefix: string): Promise<VerifyReport> {
  const [l, r] = await Promise.all([readAccountsGeneration(redis, livePrefix), readAccountsGeneration(redis, freshPrefix)]);
  const differences: Difference[] = [];
  for (const key of [...new Set([...l.keys(), ...r.keys()])].sort()) {
    const a = l.get(key);
    const b = r.get(key);
    if (a === b) continue;
    differences.push({ store: 'redis', subject: `accounts:${key}`, what: a === undefined ? 'only in the rebuilt account store' : b === undefined ? 'only in the live account store' : `live ${a}, rebuilt ${b}` });
  }
  return { equal: differences.length === 0, differences, checked: { datasets: 0, records: 0, schemaKeys: r.size } };
}

const withAccounts = (schema: VerifyReport, accounts: VerifyReport): VerifyReport => ({
  equal: schema.equal && accounts.equal,
  differences: [...schema.differences, ...accounts.differences],
  checked: { ...schema.checked, schemaKeys: schema.checked.schemaKeys + accounts.checked.schemaKeys },
});

/** The final count, for the terminal. */
export function formatResult(r: ReplayResult): string[] {
  const rate = (n: number): string => Math.round(n / Math.max(r.seconds, 0.001)).toLocaleString('en-US');
  const lines = [
    `replay: ${r.events} events, ${r.datasets} datasets, ${r.records} records in ${r.seconds.toFixed(1)} s ` +
      `(${rate(r.events)} events/s, ${rate(r.recordsReplayed)} records/s; ${r.recordsReplayed} records replayed, ${r.rowsWritten} rows written)`,
    `replay: ${r.accountEvents} account events`,
  ];
  if (r.verify !== undefined) lines.push(...formatReport(r.verify));
  if (r.swapped) {
    lines.push(`replay: the rebuilt projection and schema store are live; the projector group continues at ${JSON.stringify(Object.fromEntries(r.end))}`);
    lines.push(`replay: schema changes were held for ${r.heldMs} ms for the swap`);
  } else lines.push('replay: nothing swapped; the live state is unchanged');
  if (r.retired !== undefined) lines.push(`replay: the replaced state is kept in ClickHouse database ${r.retired.database} and under Redis prefix ${r.retired.redisPrefix}`);
  return lines;
}

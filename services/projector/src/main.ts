import { setTimeout as sleep } from 'node:timers/promises';
import { ClickHouseProjectionStore, connectClickHouse, DatasetViews } from '@pushbase/clickhouse';
import { Lifecycle } from '@pushbase/config';
import { createKafka, fetchGroupOffsets, KafkaEventConsumer, kafkaLogTo } from '@pushbase/kafka';
import { createMetricsRegistry, projectorMetrics, startMetricsListener } from '@pushbase/metrics';
import { checkProjectedState, markerField, openRedis, raiseMarkers, RedisAccountStore, RedisSchemaStore } from '@pushbase/redis';
import { followAccounts } from './accounts';
import { ProgressWatch, startProgressLooks, type PartitionProgress } from './health';
import type { ProjectorConfig } from './config';
import { createLogger, levelledLog, type LogLevel } from '@pushbase/telemetry';
import { Projector, type Logger, type ProjectorOptions } from './projector';

/** How long a stop waits for the views of the last writes (the next start's reconcile makes the rest). */
const VIEWS_STOP_MS = 5000;

/** The projector's JSON lines on stdout (pino, @pushbase/telemetry): what log shippers read. */
export const jsonLog = (level: LogLevel = 'info'): Logger => levelledLog(createLogger({ service: 'projector', level }));

export interface RunningProjector {
  readonly projector: Projector;
  /** The port of its GET /metrics listener (PUSHBASE_METRICS_PORT). */
  readonly metricsPort: number;
  /** Finishes the running batch, writes, commits, leaves the group, closes the connections. */
  stop(): Promise<void>;
}

export interface ProjectorHooks {
  readonly log?: Logger;
  readonly afterWrite?: ProjectorOptions['afterWrite'];
  readonly onFatal?: ProjectorOptions['onFatal'];
}

/**
 * The composition root of `pushbase projector`: ClickHouse store, Redis schema store, projector, Kafka
 * consumer group member. Expects the tables migrated (`pushbase migrate`) and the topic created by the
 * writers. Writes `{"msg":"listening","metrics_port":M}` once its metrics listener serves (before it joins
 * the group: it serves nothing else), then "partitions assigned" once it reads.
 */
export async function runProjector(config: ProjectorConfig, hooks: ProjectorHooks = {}): Promise<RunningProjector> {
  const log = hooks.log ?? jsonLog(config.telemetry.logLevel);
  // This process's one registry, on a small listener of its own (docs/metrics.md): lag, inserts, counters.
  const metrics = createMetricsRegistry();
  // Beside it, the probes (health.ts): /readyz once this member reads, /healthz while its partitions move.
  const watch = new ProgressWatch(config.stallMs);
  let phase: 'starting' | 'reading' | 'stopping' = 'starting';
  const metricsListener = await startMetricsListener(metrics, {
    ...config.metrics,
    probes: {
      '/healthz': () => watch.verdict(),
      '/readyz': () => ({ ok: phase === 'reading', body: { status: phase } }),
    },
  });
  const life = new Lifecycle();
  life.defer('metrics listener', () => metricsListener.close());
  log('info', 'listening', { metrics_port: metricsListener.port, metrics_host: config.metrics.host });
  return life.start(async () => {
    const redis = await openRedis(config.redis.url);
    life.defer('redis', () => redis.disconnect());
    const conn = connectClickHouse(config.clickhouse.url);
    life.defer('clickhouse', () => conn.close());
    const instruments = projectorMetrics(metrics);
    const views = new DatasetViews(conn, config.clickhouse.database, config.clickhouse.viewsDatabase, {
      onViewError: (view, e) => {
        instruments.count('viewFailures');
        log('warn', 'dataset view failed; the next write tries it again', { view, error: e instanceof Error ? e.message : String(e) });
      },
    });
    const store = new ClickHouseProjectionStore(conn, config.clickhouse.database, {
      views,
      onViewsError: (e) => log('warn', 'dataset views out of step; the next write reconciles them', { error: e instanceof Error ? e.message : String(e) }),
    });
    // After the projector's last write (deferred later, so stopped first), before the connection closes. Bounded:
    // views the stop leaves out are made by the next start's reconcile.
    life.defer('dataset views', (atOnce) => (atOnce ? undefined : Promise.race([store.viewsSettled(), sleep(VIEWS_STOP_MS, undefined, { ref: false })])));
    const projector = new Projector(store, {
      schemaStore: new RedisSchemaStore(redis, { prefix: config.redis.prefix, idempotency: { ttlMs: config.idempotencyTtlMs } }),
      maxRows: config.maxRows,
      flushRows: config.flushRows,
      flushIntervalMs: config.flushIntervalMs,
      log,
      metrics: instruments,
      ...(hooks.afterWrite === undefined ? {} : { afterWrite: hooks.afterWrite }),
      ...(hooks.onFatal === undefined ? {} : { onFatal: hooks.onFatal }),
    });
    const kafkaLog = kafkaLogTo(log);
    let lostStateLogged = false;
    const lostState = (why: string): void => {
      if (!lostStateLogged) log('error', 'Redis lost part of the stores; the services refuse them until `pushbase replay` rebuilds them', { why });
      lostStateLogged = true;
    };
    // Per dataset partition, the marker this process raised: Redis must keep at least that much.
    const raised = new Map<number, number>();
    const accountStore = new RedisAccountStore(redis, { prefix: config.redis.prefix });
    const consumer = new KafkaEventConsumer(
      {
        connection: { brokers: config.kafka.brokers, clientId: 'pushbase-projector', log: kafkaLog },
        topic: config.kafka.topic,
        groupId: config.kafka.groupId,
        // Batches of one partition are folded one after another; other partitions' batches interleave with
        // them and share the pending write.
        partitionsConsumedConcurrently: 1,
        // The schema store has applied what is committed (a write applies before it commits): the markers say
        // so in Redis (services/redis/src/state.ts), and one below this member's last commit means Redis lost it.
        beforeCommit: async (offsets) => {
          const markers = offsets.map(({ partition, next, committed }) => ({ field: markerField('d', partition), next, least: committed ?? raised.get(partition) }));
          if (await raiseMarkers(redis, config.redis.prefix, 'the projector', markers)) lostState('see `regressed` in the state');
          for (const { partition, next } of offsets) raised.set(partition, Math.max(next, raised.get(partition) ?? 0));
        },
      },
      projector.handlers(),
    );
    // A failed start has nothing to write: the consumer only leaves.
    life.defer('projector', (atOnce) => (atOnce ? consumer.stop().catch(() => undefined) : projector.stop()));
    log('info', 'projector starting', {
      topic: config.kafka.topic,
      accounts_topic: config.kafka.accountsTopic,
      group: config.kafka.groupId,
      clickhouse: config.clickhouse.url,
      database: config.clickhouse.database,
      redis_prefix: config.redis.prefix,
      max_rows: config.maxRows,
      flush_rows: config.flushRows,
      flush_ms: config.flushIntervalMs,
    });
    // Redis must hold at least what the group committed; checked before reading on from there.
    const admin = createKafka({ brokers: config.kafka.brokers, clientId: 'pushbase-projector', log: kafkaLog }).admin();
    await admin.connect();
    try {
      const why = await checkProjectedState(redis, config.redis.prefix, await fetchGroupOffsets(admin, config.kafka.groupId, config.kafka.topic));
      if (why !== undefined) lostState(why);
    } finally {
      await admin.disconnect();
    }
    // A crash between a write and its view, or a replay, can leave views out of step; writes keep them so after.
    const mended = await views.reconcile();
    log('info', 'dataset views reconciled', { views_database: config.clickhouse.viewsDatabase, ...mended });
    await projector.start(consumer);
    const follower = followAccounts({
      connection: { brokers: config.kafka.brokers, clientId: 'pushbase-projector-accounts', log: kafkaLog },
      topic: config.kafka.accountsTopic,
      groupId: config.kafka.groupId,
      store: accountStore,
      log,
      ...(hooks.onFatal === undefined ? {} : { onFatal: hooks.onFatal }),
    });
    life.defer('account follower', (atOnce) => follower.stop().catch((e: unknown) => atOnce || log('warn', 'account follower did not stop cleanly', { error: String(e) })));
    // Kafka's own account of this member's progress, for /healthz: kept connected, asked every few seconds.
    const lookout = createKafka({ brokers: config.kafka.brokers, clientId: 'pushbase-projector-health', log: kafkaLog }).admin();
    life.defer('kafka lookout', () => lookout.disconnect().catch(() => undefined));
    await follower.started;
    await lookout.connect();
    const read = async (): Promise<readonly PartitionProgress[]> => {
      const held = consumer.assigned();
      if (held.length === 0) return [];
      const committed = await fetchGroupOffsets(lookout, config.kafka.groupId, config.kafka.topic);
      const ends = new Map((await lookout.fetchTopicOffsets(config.kafka.topic)).map((p) => [p.partition, { low: Number(p.low), high: Number(p.high) }]));
      return held.flatMap((partition) => {
        const end = ends.get(partition);
        if (end === undefined) return [];
        // -1: nothing committed yet; the group starts from the partition's beginning.
        return [{ partition, committed: Math.max(committed.get(partition) ?? -1, end.low), end: end.high }];
      });
    };
    const stopLooks = startProgressLooks({ watch, read, waiting: () => projector.waitingForStore, everyMs: Math.min(15_000, Math.max(1000, Math.floor(config.stallMs / 6))) });
    life.defer('progress looks', () => stopLooks());
    phase = 'reading';
    // An idle projector commits nothing: it looks every second whether what it raised is still there.
    const markerWatch = setInterval(() => {
      const markers = [...raised].map(([partition, next]) => ({ field: markerField('d', partition), next, least: next }));
      void Promise.all([raiseMarkers(redis, config.redis.prefix, 'the projector', markers), accountStore.recheck()]).then(
        (lost) => {
          if (lost.some(Boolean)) lostState('see `regressed` in the state');
        },
        () => undefined, // Redis unreachable: the projector's own writes report it
      );
    }, 1000);
    markerWatch.unref();
    life.defer('marker watch', () => clearInterval(markerWatch));
    return {
      projector,
      metricsPort: metricsListener.port,
      stop: () => {
        phase = 'stopping';
        return life.close();
      },
    };
  });
}

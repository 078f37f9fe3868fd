import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { createAccountAdmin, createRecordService, createSchemaService, createWritePool, keyedWrites, quotaSourceFromLog, type MemoryProjection } from '@pushbase/app';
import { createMetricsRegistry, eventLogMetrics } from '@pushbase/metrics';
import { createLogger, messageLog, type JsonLogger, type MessageLog } from '@pushbase/telemetry';
import { LIMITS, type QuotaLimits } from '@pushbase/domain';
import { loadOrCreateAdminToken, loadOrCreateTls } from '@pushbase/data-dir';
import { SlidingWindowRateLimiter, startHttp } from '@pushbase/gateway';
import { openAccounts, type EmbeddedAccounts } from './accounts';
import type { EmbeddedConfig } from './config';
import { EmbeddedStore } from './embedded-store';
import type { DataDirLock } from './data-dir-lock';
import { lockDataDirOfKnownFormat, markDataDirFormat } from './data-dir-format';
import { createSnapshotPool } from './snapshot-pool';

export interface RunningEmbedded {
  readonly port: number;
  readonly adminPort: number;
  /** Undefined behind a TLS-terminating proxy. */
  readonly certFile: string | undefined;
  readonly projection: MemoryProjection;
  /** Stops accepting, lets in-flight requests finish, flushes the log. */
  stop(): Promise<void>;
}

type Logger = MessageLog;

/**
 * Every service in one process: the default `npm start`. Logs with `logger` (pino JSON lines on stdout,
 * service "pushbase", by default); the caller starts tracing, if any (startTracing), before.
 */
export async function startEmbedded(config: EmbeddedConfig, logger: JsonLogger = createLogger({ service: 'pushbase', level: config.telemetry?.logLevel ?? 'info' })): Promise<RunningEmbedded> {
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const lock = await lockDataDirOfKnownFormat(config.dataDir);
  try {
    return await startLocked(config, logger, lock);
  } catch (e: unknown) {
    await lock.release();
    throw e;
  }
}

async function startLocked(config: EmbeddedConfig, logger: JsonLogger, lock: DataDirLock): Promise<RunningEmbedded> {
  const log: Logger = messageLog(logger);
  // Behind a TLS-terminating proxy there is no certificate of ours to serve.
  const tls = config.behindTlsProxy ? undefined : await loadOrCreateTls(config.dataDir, config.tls);

  // The quotas of an account without its own: the API's limits, and the operator's PUSHBASE_RATE_LIMIT_PER_MINUTE.
  const defaults = { datasets: LIMITS.datasetsPerAccount, requests_per_minute: config.rateLimitPerMinute };
  // Accounts and keys: their own log in the data directory, replayed here (accounts.ts).
  const accounts = await openAccounts({ dataDir: config.dataDir, apiKeys: config.apiKeys, defaults, log, warn: (message) => log('account log', { detail: message }) });
  try {
    return await startWithAccounts(config, logger, lock, tls, accounts, defaults);
  } catch (e) {
    await accounts.log.close();
    throw e;
  }
}

async function startWithAccounts(config: EmbeddedConfig, logger: JsonLogger, lock: DataDirLock, tls: Awaited<ReturnType<typeof loadOrCreateTls>> | undefined, accounts: EmbeddedAccounts, defaults: QuotaLimits): Promise<RunningEmbedded> {
  const log: Logger = messageLog(logger);
  const { keys } = accounts;
  // This process's one registry, served on the admin listener at GET /metrics (docs/metrics.md).
  const metrics = createMetricsRegistry();

  // The newest valid snapshot, then only the log after it (embedded-store.ts); compaction snapshots the live projection in the background.
  const snapshotPool = createSnapshotPool();
  const { store, report } = await EmbeddedStore.open({
    dir: config.dataDir,
    segmentBytes: config.segmentBytes,
    compactAfterBytes: config.compactAfterBytes,
    idempotencyTtlMs: config.idempotencyTtlMs,
    log,
    metrics: eventLogMetrics(metrics),
    ...(snapshotPool === undefined ? {} : { snapshotPool }),
  });
  // Both logs are open, with a segment each: the guard against older releases holds (data-dir-format.ts).
  await markDataDirFormat(config.dataDir);
  const { projection, eventLog } = store;
  const logStats = eventLog.stats();
  log('event log replayed', {
    ms: report.snapshotMs + report.replayMs,
    snapshot_position: report.snapshot?.position ?? null,
    snapshot_ms: report.snapshotMs,
    snapshot_datasets: report.snapshot?.datasets ?? 0,
    snapshot_records: report.snapshot?.records ?? 0,
    snapshot_version: report.snapshot?.version ?? null,
    snapshot_bytes: report.snapshot?.bytes ?? 0,
    replay_ms: report.replayMs,
    frames_replayed: report.framesReplayed,
    log_position: logStats.position,
    log_segments: logStats.segments,
    log_bytes: logStats.bytes,
    ...projection.stats(),
  });

  const clock = { now: () => Date.now() };
  const schemas = createSchemaService({ log: eventLog, store: projection, clock, ids: { newIncarnation: () => randomUUID() }, quotas: quotaSourceFromLog(accounts.log, defaults) });
  const accountAdmin = createAccountAdmin({
    log: accounts.log,
    clock,
    defaults,
    // An account's datasets are deleted as the public API deletes one: DatasetDeleted through the schema service.
    datasets: { ids: async (account) => (await projection.listDatasets(account)).map((d) => d.id), delete: (account, id) => schemas.delete({ account, id }) },
  });
  const writePool = createWritePool(config.writeWorkers, { onUnavailable: log });
  const records = createRecordService({ schemas: projection, log: eventLog, clock, ...(writePool === undefined ? {} : { decider: writePool.decider }) });
  // The public API's writes honour Idempotency-Keys; the admin side's deletes carry none.
  const keyed = keyedWrites({ schemas, records }, store.ledger, clock);
  // One budget per key and per address across both listeners, as in the distributed gateway.
  const rateLimiter = new SlidingWindowRateLimiter(config.rateLimitPerMinute, 60_000);
  const adminToken = config.adminToken ?? (await loadOrCreateAdminToken(config.dataDir, log));
  const services = { schemas: keyed.schemas, records: keyed.records, keys, rateLimiter, accounts: accountAdmin, readModel: projection, adminToken };
  const listeners = await startHttp(config, services, { logger, log, metrics, tls });
  const { port, adminPort } = listeners;
  log('listening', { port, admin_port: adminPort, host: config.host, admin_host: config.adminHost, cert_file: tls?.certFile ?? null, behind_tls_proxy: config.behindTlsProxy, trusted_proxies: config.behindTlsProxy ? config.trustedProxies.entries : null, write_workers: writePool?.threads ?? 0, data_dir: path.resolve(config.dataDir) });

  let stopping: Promise<void> | undefined;
  return {
    port,
    adminPort,
    certFile: tls?.certFile,
    projection,
    stop: () =>
      (stopping ??= (async () => {
        await listeners.close();
        await store.close();
        await accounts.log.close();
        await snapshotPool?.close();
        await writePool?.close();
        await lock.release();
        log('stopped', { ...projection.stats(), idempotency_keys: store.ledger.size });
      })()),
  };
}

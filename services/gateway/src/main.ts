import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ignoreConflict } from '@pushbase/app';
import { ClickHouseReadModel, connectClickHouse } from '@pushbase/clickhouse';
import { Lifecycle } from '@pushbase/config';
import { RequestScope, type AccountAdmin } from '@pushbase/contracts';
import { DEFAULT_QUOTAS, LIMITS, type QuotaLimits } from '@pushbase/domain';
import { loadOrCreateAdminToken, loadOrCreateTls, showGeneratedKey } from '@pushbase/data-dir';
import { connectAccountAdmin, connectRecordService, connectSchemaService, type Closable } from '@pushbase/grpc';
import { createMetricsRegistry, grpcMetrics } from '@pushbase/metrics';
import { closeRedis, openRedis, RedisAccountStore, RedisKeyStore, RedisRateLimiter, type ConfiguredKey, type Redis } from '@pushbase/redis';
import { createLogger, messageLog, type JsonLogger, type MessageLog } from '@pushbase/telemetry';
import type { GatewayConfig } from './config';
import { configuredKeyId, hashApiKey, newApiKey, parseBootstrapKeys } from './keys';
import { startHttp } from './http';

/*
 * The composition root of `pushbase gateway`: the embedded mode's gateway and admin apps, unchanged, over
 * the distributed adapters — the Redis rate limiter (one rolling window across every gateway) and key
 * store, gRPC clients to the schema and record services, the ClickHouse read model behind the admin
 * listener. Stateless but for its certificate and admin token when they are generated (PUSHBASE_DATA_DIR),
 * so any number of gateways can serve one deployment.
 */

type Logger = MessageLog;

export interface RunningGateway {
  readonly port: number;
  readonly adminPort: number;
  /** Undefined behind a TLS-terminating proxy. */
  readonly certFile: string | undefined;
  /** Stops accepting, lets in-flight requests finish, closes the clients. */
  stop(): Promise<void>;
}

/** Logs with `logger` (pino JSON lines on stdout by default); the caller starts tracing, if any, before. */
export async function runGateway(config: GatewayConfig, logger: JsonLogger = createLogger({ service: 'gateway', level: config.telemetry?.logLevel ?? 'info' })): Promise<RunningGateway> {
  const log: Logger = messageLog(logger);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  // Behind a TLS-terminating proxy there is no certificate of ours to serve.
  const tls = config.behindTlsProxy ? undefined : await loadOrCreateTls(config.dataDir, config.tls);
  const adminToken = config.adminToken ?? (await loadOrCreateAdminToken(config.dataDir, log));

  // Fails the start when Redis cannot be reached; once started, an outage is a 503 per request.
  const redis = await openRedis(config.redis.url, { failFast: true });
  const life = new Lifecycle();
  life.defer('redis', () => closeRedis(redis));
  return life.start(async () => {
    const defaults: QuotaLimits = { datasets: LIMITS.datasetsPerAccount, requests_per_minute: config.rateLimitPerMinute };
    const keys = new RedisKeyStore(redis, { prefix: config.redis.prefix, defaults, configured: configuredKeys(config) });
    // This process's one registry, served on the admin listener at GET /metrics (docs/metrics.md).
    const metrics = createMetricsRegistry();
    const requestScope = new RequestScope();
    // One histogram for the calls of all three channels: a registry takes each metric name once.
    const calls = grpcMetrics(metrics, 'client');
    const channel = { requestScope, metrics: calls, ...(config.grpcToken === undefined ? {} : { token: config.grpcToken }) };
    const schemas = connectSchemaService(config.schemaAddress, channel);
    life.defer('schema client', () => schemas.close());
    const records = connectRecordService(config.recordsAddress, channel);
    life.defer('records client', () => records.close());
    // Accounts and keys: the schema service decides and stores them; a key is made here and only its hash sent.
    const accounts = connectAccountAdmin(config.schemaAddress, { ...channel, newKey: newApiKey, hashKey: hashApiKey, defaults });
    life.defer('accounts client', () => accounts.close());
    if (keys.configuredCount === 0) await firstStartKey(accounts, redis, config.redis.prefix, config.dataDir, log);
    const clickhouse = connectClickHouse(config.clickhouse.url, { requestTimeoutMs: 10_000 });
    life.defer('clickhouse', () => clickhouse.close());

    const readModel = new ClickHouseReadModel(clickhouse, config.clickhouse.database);
    // One rolling window per key across every gateway (and both listeners).
    const rateLimiter = new RedisRateLimiter(redis, { limit: config.rateLimitPerMinute, windowMs: 60_000, prefix: config.redis.prefix });
    const listeners = await startHttp(config, { schemas, records, keys, rateLimiter, accounts, readModel, adminToken, requestScope }, { logger, log, metrics, tls });
    // Stop: stops accepting, lets the requests in flight finish, then closes the clients.
    life.defer('http listeners', () => listeners.close());
    log('listening', {
      port: listeners.port,
      admin_port: listeners.adminPort,
      host: config.host,
      admin_host: config.adminHost,
      cert_file: tls?.certFile ?? null,
      behind_tls_proxy: config.behindTlsProxy,
      trusted_proxies: config.behindTlsProxy ? config.trustedProxies.entries : null,
      schema_address: config.schemaAddress,
      records_address: config.recordsAddress,
      grpc_token: config.grpcToken !== undefined,
      redis_prefix: config.redis.prefix,
      clickhouse_database: config.clickhouse.database,
      data_dir: path.resolve(config.dataDir),
    });
    let stopped: Promise<void> | undefined;
    return {
      port: listeners.port,
      adminPort: listeners.adminPort,
      certFile: tls?.certFile,
      stop: () => (stopped ??= life.close().then(() => log('stopped'))),
    };
  });
}

/**
 * The keys of PUSHBASE_API_KEYS (configuration, by hash, as `pushbase serve` holds them), before the account
 * store in Redis (the accounts topic's fold; see RedisKeyStore).
 */
function configuredKeys(config: GatewayConfig): Map<string, ConfiguredKey> {
  const configured = new Map<string, ConfiguredKey>();
  for (const { key, account } of parseBootstrapKeys(config.apiKeys)) {
    const hash = hashApiKey(key);
    configured.set(hash, { account, key_id: configuredKeyId(hash), scope: 'write' });
  }
  return configured;
}

/**
 * With no key configured and no account in the log, a first start makes the account `default` and one key
 * for it — as events, through the schema service like any account change — and shows the key once, as the
 * embedded mode's first start does, so `npm run start:distributed` is usable straight away. Best effort: a
 * schema service not reachable yet is logged, and `pushbase accounts create` / `pushbase keys create` do
 * the same later. Two gateways starting at once may each make a key; both work, each is shown once.
 */
async function firstStartKey(accounts: AccountAdmin & Closable, redis: Redis, prefix: string, dataDir: string, log: Logger): Promise<void> {
  // Keys of an older version still in the Redis hash are the schema service's to import (importRedisApiKeys).
  if ((await new RedisAccountStore(redis, { prefix }).list()).length > 0 || (await redis.exists(`${prefix}api-keys`)) === 1) return;
  try {
    await accounts.waitForReady(10_000);
    await accounts.createAccount('default', DEFAULT_QUOTAS).catch(ignoreConflict);
    if ((await accounts.listKeys('default')).length > 0) return;
    const { key, key_id } = await accounts.createKey('default', { scope: 'write', label: 'first start' });
    // Never in the log (collectors keep it): on the terminal, or in a file only this user can read.
    await showGeneratedKey(dataDir, 'default', key, (msg, fields) => log(msg, { ...fields, key_id }));
  } catch (e) {
    log('warning: no API key configured and none could be made for account "default"; create one with `pushbase accounts create` and `pushbase keys create`', {
      error: e instanceof Error ? e.message : String(e),
    });
  }
}

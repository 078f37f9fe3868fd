import type { RequestScope } from '@pushbase/contracts';
import { httpMetrics } from '@pushbase/metrics';
import type { JsonLogger, MessageLog } from '@pushbase/telemetry';
import { createAdminApp, type AdminDeps } from './admin';
import { createGatewayApp, type GatewayDeps } from './app';
import { parseBootstrapKeys } from './keys';
import type { ListenerConfig } from './listener-config';
import { startListeners, type ListenerOptions, type RunningListeners } from './listeners';
import { memoryRateLimiter } from './rate-limit';
import { findUiDir } from './ui';

/*
 * The HTTP side of both runtimes, `pushbase serve` and `pushbase gateway`: the public and admin apps and
 * their listeners over the services each runtime wires (in process, or gRPC clients, Redis and ClickHouse).
 */

/** What a runtime wires for the HTTP side. */
export interface HttpServices {
  readonly schemas: GatewayDeps['schemas'];
  readonly records: GatewayDeps['records'];
  readonly keys: GatewayDeps['keys'];
  /** One budget per key across both listeners (a key's reads count once whichever listener they come to). */
  readonly rateLimiter: GatewayDeps['rateLimiter'];
  readonly accounts: NonNullable<AdminDeps['accounts']>;
  readonly readModel: AdminDeps['readModel'];
  readonly adminToken: string;
  /** Carries the request id into the gRPC calls a request makes (distributed). */
  readonly requestScope?: RequestScope;
}

export interface HttpContext {
  readonly logger: JsonLogger;
  readonly log: MessageLog;
  /** The process's one registry, served on the admin listener at GET /metrics. */
  readonly metrics: NonNullable<AdminDeps['metrics']>;
  readonly tls: ListenerOptions['tls'];
}

/** Builds the public and admin apps and starts their listeners. */
export async function startHttp(config: ListenerConfig, services: HttpServices, context: HttpContext): Promise<RunningListeners> {
  const { logger, log, metrics } = context;
  // Called inside the failed request (its span active): the line carries its trace_id.
  const errorLog = (line: string, requestId: string): void => logger.error({ request_id: requestId, detail: line }, 'request failed');
  const uiDir = findUiDir();
  if (uiDir === undefined) log('the dataset browser page is not built (npm run build): /ui/ answers 404');
  // Per process in both modes: it bounds the noise one address makes here, on either listener.
  const authFailureLimiter = memoryRateLimiter(config.authFailuresPerMinute, 60, 'authfail');
  const { schemas, records, keys, rateLimiter, accounts, readModel, requestScope } = services;
  const gateway = createGatewayApp({
    schemas,
    records,
    keys,
    rateLimiter,
    authFailureLimiter,
    uploads: config.uploads,
    accountShare: config.accountShare,
    behindTlsProxy: config.behindTlsProxy,
    trustedProxies: config.trustedProxies.trust,
    ...(requestScope === undefined ? {} : { requestScope }),
    logger,
    log: errorLog,
    metrics: httpMetrics(metrics),
    read: { readModel, uiDir, ratePerMinute: config.readRateLimitPerMinute },
  });
  const admin = createAdminApp({
    readModel,
    token: services.adminToken,
    log: errorLog,
    metrics,
    accounts,
    keys,
    uiDir,
    configuredAccounts: new Set(parseBootstrapKeys(config.apiKeys).map((k) => k.account)),
    authFailureLimiter,
    rateLimiter,
    readRatePerMinute: config.readRateLimitPerMinute,
  });
  return startListeners(gateway, admin, { ...config, tls: context.tls });
}

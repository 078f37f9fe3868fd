import { randomUUID } from 'node:crypto';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import getRawBody from 'raw-body';
import type { AccountAdmin, KeyStore, RateLimiter, ReadModel } from '@pushbase/contracts';
import { invalid, parseAccountName, parseJsonBody, parseKeyLabel, parseKeyScope, parseQuotaChange, parseQuotas, quoteValue } from '@pushbase/domain';
import { METRICS_PATH, renderMetrics, type Registry } from '@pushbase/metrics';
import { errorMiddleware, HttpError } from './errors';
import { hashApiKey, safeEqual } from './keys';
import { apiKeyFromAuthorization, applyRateDecision, DEFAULT_READ_RATE_PER_MINUTE, guardFailedAuth } from './app';
import { DEFAULT_AUTH_FAILURES_PER_MINUTE } from './listener-config';
import { memoryRateLimiter, SlidingWindowRateLimiter, type FlexibleRateLimiter } from './rate-limit';
import { ADMIN_SESSION, isReadPath, keyReadSession, pageRoutes, readRoutes } from './read-side';

/** The admin listener's unauthenticated health route. */
export const HEALTH_PATH = '/healthz';

export interface AdminDeps {
  readonly readModel: ReadModel;
  readonly token: string;
  readonly log?: (line: string, requestId: string) => void;
  /** The process's registry, served at GET /metrics; without one there is no such route. */
  readonly metrics?: Registry;
  /** Accounts and keys (/admin/accounts…); without it those routes do not exist. */
  readonly accounts?: AccountAdmin;
  /** The API keys: with them a key (read or write scope) may use the read API here, for its own account. */
  readonly keys?: KeyStore;
  /** The dataset browser page's files (ui.ts findUiDir); the page answers 404 without them. */
  readonly uiDir?: string | undefined;
  /** The accounts PUSHBASE_API_KEYS names: not deleted here (see the DELETE route). */
  readonly configuredAccounts?: ReadonlySet<string>;
  /**
   * Failed authentications per client address, as on the public listener (give it the same limiter, so
   * guesses spread over both listeners count once); without it, one of this app's own at 100 a minute.
   */
  readonly authFailureLimiter?: FlexibleRateLimiter;
  /**
   * A key's reads here count as on the public listener, under `read:<key hash>` at `readRatePerMinute`
   * (600 unless given): the public listener's limiter gives a key one read budget across both. Without
   * one, this app's own in memory. The admin token is not limited.
   */
  readonly rateLimiter?: RateLimiter;
  readonly readRatePerMinute?: number;
}

// An admin body is a name, a few quotas, a label: anything bigger is a mistake.
const ADMIN_BODY_LIMIT_BYTES = 64 * 1024;

/** The JSON object body of an admin request, with only the `allowed` members (a typo must not pass unnoticed). */
async function readAdminBody(ctx: Context, allowed: readonly string[]): Promise<Record<string, unknown>> {
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { limit: ADMIN_BODY_LIMIT_BYTES, length: ctx.get('content-length') || null });
  } catch (e: unknown) {
    if (typeof e === 'object' && e !== null && (e as { type?: unknown }).type === 'entity.too.large') throw new HttpError(413, 'An admin request body is at most 64 KiB', 'body_too_large');
    throw e;
  }
  const body = parseJsonBody(raw) ?? {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('The request body must be a JSON object');
  for (const k of Object.keys(body)) {
    if (!allowed.includes(k)) throw invalid(`Unknown member ${quoteValue(k)}; this route takes ${allowed.join(', ')}`, k);
  }
  return body as Record<string, unknown>;
}

/**
 * The account and key routes over the AccountAdmin port (docs/operations.md → Accounts and API keys). Every answer
 * is `no-store`: a created key is shown this once, and the rest is not for caches either.
 */
function accountRoutes(router: Router, accounts: AccountAdmin, configuredAccounts: ReadonlySet<string>): void {
  const name = (ctx: Context): string => parseAccountName((ctx.params as Record<string, string | undefined>).account);
  router.use('/admin/accounts', async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    await next();
  });
  router.post('/admin/accounts', async (ctx) => {
    const body = await readAdminBody(ctx, ['account', 'quotas']);
    const view = await accounts.createAccount(parseAccountName(body.account), parseQuotas(body.quotas));
    ctx.status = 201;
    ctx.body = view;
  });
  router.get('/admin/accounts', async (ctx) => {
    ctx.body = { accounts: await accounts.listAccounts() };
  });
  router.get('/admin/accounts/:account', async (ctx) => {
    ctx.body = await accounts.getAccount(name(ctx));
  });
  // Only the quotas given change; null puts one back to the server's default.
  router.patch('/admin/accounts/:account', async (ctx) => {
    const account = name(ctx);
    const body = await readAdminBody(ctx, ['quotas']);
    if (body.quotas === undefined) throw invalid('quotas is required: {"quotas": {"datasets"?: n|null, "requests_per_minute"?: n|null}}', 'quotas');
    // Merged with the account's quotas inside the decision (under its lock or lease), not here.
    ctx.body = await accounts.setQuotas(account, parseQuotaChange(body.quotas));
  });
  router.delete('/admin/accounts/:account', async (ctx) => {
    const account = name(ctx);
    // A configured key is configuration, not an event: it would outlive the deletion and go on creating
    // datasets under the name, which a later account of that name would then find as its own.
    if (configuredAccounts.has(account)) {
      throw new HttpError(
        409,
        `Account "${account}" has a key in PUSHBASE_API_KEYS, which a deletion cannot revoke: remove it from PUSHBASE_API_KEYS on every gateway, restart them, then delete the account`,
        'account_has_configured_key',
      );
    }
    ctx.body = await accounts.deleteAccount(account);
  });
  router.post('/admin/accounts/:account/keys', async (ctx) => {
    const account = name(ctx);
    const body = await readAdminBody(ctx, ['scope', 'label']);
    const created = await accounts.createKey(account, { scope: parseKeyScope(body.scope), label: parseKeyLabel(body.label) });
    ctx.status = 201;
    ctx.body = created;
  });
  router.get('/admin/accounts/:account/keys', async (ctx) => {
    ctx.body = { keys: await accounts.listKeys(name(ctx)) };
  });
  router.delete('/admin/accounts/:account/keys/:key_id', async (ctx) => {
    await accounts.revokeKey(name(ctx), ctx.params.key_id ?? '');
    ctx.status = 204;
  });
}

/**
 * The internal read side (docs/operations.md → The read side): a separate listener, loopback by default, behind a
 * bearer token. The public API deliberately offers no read of records.
 */
export function createAdminApp({ readModel, token, log, metrics, accounts, keys, uiDir, configuredAccounts = new Set(), ...limits }: AdminDeps): Koa {
  const authFailures = limits.authFailureLimiter ?? memoryRateLimiter(DEFAULT_AUTH_FAILURES_PER_MINUTE, 60, 'admin-authfail');
  const readRate = limits.readRatePerMinute ?? DEFAULT_READ_RATE_PER_MINUTE;
  const reads = limits.rateLimiter ?? new SlidingWindowRateLimiter(readRate, 60_000);
  const app = new Koa();
  app.use(async (ctx: Context, next: Next) => {
    ctx.state.requestId = randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId as string);
    await next();
  });
  app.use(errorMiddleware(log ?? ((line: string) => process.stderr.write(`${line}\n`))));
  /*
   * The one route without the token: an orchestrator's HTTP probe (the chart's liveness and readiness)
   * carries no credentials, and the public port cannot serve it (every route there needs an API key and,
   * behind a TLS proxy, a peer among the trusted proxies). It says only that this process serves; no data.
   */
  app.use(async (ctx: Context, next: Next) => {
    if (ctx.path !== HEALTH_PATH || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) {
      await next();
      return;
    }
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { status: 'ok' };
  });
  /*
   * Prometheus's scrape, also without the token: scrapers usually reach an internal port unauthenticated
   * (the chart's pod annotations cannot carry a credential, and a token in every Prometheus config would be
   * one more copy of the admin secret). What it shows is operational only, by construction of its labels:
   * route patterns, status codes, partitions; never an account, dataset id, key or record. The listener is
   * loopback by default, and in the chart a NetworkPolicy admits only the namespaces told to scrape it.
   * docs/metrics.md says the same to operators.
   */
  if (metrics !== undefined) {
    app.use(async (ctx: Context, next: Next) => {
      if (ctx.path !== METRICS_PATH || (ctx.method !== 'GET' && ctx.method !== 'HEAD')) {
        await next();
        return;
      }
      const { contentType, body } = await renderMetrics(metrics);
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Content-Type', contentType);
      ctx.body = body;
    });
  }
  // The dataset browser page's files: no data in them, so no token (the page signs in through the read API).
  app.use(pageRoutes(uiDir, { redirectRoot: true }));
  app.use(async (ctx: Context, next: Next) => {
    const authorization = ctx.get('authorization');
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
    if (bearer !== undefined && safeEqual(bearer, token)) {
      ctx.state.readSession = ADMIN_SESSION;
      await next();
      return;
    }
    // The read routes also take an account's key (as Bearer, or Basic as the push API sends it).
    const key = isReadPath(ctx.path) ? (bearer ?? apiKeyFromAuthorization(authorization || undefined)) : undefined;
    const session = await keyReadSession(keys, key);
    if (session === undefined) {
      // The public listener's guard: this listener is plain HTTP and may be reachable by more than operators.
      await guardFailedAuth(authFailures, ctx.ip, 'Too many requests with invalid credentials from this address. Try again later.');
      ctx.set('WWW-Authenticate', 'Bearer realm="pushbase-admin"');
      throw new HttpError(401, isReadPath(ctx.path) ? 'A valid API key or the admin bearer token is required' : 'A valid admin bearer token is required', 'unauthorized');
    }
    applyRateDecision(ctx, await reads.consume(`read:${hashApiKey(key as string)}`, readRate));
    ctx.state.readSession = session;
    await next();
  });
  const router = new Router();
  if (accounts !== undefined) accountRoutes(router, accounts, configuredAccounts);
  router.get('/admin/accounts/:account/datasets', async (ctx) => {
    ctx.body = { datasets: await readModel.listDatasets(ctx.params.account ?? '') };
  });
  router.get('/admin/accounts/:account/datasets/:id/records', async (ctx) => {
    const records = await readModel.listRecords(ctx.params.account ?? '', ctx.params.id ?? '');
    if (records === undefined) throw new HttpError(404, 'Dataset not found', 'not_found');
    ctx.body = { records };
  });
  app.use(router.routes());
  app.use(readRoutes(readModel));
  app.use(async (ctx: Context, next: Next) => {
    await next();
    if (ctx.body === undefined && ctx.status === 404) throw new HttpError(404, `No such endpoint: ${ctx.method} ${ctx.path}`, 'no_route');
  });
  return app;
}

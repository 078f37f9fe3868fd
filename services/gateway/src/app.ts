import { randomUUID } from 'node:crypto';
import { Stream } from 'node:stream';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import type { KeyStore, Principal, RecordService, RequestScope, SchemaService } from '@pushbase/contracts';
import type { HttpMetrics } from '@pushbase/metrics';
import { formatUtcMillis, parseJsonBody, type DatasetSummary } from '@pushbase/domain';
import { errorMiddleware, HttpError } from './errors';
import { isReadPath, keySession, pageRoutes, readRoutes, type ReadSideDeps } from './read-side';
import { DEFAULT_TRUSTED_PROXIES, forwardedClientAddress, fromTrustedProxy, parseTrustedProxies, type ProxyTrust } from './trusted-proxies';
import { hashApiKey } from './keys';
import { IDEMPOTENT_REPLAYED_HEADER, idempotencyKeyOf, keyedMark } from './idempotency';
import { BODY_LIMIT_BYTES, DEFINITION_LIMIT_BYTES, UploadBudget, withWriteBody, type UploadLimits } from './uploads';
import { AccountGate, type AccountShare, type GateClock } from './account-gate';
import type { FlexibleRateLimiter } from './rate-limit';
import type { RateDecision, RateLimiter } from '@pushbase/contracts';
import { context, propagation, pushbaseTracer, SpanKind, SpanStatusCode, trace, type JsonLogger } from '@pushbase/telemetry';

export interface GatewayDeps {
  readonly schemas: SchemaService;
  readonly records: RecordService;
  readonly keys: KeyStore;
  /** Requests per key, up to the key's account's requests_per_minute quota (60 a rolling minute: docs/api.md → Limits). */
  readonly rateLimiter: RateLimiter;
  /** Failed authentications per client address: a brute-force guard. */
  readonly authFailureLimiter: FlexibleRateLimiter;
  /**
   * Set only when a TLS-terminating proxy forwards plain HTTP: then only requests from `trustedProxies`
   * are served, a request whose X-Forwarded-Proto is not https is refused, and the client address comes
   * from X-Forwarded-For through trusted hops.
   */
  readonly behindTlsProxy?: boolean;
  /** Behind the proxy: the peers whose X-Forwarded-* headers count; loopback when not given. */
  readonly trustedProxies?: ProxyTrust;
  /** Unexpected failures (answered 500), with the request's id. Default: stderr. */
  readonly log?: (line: string, requestId: string) => void;
  /**
   * Each request runs inside this scope with its request id, so the ports' adapters behind it (the gRPC
   * clients) can send the id on without the port interfaces taking it. Give the same instance to them.
   */
  readonly requestScope?: RequestScope;
  /** Requests by route and status, their latency, rate-limit refusals (docs/metrics.md). None when not given. */
  readonly metrics?: HttpMetrics;
  /** At debug level, one line per request (route, status, ms) with its request_id and trace_id. */
  readonly logger?: JsonLogger;
  /** The read API and the dataset browser page for the accounts' keys (read-side.ts); absent: neither. */
  readonly read?: ReadSideDeps;
  /** The deadline of a write's body and the bytes in flight per account and per process (uploads.ts). */
  readonly uploads?: UploadLimits;
  /** How many of an account's requests are worked on at once, how many may wait, and its read time (account-gate.ts). */
  readonly accountShare?: AccountShare;
  /** The clock the read time is kept on; tests give their own. */
  readonly gateClock?: GateClock;
}

/** Read requests per minute per key on the public listener, unless PUSHBASE_READ_RATE_LIMIT_PER_MINUTE says otherwise. */
export const DEFAULT_READ_RATE_PER_MINUTE = 600;

const rateLimitMessage = (limit: number): string => `You have exceeded the API rate limit of ${limit} requests per minute. Try sending data less frequently.`;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Basic auth with the API key as user name and an empty password (`<API_KEY>:`). */
export function apiKeyFromAuthorization(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (m === null) return undefined;
  const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const key = colon === -1 ? decoded : decoded.slice(0, colon);
  return key === '' ? undefined : key;
}

export function datasetResponse(ds: DatasetSummary): Record<string, unknown> {
  const out: Record<string, unknown> = { id: ds.id, fields: ds.definition.fields };
  if (ds.definition.unique_by.length > 0) out.unique_by = ds.definition.unique_by;
  out.created_at = formatUtcMillis(ds.created_at);
  out.updated_at = formatUtcMillis(ds.updated_at);
  return out;
}

const principal = (ctx: Context): Principal => ctx.state.principal as Principal;
const account = (ctx: Context): string => principal(ctx).account;

/** Methods a read key may use: those that change nothing (RFC 9110 §9.2.1; OPTIONS has no route here). */
const READ_METHODS = new Set(['GET', 'HEAD']);

/**
 * Runs the requests of one connection one after another, in the order they arrived. Node's HTTP server
 * hands over pipelined requests as soon as it has parsed them and only orders the responses; but HTTP
 * lets a server work on pipelined requests at the same time only when all of them are safe (RFC 9112
 * §9.3.2), and a client that pipelines a create and an append means them in that order. So a request's
 * handler starts only once the previous one on its socket has finished, errors included. A promise chain
 * per socket is all it takes (a queue library would add nothing); the WeakMap forgets closed sockets.
 * HTTP/1 only: HTTP/2 multiplexes independent streams, which promise no order, over one shared socket.
 */
function inConnectionOrder() {
  const previousOnSocket = new WeakMap<object, Promise<void>>();
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.req.httpVersionMajor !== 1) {
      await next();
      return;
    }
    const socket = ctx.req.socket;
    const previous = previousOnSocket.get(socket);
    let finished!: () => void;
    const mine = new Promise<void>((resolve) => (finished = resolve));
    previousOnSocket.set(socket, mine);
    try {
      if (previous !== undefined) await previous;
      await next();
    } finally {
      finished();
      if (previousOnSocket.get(socket) === mine) previousOnSocket.delete(socket);
    }
  };
}

/**
 * The failed-authentication guard of both listeners, for a request that failed to authenticate: refused
 * (429) without being counted while its address is over the limit, else counted (the caller answers 401).
 */
export async function guardFailedAuth(limiter: FlexibleRateLimiter, address: string, message: string, metrics?: HttpMetrics): Promise<void> {
  const blocked = await limiter.isBlocked(address);
  if (blocked !== undefined) {
    metrics?.rateLimitRefused('auth_failures');
    throw new HttpError(429, message, 'auth_rate_limited', { 'Retry-After': String(Math.max(1, Math.ceil(blocked.resetMs / 1000))) });
  }
  await limiter.consume(address);
}

/** The RateLimit-* headers of a per-key decision; a refused request is a 429 with Retry-After. */
export function applyRateDecision(ctx: Context, d: RateDecision): void {
  const resetSeconds = Math.max(0, Math.ceil(d.resetMs / 1000));
  ctx.set('RateLimit-Limit', String(d.limit));
  ctx.set('RateLimit-Remaining', String(d.remaining));
  ctx.set('RateLimit-Reset', String(resetSeconds));
  if (!d.allowed) throw new HttpError(429, rateLimitMessage(d.limit), 'rate_limited', { 'Retry-After': String(Math.max(1, resetSeconds)) });
}

/** Route label of a request never routed (refused before the router, or no route matched). */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Times every request from its arrival to its answer (errors included: the error middleware sits inside)
 * and counts it by route pattern, never by raw path, so a dataset id never becomes a label. A request
 * refused before the router ran (401, 429, 403) is still labelled with the route its path and method match.
 */
function routeOfRequest(router: Router): (ctx: Context) => string {
  return (ctx) => {
    const matched: unknown = ctx._matchedRoute;
    if (typeof matched === 'string') return matched;
    const m = router.match(ctx.path, ctx.method);
    const layer = m.pathAndMethod.at(-1) ?? m.path.at(-1);
    return typeof layer?.path === 'string' ? layer.path : UNMATCHED_ROUTE;
  };
}

function measured(metrics: HttpMetrics, router: Router) {
  const routeOf = routeOfRequest(router);
  return async (ctx: Context, next: Next): Promise<void> => {
    const started = performance.now();
    try {
      await next();
    } catch (e) {
      // Nothing gets past the error middleware but a bug of its own; Koa answers that 500.
      metrics.request(routeOf(ctx), ctx.method, 500, performance.now() - started);
      throw e;
    }
    metrics.request(routeOf(ctx), ctx.method, ctx.status, performance.now() - started);
  };
}

/**
 * The request's server span: the parent of everything the request does (its gRPC calls, its event log
 * append), itself the child of the client's span when the request carries a W3C `traceparent`. Outermost,
 * so it covers the request's whole time here. With tracing off it costs the API's no-op calls.
 */
function traced(router: Router) {
  const tracer = pushbaseTracer();
  const routeOf = routeOfRequest(router);
  return async (ctx: Context, next: Next): Promise<void> => {
    const parent = propagation.extract(context.active(), ctx.headers);
    const span = tracer.startSpan(ctx.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': ctx.method, 'url.path': ctx.path } }, parent);
    try {
      await context.with(trace.setSpan(parent, span), next);
    } finally {
      if (span.isRecording()) {
        const route = routeOf(ctx);
        span.updateName(`${ctx.method} ${route}`);
        span.setAttributes({ 'http.route': route, 'http.response.status_code': ctx.status });
        if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    }
  };
}

/** The public API of docs/api.md as an unstarted Koa app; the caller puts it behind HTTPS. */
export function createGatewayApp(deps: GatewayDeps): Koa {
  const log = deps.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  // Koa's own proxy mode would believe X-Forwarded-* from any peer that reaches the port: the forwarded
  // headers are read below, and only from trusted proxies.
  const app = new Koa({ proxy: false });
  const router = new Router();

  app.use(traced(router));
  // Outside the connection order too: a pipelined request's wait for the one before it is part of its latency.
  if (deps.metrics !== undefined) app.use(measured(deps.metrics, router));
  app.use(inConnectionOrder());
  const routeOf = routeOfRequest(router);
  app.use(async (ctx: Context, next: Next) => {
    const given = ctx.get('x-request-id');
    const requestId = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    const span = trace.getActiveSpan();
    if (span?.isRecording() === true) span.setAttribute('pushbase.request_id', requestId);
    const started = performance.now();
    if (deps.requestScope === undefined) await next();
    else await deps.requestScope.run({ requestId }, next);
    if (deps.logger?.isLevelEnabled('debug') === true) {
      deps.logger.debug({ request_id: requestId, method: ctx.method, route: routeOf(ctx), status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  });
  app.use(errorMiddleware(log));

  if (deps.behindTlsProxy === true) {
    const trust = deps.trustedProxies ?? parseTrustedProxies(DEFAULT_TRUSTED_PROXIES).trust;
    app.use(async (ctx: Context, next: Next) => {
      // The port speaks plain HTTP and may be reachable by more than the proxy (the default listen address
      // is 0.0.0.0). A request from any other peer came in the clear, whatever its X-Forwarded-Proto says:
      // refuse it (403: the sender may not use this port directly) rather than trust its headers.
      if (!fromTrustedProxy(ctx.req, trust)) {
        throw new HttpError(403, 'This port serves only requests forwarded by the TLS proxy; send requests over HTTPS through it', 'not_from_trusted_proxy');
      }
      // The last entry is the one our proxy set; earlier ones may come from the client.
      if (ctx.get('x-forwarded-proto').split(',').at(-1)?.trim().toLowerCase() !== 'https') {
        throw new HttpError(400, 'Only HTTPS requests are accepted', 'https_required');
      }
      ctx.state.clientAddress = forwardedClientAddress(ctx.req, trust);
      await next();
    });
  }

  // The page's files hold no data: served without a key (the page signs in through the read API). Not `/`,
  // which is the push API's ping here.
  if (deps.read !== undefined) app.use(pageRoutes(deps.read.uiDir));

  // Authentication, with a per-address guard against guessing keys. The guard refuses only requests that
  // fail to authenticate: a valid key is never locked out by other clients' failures behind the same
  // address (a NAT, or the proxy itself), and has its own per-key limit below. Keys are high-entropy
  // (generated ones carry 256 bits), so the guard bounds noise and load rather than making a key guessable.
  app.use(async (ctx: Context, next: Next) => {
    const key = apiKeyFromAuthorization(ctx.get('authorization') || undefined);
    const who = key === undefined ? undefined : await deps.keys.resolve(key);
    if (who === undefined) {
      const address = (ctx.state.clientAddress as string | undefined) ?? ctx.ip;
      await guardFailedAuth(deps.authFailureLimiter, address, 'Too many requests with an invalid API key from this address. Try again later.', deps.metrics);
      // Not `Basic`: a browser answers that challenge with a login prompt and then attaches whatever was
      // typed to every request to this origin, other sites' form posts included. A scheme no browser
      // prompts for still tells a client (RFC 9110 §11.6.1) how to authenticate.
      ctx.set('WWW-Authenticate', 'APIKey realm="pushbase", hint="HTTP Basic authentication with the key as user name"');
      throw new HttpError(401, 'Your API key is invalid', 'unauthorized');
    }
    ctx.state.principal = who;
    // Counted under the key's hash, so a shared limiter's store (Redis) never holds a key in the clear.
    ctx.state.rateKey = hashApiKey(key as string);
    await next();
  });

  // 60 requests per minute per API key (docs/api.md → Limits), or the account's own quota.
  app.use(async (ctx: Context, next: Next) => {
    // Reads count apart, under a limit of their own: a page polling once a second must not use up the
    // key's pushes, and pushes must not starve the page.
    const reading = deps.read !== undefined && isReadPath(ctx.path);
    const d = reading
      ? await deps.rateLimiter.consume(`read:${ctx.state.rateKey as string}`, deps.read?.ratePerMinute ?? DEFAULT_READ_RATE_PER_MINUTE)
      : await deps.rateLimiter.consume(ctx.state.rateKey as string, principal(ctx).quotas.requests_per_minute);
    if (!d.allowed) deps.metrics?.rateLimitRefused('api_key');
    applyRateDecision(ctx, d);
    await next();
  });

  // A browser sends Origin (and Sec-Fetch-Site) with every write; the API's clients send neither, and
  // pushbase's own page only reads. A write from a page of another site would carry a key the browser
  // holds, whatever the body's type: refused, as is one from a page of this origin that is not pushbase's.
  app.use(async (ctx: Context, next: Next) => {
    if (!READ_METHODS.has(ctx.method)) {
      const site = ctx.get('sec-fetch-site');
      if ((site !== '' && site !== 'none') || ctx.get('origin') !== '') {
        throw new HttpError(403, 'Writes are not accepted from web pages; send them from a server or a script', 'browser_write');
      }
    }
    await next();
  });

  // A read key (the widget read side of docs/read-api.md, which may sit in a browser page) authenticates — it may ping
  // and read — but writes nothing. Decided here by method for every route, before any is matched, rather
  // than by each write route: a write route added later is protected without remembering to be.
  app.use(async (ctx: Context, next: Next) => {
    if (principal(ctx).scope !== 'write' && !READ_METHODS.has(ctx.method)) {
      throw new HttpError(403, 'This API key is read-only; writing needs a key with write scope', 'read_only_key');
    }
    await next();
  });

  const uploads = new UploadBudget(deps.uploads);
  const gate = new AccountGate(deps.accountShare, deps.gateClock);
  // A write takes its account's turn once its body is in: a slow upload holds bytes, not a turn.
  const inTurn = <T>(ctx: Context, work: () => Promise<T>, bytes = 0): Promise<T> => gate.run(account(ctx), work, 'write', bytes);
  /** The write's body, then its work in the account's turn (its bytes charged to the account's write budget), its bytes counted until the work ends. */
  const writeInTurn = <T>(ctx: Context, limit: number, work: (body: Buffer) => Promise<T>): Promise<T> =>
    withWriteBody(ctx, uploads, account(ctx), limit, (body) => inTurn(ctx, () => work(body), body.length));

  const ok = (ctx: Context, status = 200, body: unknown = {}): void => {
    ctx.status = status;
    ctx.body = body;
  };

  /** A repeat of a keyed write already applied: answered as the first time, and said so (docs/api.md). */
  const replayed = (ctx: Context, answer: { readonly replayed?: boolean }): void => {
    if (answer.replayed !== true) return;
    ctx.set(IDEMPOTENT_REPLAYED_HEADER, 'true');
    deps.metrics?.idempotentReplay(routeOf(ctx));
  };

  router.get('/', (ctx) => ok(ctx));
  router.put('/datasets/:id', async (ctx) => {
    const key = idempotencyKeyOf(ctx);
    // Parsed as JSON unless the Content-Type is a form's (uploads.ts): a missing one means JSON.
    const answer = await writeInTurn(ctx, DEFINITION_LIMIT_BYTES, (raw) =>
      deps.schemas.findOrCreate({ account: account(ctx), id: ctx.params.id ?? '', body: parseJsonBody(raw), ...keyedMark(ctx, key, raw) }),
    );
    replayed(ctx, answer);
    ok(ctx, answer.created ? 201 : 200, datasetResponse(answer.dataset));
  });
  router.delete('/datasets/:id', async (ctx) => {
    const key = idempotencyKeyOf(ctx);
    replayed(ctx, await inTurn(ctx, () => deps.schemas.delete({ account: account(ctx), id: ctx.params.id ?? '', ...keyedMark(ctx, key) })));
    ok(ctx);
  });
  router.post('/datasets/:id/data', async (ctx) => {
    const key = idempotencyKeyOf(ctx);
    replayed(ctx, await writeInTurn(ctx, BODY_LIMIT_BYTES, (json) => deps.records.append({ account: account(ctx), id: ctx.params.id ?? '', json, ...keyedMark(ctx, key, json) })));
    ok(ctx);
  });
  router.put('/datasets/:id/data', async (ctx) => {
    const key = idempotencyKeyOf(ctx);
    replayed(ctx, await writeInTurn(ctx, BODY_LIMIT_BYTES, (json) => deps.records.replace({ account: account(ctx), id: ctx.params.id ?? '', json, ...keyedMark(ctx, key, json) })));
    ok(ctx);
  });

  if (deps.read !== undefined) {
    app.use(async (ctx: Context, next: Next) => {
      if (isReadPath(ctx.path)) ctx.state.readSession = keySession(principal(ctx));
      await next();
    });
    const reads = readRoutes(deps.read.readModel);
    // The answer is serialised inside the turn too: for a listing of wide definitions that is most of the work.
    const readInTurn = async (ctx: Context, next: Next): Promise<void> => {
      await reads(ctx, next);
      if (ctx.response.is('json') === 'json' && ctx.body !== null && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) && !(ctx.body instanceof Stream)) ctx.body = JSON.stringify(ctx.body);
    };
    app.use(async (ctx: Context, next: Next) => {
      if (isReadPath(ctx.path)) await gate.run(account(ctx), () => readInTurn(ctx, next), 'read');
      else await reads(ctx, next);
    });
  }
  app.use(router.routes());
  app.use(async (ctx: Context, next: Next) => {
    await next();
    if (ctx.body !== undefined || ctx.status !== 404) return;
    const allowed = router.match(ctx.path, ctx.method).path.flatMap((layer) => layer.methods);
    if (allowed.length > 0) {
      throw new HttpError(405, `Method ${ctx.method} is not allowed on ${ctx.path}; use ${[...new Set(allowed)].join(', ')}`, 'method_not_allowed', {
        Allow: [...new Set(allowed)].join(', '),
      });
    }
    throw new HttpError(404, `No such endpoint: ${ctx.method} ${ctx.path}`, 'no_route');
  });
  return app;
}

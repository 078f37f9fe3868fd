import { randomUUID } from 'node:crypto';
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import type { ReadModel } from '@pushbase/contracts';
import { METRICS_PATH, renderMetrics, type Registry } from '@pushbase/metrics';
import { errorMiddleware, HttpError } from './errors';
import { safeEqual } from './keys';
import { createReadApi } from './read-api';

/** The admin listener's unauthenticated health route. */
export const HEALTH_PATH = '/healthz';

export interface AdminDeps {
  readonly readModel: ReadModel;
  readonly token: string;
  readonly log?: (line: string) => void;
  /** The process's registry, served at GET /metrics; without one there is no such route. */
  readonly metrics?: Registry;
}

/**
 * The internal read side (DECISIONS.md → Read side): a separate listener, loopback by default, behind a
 * bearer token. The public API deliberately offers no read of records.
 */
export function createAdminApp({ readModel, token, log, metrics }: AdminDeps): Koa {
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
  app.use(async (ctx: Context, next: Next) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
    if (m === null || !safeEqual(m[1] as string, token)) {
      ctx.set('WWW-Authenticate', 'Bearer realm="pushbase-admin"');
      throw new HttpError(401, 'A valid admin bearer token is required', 'unauthorized');
    }
    await next();
  });
  const router = new Router();
  router.get('/admin/accounts/:account/datasets', async (ctx) => {
    ctx.body = { datasets: await readModel.listDatasets(ctx.params.account ?? '') };
  });
  router.get('/admin/accounts/:account/datasets/:id/records', async (ctx) => {
    const records = await readModel.listRecords(ctx.params.account ?? '', ctx.params.id ?? '');
    if (records === undefined) throw new HttpError(404, 'Dataset not found', 'not_found');
    ctx.body = { records };
  });
  app.use(router.routes());
  app.use(createReadApi({ readModel }));
  app.use(async (ctx: Context, next: Next) => {
    await next();
    if (ctx.body === undefined && ctx.status === 404) throw new HttpError(404, `No such endpoint: ${ctx.method} ${ctx.path}`, 'no_route');
  });
  return app;
}

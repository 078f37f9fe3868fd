/*
 * The gateway's request metrics against in-process fakes: the route label is always a route pattern (a
 * dataset id never becomes a label value), whatever refused the request and wherever; methods outside the
 * API fold into one value; a 500 is counted; each limit's 429s are counted as refusals of that limit. The
 * admin listener serves /metrics without the token only when given a registry.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import type { DatasetEvent } from '@pushbase/domain';
import { createMetricsRegistry, httpMetrics } from '@pushbase/metrics';
import { createAdminApp, createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter, UNMATCHED_ROUTE } from '../src';
import { sample } from '../../../test/helpers/metrics';

class BuggyLog extends MemoryEventLog {
  bug = false;
  override append(events: readonly DatasetEvent[]): Promise<void> {
    return this.bug ? Promise.reject(new TypeError('a bug')) : super.append(events);
  }
}

async function serve(app: Koa): Promise<{ server: Server; url: string }> {
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('gateway metrics', () => {
  const registry = createMetricsRegistry({ processMetrics: false });
  const log = new BuggyLog();
  const projection = new MemoryProjection();
  // The account `slowpoke` may make one request a minute (its quota).
  const keys = new MemoryKeyStore((account) => ({ datasets: 100, requests_per_minute: account === 'slowpoke' ? 1 : 1000 }));
  keys.add(hashApiKey('k'), 'acme');
  keys.add(hashApiKey('slow'), 'slowpoke');
  let gateway: { server: Server; url: string };
  let admin: { server: Server; url: string };
  let bare: { server: Server; url: string };

  beforeAll(async () => {
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    let n = 0;
    gateway = await serve(
      createGatewayApp({
        schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => `inc-${n++}` } }),
        records: createRecordService({ schemas: projection, log, clock }),
        keys,
        rateLimiter: new SlidingWindowRateLimiter(60, 60_000),
        authFailureLimiter: memoryRateLimiter(2, 60, 'af'),
        log: () => undefined,
        metrics: httpMetrics(registry),
      }),
    );
    admin = await serve(createAdminApp({ readModel: projection, token: 'admin-token-for-metrics-0123', log: () => undefined, metrics: registry }));
    bare = await serve(createAdminApp({ readModel: projection, token: 'admin-token-for-metrics-0123', log: () => undefined }));
  });
  afterAll(async () => {
    await Promise.all([gateway, admin, bare].map(({ server }) => new Promise((r) => server.close(r))));
  });

  const call = (method: string, path: string, key: string | undefined = 'k', body?: unknown) =>
    fetch(`${gateway.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}` }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const count = async (labels: Record<string, string>): Promise<number | undefined> => sample(await registry.metrics(), 'pushbase_http_requests_total', labels);

  it('labels every request with its route pattern, never its path, whoever refused it', async () => {
    expect((await call('PUT', '/datasets/secret.sales', 'k', { fields: { n: { type: 'number', name: 'N' } } })).status).toBe(201);
    expect((await call('POST', '/datasets/secret.sales/data', 'k', { data: [{ n: 1 }] })).status).toBe(200);
    expect((await call('GET', '/datasets/secret.sales')).status).toBe(405);
    expect((await call('GET', '/no/such/secret/place')).status).toBe(404);
    expect((await call('PROPFIND', '/datasets/secret.sales')).status).toBe(405);
    log.bug = true;
    expect((await call('POST', '/datasets/secret.sales/data', 'k', { data: [{ n: 2 }] })).status).toBe(500);
    log.bug = false;
    expect(await count({ route: '/datasets/:id', method: 'PUT', status: '201' })).toBe(1);
    expect(await count({ route: '/datasets/:id/data', method: 'POST', status: '200' })).toBe(1);
    expect(await count({ route: '/datasets/:id/data', method: 'POST', status: '500' })).toBe(1);
    expect(await count({ route: '/datasets/:id', method: 'GET', status: '405' })).toBe(1);
    expect(await count({ route: '/datasets/:id', method: 'other', status: '405' })).toBe(1);
    expect(await count({ route: UNMATCHED_ROUTE, method: 'GET', status: '404' })).toBe(1);
    expect(await registry.metrics()).not.toMatch(/secret/);
  });

  it('counts the refusals of each limit, labelled with the route the refused request asked for', async () => {
    for (let i = 0; i < 2; i++) expect((await call('POST', '/datasets/x/data', 'wrong', { data: [] })).status).toBe(401);
    expect((await call('POST', '/datasets/x/data', 'wrong', { data: [] })).status).toBe(429);
    expect((await call('GET', '/', 'slow')).status).toBe(200);
    expect((await call('GET', '/', 'slow')).status).toBe(429);
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_rate_limit_refusals_total', { limit: 'auth_failures' })).toBe(1);
    expect(sample(text, 'pushbase_rate_limit_refusals_total', { limit: 'api_key' })).toBe(1);
    expect(await count({ route: '/datasets/:id/data', method: 'POST', status: '401' })).toBe(2);
    expect(await count({ route: '/datasets/:id/data', method: 'POST', status: '429' })).toBe(1);
    expect(await count({ route: '/', method: 'GET', status: '429' })).toBe(1);
  });

  it('serves /metrics on the admin listener without the token, and only when given a registry', async () => {
    const res = await fetch(`${admin.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toMatch(/^pushbase_http_requests_total\{/m);
    expect((await fetch(`${admin.url}/metrics`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${bare.url}/metrics`)).status).toBe(401);
  });
});

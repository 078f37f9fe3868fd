/*
 * The admin listener's health route, what the Helm chart's HTTP probes call: answered without the admin
 * token (a kubelet's probe carries none), and nothing else on the admin listener opens up with it. The
 * public API's answers do not change: it has no such route, and an unauthenticated request there is the
 * same 401 as before.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { createAdminApp, createGatewayApp, HEALTH_PATH, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

const TOKEN = 'admin-token-for-health-tests-0123';

async function serve(app: Koa): Promise<{ server: Server; url: string }> {
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('admin health route', () => {
  const projection = new MemoryProjection();
  let admin: { server: Server; url: string };
  let gateway: { server: Server; url: string };

  beforeAll(async () => {
    const log = new MemoryEventLog();
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    admin = await serve(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined }));
    gateway = await serve(
      createGatewayApp({
        schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => 'inc' } }),
        records: createRecordService({ schemas: projection, log, clock }),
        keys: new MemoryKeyStore(),
        rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
        authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
        log: () => undefined,
      }),
    );
  });
  afterAll(async () => {
    await Promise.all([admin, gateway].map(({ server }) => new Promise((r) => server.close(r))));
  });

  it('is /healthz', () => {
    expect(HEALTH_PATH).toBe('/healthz');
  });

  it('answers 200 {"status":"ok"} to GET and HEAD without a token, never cached', async () => {
    const res = await fetch(`${admin.url}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toEqual({ status: 'ok' });
    const head = await fetch(`${admin.url}/healthz`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('opens nothing else: other methods, other paths and the read routes still need the token', async () => {
    for (const [method, path] of [
      ['POST', '/healthz'],
      ['GET', '/healthz/x'],
      ['GET', '/admin/accounts/acme/datasets'],
      ['GET', '/read/v1/accounts/acme/datasets'],
      ['GET', '/read/v1/accounts/acme/datasets/x/aggregate?op=count'],
      ['GET', '/admin/healthz'],
    ] as const) {
      const res = await fetch(`${admin.url}${path}`, { method });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="pushbase-admin"');
    }
    const ok = await fetch(`${admin.url}/admin/accounts/acme/datasets`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
  });

  it('is not on the public API, which answers an unauthenticated /healthz as any other path: 401', async () => {
    const health = await fetch(`${gateway.url}/healthz`);
    const other = await fetch(`${gateway.url}/no-such-path`);
    expect(health.status).toBe(401);
    expect(other.status).toBe(401);
    // Equal but for the request id each answer carries.
    const { request_id: _a, ...healthError } = ((await health.json()) as { error: Record<string, unknown> }).error;
    const { request_id: _b, ...otherError } = ((await other.json()) as { error: Record<string, unknown> }).error;
    expect(healthError).toEqual(otherError);
  });
});

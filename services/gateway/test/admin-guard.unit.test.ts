/*
 * The admin listener's limits, the public listener's own: failed authentications per client address (429
 * with Retry-After beyond the limit, while the right token still gets in), and a key's reads of the read
 * API per key. The admin token is not limited. Without limiters given, the admin app makes its own.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { createAdminApp, createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

const TOKEN = 'admin-token-for-guard-tests-0123';
const KEY = 'read-key-of-acme-for-guard-0123456789';
const SHARED_KEY = 'read-key-of-acme-shared-0123456789';

async function serve(app: Koa): Promise<{ server: Server; url: string }> {
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const basic = (key: string): string => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;

describe('the admin listener’s failed-authentication guard and read limit', () => {
  const projection = new MemoryProjection();
  const keys = new MemoryKeyStore(() => ({ datasets: 100, requests_per_minute: 1000 }));
  keys.add(hashApiKey(KEY), 'acme', 'read');
  keys.add(hashApiKey(SHARED_KEY), 'acme', 'read');
  const servers: Server[] = [];
  const start = async (app: Koa): Promise<string> => {
    const { server, url } = await serve(app);
    servers.push(server);
    return url;
  };
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  const get = async (base: string, path: string, authorization?: string): Promise<{ status: number; retryAfter: string | null; code: unknown }> => {
    const res = await fetch(`${base}${path}`, authorization === undefined ? {} : { headers: { authorization } });
    const body = (await res.json().catch(() => undefined)) as { error?: { code?: unknown } } | undefined;
    return { status: res.status, retryAfter: res.headers.get('retry-after'), code: body?.error?.code };
  };

  it('refuses an address past its failed authentications with 429 and Retry-After; the right token still gets in', async () => {
    const admin = await start(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined, keys, authFailureLimiter: memoryRateLimiter(3, 60, 'guard') }));
    const failures = [];
    for (const auth of ['Bearer wrong-token-0123456789', undefined, basic('not-a-key-0123456789')]) failures.push((await get(admin, '/read/v1/session', auth)).status);
    expect(failures).toEqual([401, 401, 401]);
    const refused = await get(admin, '/admin/accounts/acme/datasets', 'Bearer wrong-token-0123456789');
    expect(refused).toEqual({ status: 429, retryAfter: expect.stringMatching(/^[1-9]\d*$/), code: 'auth_rate_limited' });
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60);
    await expect(get(admin, '/admin/accounts/acme/datasets', `Bearer ${TOKEN}`)).resolves.toMatchObject({ status: 200 });
    await expect(get(admin, '/read/v1/session', basic(KEY))).resolves.toMatchObject({ status: 200 });
  });

  it('guards by default, at the public listener’s default of 100 a minute', async () => {
    const admin = await start(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined }));
    const statuses = [];
    for (let i = 0; i < 101; i++) statuses.push((await get(admin, '/admin/accounts/acme/datasets', 'Bearer wrong-token-0123456789')).status);
    expect(statuses.slice(0, 100).every((s) => s === 401)).toBe(true);
    expect(statuses[100]).toBe(429);
  });

  it('limits a key’s reads per key (429 with Retry-After), not the admin token’s', async () => {
    const admin = await start(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined, keys, rateLimiter: new SlidingWindowRateLimiter(1000, 60_000), readRatePerMinute: 2 }));
    const reads = [];
    for (let i = 0; i < 3; i++) reads.push(await get(admin, '/read/v1/accounts/acme/datasets', `Bearer ${KEY}`));
    expect(reads.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(reads[2]).toEqual({ status: 429, retryAfter: expect.stringMatching(/^[1-9]\d*$/), code: 'rate_limited' });
    for (let i = 0; i < 3; i++) await expect(get(admin, '/read/v1/accounts/acme/datasets', `Bearer ${TOKEN}`)).resolves.toMatchObject({ status: 200 });
  });

  it('counts a key’s reads on both listeners once, given the public listener’s limiter', async () => {
    const limiter = new SlidingWindowRateLimiter(1000, 60_000);
    const log = new MemoryEventLog();
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    const gateway = await start(
      createGatewayApp({
        schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => 'inc' } }),
        records: createRecordService({ schemas: projection, log, clock }),
        keys,
        rateLimiter: limiter,
        authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
        log: () => undefined,
        read: { readModel: projection, uiDir: undefined, ratePerMinute: 3 },
      }),
    );
    const admin = await start(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined, keys, rateLimiter: limiter, readRatePerMinute: 3 }));
    const statuses = [];
    for (const base of [gateway, admin, gateway, admin]) statuses.push((await get(base, '/read/v1/accounts/acme/datasets', basic(SHARED_KEY))).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });
});

/*
 * Who may use the read API (read-side.ts), on both listeners: a key reads its own account only, as Basic
 * (the push API's way) or, on the admin listener, as Bearer; the admin token reads any account; reads on the
 * public listener count under a limit of their own, apart from the key's pushes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { createAdminApp, createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';
import { isReadPath } from '../src/read-side';

const TOKEN = 'admin-token-for-read-side-tests-0123';
const READ_KEY = 'read-key-of-acme-0123456789';
const WRITE_KEY = 'write-key-of-acme-0123456789';
const OTHER_KEY = 'key-of-globex-0123456789';
const CASE_KEY = 'read-key-of-acme-for-case-0123456789';

async function serve(app: Koa): Promise<{ server: Server; url: string }> {
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const basic = (key: string): string => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;

describe('the read side on both listeners', () => {
  let admin: { server: Server; url: string };
  let gateway: { server: Server; url: string };

  beforeAll(async () => {
    const projection = new MemoryProjection();
    const log = new MemoryEventLog();
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    // Pushes: 3 a minute per key; reads: 4 a minute per key, counted apart.
    const keys = new MemoryKeyStore(() => ({ datasets: 100, requests_per_minute: 3 }));
    keys.add(hashApiKey(READ_KEY), 'acme', 'read');
    keys.add(hashApiKey(WRITE_KEY), 'acme', 'write');
    keys.add(hashApiKey(OTHER_KEY), 'globex', 'write');
    keys.add(hashApiKey(CASE_KEY), 'acme', 'read');
    admin = await serve(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined, keys, uiDir: undefined }));
    gateway = await serve(
      createGatewayApp({
        schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => 'inc' } }),
        records: createRecordService({ schemas: projection, log, clock }),
        keys,
        rateLimiter: new SlidingWindowRateLimiter(3, 60_000),
        authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
        log: () => undefined,
        read: { readModel: projection, uiDir: undefined, ratePerMinute: 4 },
      }),
    );
  });
  afterAll(async () => {
    await Promise.all([admin, gateway].map(({ server }) => new Promise((r) => server.close(r))));
  });

  const get = async (base: string, path: string, authorization?: string): Promise<{ status: number; body: any }> => {
    const res = await fetch(`${base}${path}`, authorization === undefined ? {} : { headers: { authorization } });
    return { status: res.status, body: await res.json().catch(() => undefined) };
  };

  it('admin listener: the token reads any account; a key (Basic or Bearer) its own, and nothing but the read routes', async () => {
    await expect(get(admin.url, '/read/v1/session', `Bearer ${TOKEN}`)).resolves.toEqual({ status: 200, body: { account: null, admin: true, scope: null } });
    await expect(get(admin.url, '/read/v1/accounts/globex/datasets', `Bearer ${TOKEN}`)).resolves.toMatchObject({ status: 200 });
    await expect(get(admin.url, '/read/v1/session', basic(READ_KEY))).resolves.toEqual({ status: 200, body: { account: 'acme', admin: false, scope: 'read' } });
    await expect(get(admin.url, '/read/v1/accounts/acme/datasets', `Bearer ${READ_KEY}`)).resolves.toEqual({ status: 200, body: { datasets: [] } });
    await expect(get(admin.url, '/read/v1/accounts/globex/datasets', basic(READ_KEY))).resolves.toMatchObject({ status: 403 });
    // A key opens no admin route, not even its own account's.
    await expect(get(admin.url, '/admin/accounts/acme/datasets', `Bearer ${READ_KEY}`)).resolves.toMatchObject({ status: 401 });
    await expect(get(admin.url, '/read/v1/session', `Bearer not-a-key`)).resolves.toMatchObject({ status: 401 });
  });

  it('public listener: a key reads its own account, whatever its scope; another account is 403', async () => {
    await expect(get(gateway.url, '/read/v1/session', basic(WRITE_KEY))).resolves.toEqual({ status: 200, body: { account: 'acme', admin: false, scope: 'write' } });
    await expect(get(gateway.url, '/read/v1/accounts/acme/datasets', basic(OTHER_KEY))).resolves.toMatchObject({ status: 403 });
    // The admin token is no credential here.
    await expect(get(gateway.url, '/read/v1/session', `Bearer ${TOKEN}`)).resolves.toMatchObject({ status: 401 });
  });

  it('public listener: reads count under their own limit, apart from the same key pushes', async () => {
    const reads = [];
    for (let i = 0; i < 5; i++) reads.push((await get(gateway.url, '/read/v1/accounts/acme/datasets', basic(READ_KEY))).status);
    expect(reads).toEqual([200, 200, 200, 200, 429]);
    // The read key's push allowance is untouched by its reads: the ping answers (a read key may ping).
    await expect(get(gateway.url, '/', basic(READ_KEY))).resolves.toEqual({ status: 200, body: {} });
  });

  it('a read path in any case is a read path, as the router matches it: its own limit, its session', async () => {
    expect(['/read/v1', '/read/v1/session', '/READ/V1/accounts/acme/datasets', '/Read/v1'].map(isReadPath)).toEqual([true, true, true, true]);
    expect(['/read/v10', '/readv1', '/datasets/read/v1', '/'].map(isReadPath)).toEqual([false, false, false, false]);
    const answers = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${gateway.url}/READ/v1/accounts/acme/datasets`, { headers: { authorization: basic(CASE_KEY) } });
      answers.push([res.status, res.headers.get('ratelimit-limit')]);
    }
    // Counted under the read limit (4), not the key's push limit (3).
    expect(answers).toEqual([...Array.from({ length: 4 }, () => [200, '4']), [429, '4']]);
    await expect(get(gateway.url, '/', basic(CASE_KEY))).resolves.toEqual({ status: 200, body: {} });
    // The session route too, on both listeners.
    await expect(get(admin.url, '/READ/v1/Session', basic(CASE_KEY))).resolves.toEqual({ status: 200, body: { account: 'acme', admin: false, scope: 'read' } });
  });
});

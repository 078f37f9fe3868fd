/*
 * The account and key routes of the admin listener over the shared AccountAdmin (createAccountAdmin over a
 * memory account log), with the public gateway resolving keys from the same log: what an operator does
 * with them takes effect at the client's next request.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import {
  AccountLogKeyStore,
  createAccountAdmin,
  createRecordService,
  createSchemaService,
  MemoryAccountLog,
  MemoryEventLog,
  MemoryProjection,
  quotaSourceFromLog,
} from '@pushbase/app';
import { createAdminApp, createGatewayApp, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';
import { eventually } from '../../../test/helpers/eventually';

const TOKEN = 'admin-token-for-account-tests-0123';
const DEFAULTS = { datasets: 100, requests_per_minute: 60 };

async function serve(app: Koa): Promise<{ server: Server; url: string }> {
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface Json {
  [k: string]: unknown;
}

describe('admin account and key routes', () => {
  const projection = new MemoryProjection();
  const events = new MemoryEventLog();
  // Appends wait while `held` is set: how a test keeps a change inside its decision while another arrives.
  let held: Promise<void> | undefined;
  let appending = 0;
  const accountLog = new (class extends MemoryAccountLog {
    override async append(events: Parameters<MemoryAccountLog['append']>[0]): Promise<void> {
      appending += 1;
      if (held !== undefined) await held;
      return super.append(events);
    }
  })();
  let quotaCalls = 0;
  const now = Date.parse('2026-01-02T03:04:05.678Z');
  const clock = { now: () => now };
  let admin: { server: Server; url: string };
  let gateway: { server: Server; url: string };
  let failBeforeDelete = false;

  beforeAll(async () => {
    await events.start(projection.apply);
    let n = 0;
    const schemas = createSchemaService({ log: events, store: projection, clock, ids: { newIncarnation: () => `inc-${n++}` }, quotas: quotaSourceFromLog(accountLog, DEFAULTS) });
    const accounts = createAccountAdmin({
      log: accountLog,
      clock,
      defaults: DEFAULTS,
      datasets: {
        ids: async (account) => (await projection.listDatasets(account)).map((d) => d.id),
        delete: (account, id) => schemas.delete({ account, id }),
      },
      beforeAccountDeleted: () => (failBeforeDelete ? Promise.reject(new Error('crashed half way')) : Promise.resolve()),
    });
    const counted = { ...accounts, setQuotas: (...args: Parameters<typeof accounts.setQuotas>) => ((quotaCalls += 1), accounts.setQuotas(...args)) };
    admin = await serve(createAdminApp({ readModel: projection, token: TOKEN, log: () => undefined, accounts: counted, configuredAccounts: new Set(['pinned']) }));
    gateway = await serve(
      createGatewayApp({
        schemas,
        records: createRecordService({ schemas: projection, log: events, clock }),
        keys: new AccountLogKeyStore(accountLog, DEFAULTS),
        rateLimiter: new SlidingWindowRateLimiter(60, 60_000),
        authFailureLimiter: memoryRateLimiter(1000, 60, `af-${Math.random()}`),
        log: () => undefined,
      }),
    );
  });
  afterAll(async () => {
    await Promise.all([admin, gateway].map(({ server }) => new Promise((r) => server.close(r))));
  });

  const adminCall = async (method: string, path: string, body?: unknown, token = TOKEN) => {
    const res = await fetch(`${admin.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text === '' ? undefined : JSON.parse(text)) as Json };
  };
  const push = (key: string, method: string, path: string, body?: unknown) =>
    fetch(`${gateway.url}${path}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const definition = { fields: { n: { type: 'number', name: 'N' } } };

  it('needs the admin token', async () => {
    for (const [method, path] of [
      ['GET', '/admin/accounts'],
      ['POST', '/admin/accounts'],
      ['POST', '/admin/accounts/acme/keys'],
      ['DELETE', '/admin/accounts/acme'],
    ] as const) {
      const res = await adminCall(method, path, undefined, 'wrong-token');
      expect([method, path, res.status]).toEqual([method, path, 401]);
    }
  });

  it('creates, shows, lists and changes an account', async () => {
    const created = await adminCall('POST', '/admin/accounts', { account: 'acme' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      account: 'acme',
      created_at: '2026-01-02T03:04:05.678Z',
      quotas: { datasets: null, requests_per_minute: null },
      effective_quotas: { datasets: 100, requests_per_minute: 60 },
      key_count: 0,
    });
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect((await adminCall('POST', '/admin/accounts', { account: 'acme' })).status).toBe(409);
    expect((await adminCall('POST', '/admin/accounts', { account: 'globex', quotas: { datasets: 5 } })).body).toMatchObject({ effective_quotas: { datasets: 5, requests_per_minute: 60 } });
    expect((await adminCall('GET', '/admin/accounts')).body.accounts).toEqual([expect.objectContaining({ account: 'acme' }), expect.objectContaining({ account: 'globex' })]);
    expect((await adminCall('GET', '/admin/accounts/globex')).body).toMatchObject({ quotas: { datasets: 5, requests_per_minute: null } });
    // PATCH changes only what it names; null restores the default.
    expect((await adminCall('PATCH', '/admin/accounts/globex', { quotas: { requests_per_minute: 7 } })).body).toMatchObject({ quotas: { datasets: 5, requests_per_minute: 7 } });
    expect((await adminCall('PATCH', '/admin/accounts/globex', { quotas: { datasets: null } })).body).toMatchObject({ quotas: { datasets: null, requests_per_minute: 7 }, effective_quotas: { datasets: 100, requests_per_minute: 7 } });
    expect((await adminCall('GET', '/admin/accounts/nobody')).status).toBe(404);
    expect((await adminCall('PATCH', '/admin/accounts/nobody', { quotas: {} })).status).toBe(404);
  });

  it.each([
    ['POST', '/admin/accounts', { account: 'has space' }, 'account'],
    ['POST', '/admin/accounts', { account: 'x', quotas: { datasets: 0 } }, 'quotas.datasets'],
    ['POST', '/admin/accounts', { account: 'x', quotas: { pages: 3 } }, 'quotas.pages'],
    ['POST', '/admin/accounts', { account: 'x', quota: {} }, 'quota'],
    ['POST', '/admin/accounts', '[1]', undefined],
    ['POST', '/admin/accounts', '{', undefined],
    ['PATCH', '/admin/accounts/acme', {}, 'quotas'],
    ['POST', '/admin/accounts/acme/keys', { scope: 'admin' }, 'scope'],
    ['POST', '/admin/accounts/acme/keys', { label: 'a\nb' }, 'label'],
  ])('refuses %s %s %j with 400 JSON', async (method, path, body, where) => {
    const res = await adminCall(method, path, body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { code: 'invalid' } });
    if (where !== undefined) expect((res.body.error as Json).path).toBe(where);
  });

  it('merges two concurrent PATCHes of different quotas inside the decision: both hold', async () => {
    expect((await adminCall('POST', '/admin/accounts', { account: 'racy', quotas: { datasets: 4, requests_per_minute: 40 } })).status).toBe(201);
    let release!: () => void;
    held = new Promise<void>((r) => (release = r));
    const [calls, appends] = [quotaCalls, appending];
    const first = adminCall('PATCH', '/admin/accounts/racy', { quotas: { datasets: 7 } });
    // The first change is inside its decision (appending) when the second one is asked for.
    await eventually(() => appending === appends + 1);
    const second = adminCall('PATCH', '/admin/accounts/racy', { quotas: { requests_per_minute: 9 } });
    await eventually(() => quotaCalls === calls + 2);
    release();
    held = undefined;
    expect((await first).status).toBe(200);
    expect((await second).body).toMatchObject({ quotas: { datasets: 7, requests_per_minute: 9 } });
    expect((await adminCall('GET', '/admin/accounts/racy')).body).toMatchObject({ quotas: { datasets: 7, requests_per_minute: 9 } });
  });

  it('refuses to delete an account that PUSHBASE_API_KEYS names (its configured key would outlive the deletion): 409, nothing deleted', async () => {
    expect((await adminCall('POST', '/admin/accounts', { account: 'pinned' })).status).toBe(201);
    const refused = await adminCall('DELETE', '/admin/accounts/pinned');
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: { code: 'account_has_configured_key' } });
    expect((refused.body as { error: { message: string } }).error.message).toMatch(/PUSHBASE_API_KEYS/);
    expect((await adminCall('GET', '/admin/accounts/pinned')).status).toBe(200);
  });

  it('creates a key shown once, lists keys without key or hash, and revokes one from the next request', async () => {
    const made = await adminCall('POST', '/admin/accounts/acme/keys', { label: 'ci' });
    expect(made.status).toBe(201);
    expect(made.headers.get('cache-control')).toBe('no-store');
    expect(made.body).toMatchObject({ account: 'acme', scope: 'write', label: 'ci', created_at: '2026-01-02T03:04:05.678Z' });
    const key = made.body.key as string;
    const keyId = made.body.key_id as string;
    expect(key).toMatch(/^pb_[A-Za-z0-9_-]{43}$/);
    expect(keyId).toMatch(/^kid_[0-9a-f]{16}$/);
    expect((await push(key, 'PUT', '/datasets/sales', definition)).status).toBe(201);

    const listed = await adminCall('GET', '/admin/accounts/acme/keys');
    expect(listed.body.keys).toEqual([{ key_id: keyId, account: 'acme', scope: 'write', label: 'ci', created_at: '2026-01-02T03:04:05.678Z' }]);
    expect(JSON.stringify(listed.body)).not.toContain(key);
    expect(JSON.stringify(accountLog.events)).not.toContain(key);
    expect((await adminCall('GET', '/admin/accounts/acme')).body.key_count).toBe(1);

    expect((await adminCall('DELETE', `/admin/accounts/acme/keys/${keyId}`)).status).toBe(204);
    expect((await push(key, 'GET', '/')).status).toBe(401);
    expect((await adminCall('DELETE', `/admin/accounts/acme/keys/${keyId}`)).status).toBe(404);
    expect((await adminCall('GET', '/admin/accounts/acme/keys')).body.keys).toEqual([]);
    expect((await adminCall('POST', '/admin/accounts/nobody/keys', {})).status).toBe(404);
  });

  it('makes read keys that the public write routes refuse', async () => {
    const made = await adminCall('POST', '/admin/accounts/acme/keys', { scope: 'read' });
    expect(made.body.scope).toBe('read');
    const key = made.body.key as string;
    expect((await push(key, 'GET', '/')).status).toBe(200);
    expect((await push(key, 'PUT', '/datasets/other', definition)).status).toBe(403);
  });

  it('applies quota changes from the next request', async () => {
    await adminCall('POST', '/admin/accounts', { account: 'tight', quotas: { datasets: 2, requests_per_minute: 3 } });
    const key = (await adminCall('POST', '/admin/accounts/tight/keys', {})).body.key as string;
    expect((await push(key, 'PUT', '/datasets/a', definition)).status).toBe(201);
    expect((await push(key, 'PUT', '/datasets/b', definition)).status).toBe(201);
    const third = await push(key, 'PUT', '/datasets/c', definition);
    expect(third.status).toBe(400);
    expect(((await third.json()) as { error: { message: string } }).error.message).toContain('limit of 2 datasets');
    expect((await push(key, 'GET', '/')).status).toBe(429);
    await adminCall('PATCH', '/admin/accounts/tight', { quotas: { requests_per_minute: 10, datasets: 3 } });
    expect((await push(key, 'PUT', '/datasets/c', definition)).status).toBe(201);
  });

  it('deletes an account: its datasets through the schema service, then its keys; a half-done delete is finished by a retry', async () => {
    await adminCall('POST', '/admin/accounts', { account: 'leaving' });
    const key = (await adminCall('POST', '/admin/accounts/leaving/keys', {})).body.key as string;
    for (const id of ['one', 'two', 'three']) expect((await push(key, 'PUT', `/datasets/${id}`, definition)).status).toBe(201);
    expect((await push(key, 'POST', '/datasets/one/data', { data: [{ n: 1 }] })).status).toBe(200);

    failBeforeDelete = true;
    expect((await adminCall('DELETE', '/admin/accounts/leaving')).status).toBe(500);
    failBeforeDelete = false;
    // Half done: the datasets are gone (as events), the account and its key are still there.
    expect((await adminCall('GET', '/admin/accounts/leaving/datasets')).body).toEqual({ datasets: [] });
    expect(events.events.filter((e) => e.account === 'leaving' && e.type === 'DatasetDeleted')).toHaveLength(3);
    expect((await push(key, 'GET', '/')).status).toBe(200);
    expect((await push(key, 'PUT', '/datasets/four', definition)).status).toBe(201);

    const done = await adminCall('DELETE', '/admin/accounts/leaving');
    expect(done).toMatchObject({ status: 200, body: { datasets_deleted: 1 } });
    expect((await adminCall('GET', '/admin/accounts/leaving')).status).toBe(404);
    expect((await adminCall('GET', '/admin/accounts/leaving/datasets')).body).toEqual({ datasets: [] });
    expect((await push(key, 'GET', '/')).status).toBe(401);
    expect((await adminCall('DELETE', '/admin/accounts/leaving')).status).toBe(404);
    // The name is free again, with nothing of the old account.
    expect((await adminCall('POST', '/admin/accounts', { account: 'leaving' })).body).toMatchObject({ key_count: 0 });
  });
});

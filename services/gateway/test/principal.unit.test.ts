/*
 * What a key's principal decides in the gateway (docs/operations.md → Accounts and API keys): its scope (a read key writes nothing),
 * its account's requests_per_minute quota (counted per key) and its account's dataset quota (via the schema
 * service's QuotaSource), each read at every request, so a change applies from the next one.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import type { QuotaLimits } from '@pushbase/domain';
import { createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

describe('the principal of a key', () => {
  const log = new MemoryEventLog();
  const projection = new MemoryProjection();
  const quotas = new Map<string, QuotaLimits>();
  const quotasOf = (account: string): QuotaLimits => quotas.get(account) ?? { datasets: 100, requests_per_minute: 1000 };
  const keys = new MemoryKeyStore(quotasOf);
  keys.add(hashApiKey('writer-key'), 'acme');
  keys.add(hashApiKey('reader-key'), 'acme', 'read');
  keys.add(hashApiKey('limited-one'), 'limited');
  keys.add(hashApiKey('limited-two'), 'limited');
  keys.add(hashApiKey('few-key'), 'few');
  let server: Server;
  let base: string;
  // A write route the app does not have yet, added after it as a later version might: what it did.
  const futureWrites: string[] = [];

  beforeAll(async () => {
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    let n = 0;
    const app = createGatewayApp({
      schemas: createSchemaService({
        log,
        store: projection,
        clock,
        ids: { newIncarnation: () => `inc-${n++}` },
        quotas: { datasetLimit: (account) => Promise.resolve(quotasOf(account).datasets) },
      }),
      records: createRecordService({ schemas: projection, log, clock }),
      keys,
      rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
      authFailureLimiter: memoryRateLimiter(100, 60, `af-${Math.random()}`),
      log: () => undefined,
    });
    // Runs inside the app's last middleware (its 404), so after authentication, as the router's routes do.
    app.use(async (ctx, next) => {
      if (ctx.method === 'PATCH' && /^\/datasets\/[^/]+\/archive$/.test(ctx.path)) {
        futureWrites.push(ctx.path);
        ctx.body = {};
        return;
      }
      await next();
    });
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  const call = (key: string, method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const definition = { fields: { n: { type: 'number', name: 'N' } } };

  it('lets a read key ping and refuses it every write route with 403 JSON, changing nothing', async () => {
    expect((await call('writer-key', 'PUT', '/datasets/shared', definition)).status).toBe(201);
    expect((await call('reader-key', 'GET', '/')).status).toBe(200);
    const before = log.events.length;
    for (const [method, path, body] of [
      ['PUT', '/datasets/other', definition],
      ['PUT', '/datasets/shared', definition],
      ['DELETE', '/datasets/shared', undefined],
      ['POST', '/datasets/shared/data', { data: [{ n: 1 }] }],
      ['PUT', '/datasets/shared/data', { data: [{ n: 2 }] }],
    ] as const) {
      const res = await call('reader-key', method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 403]);
      const answer = (await res.json()) as { error: { message: string; code: string } };
      expect(answer.error).toMatchObject({ code: 'read_only_key' });
      expect(answer.error.message).toMatch(/read-only/);
    }
    expect(log.events.length).toBe(before);
    expect((await call('writer-key', 'POST', '/datasets/shared/data', { data: [{ n: 1 }] })).status).toBe(200);
  });

  it('refuses a read key any method but GET and HEAD on any path, a write route added later included', async () => {
    // The future write route works for a write key.
    expect((await call('writer-key', 'PATCH', '/datasets/shared/archive', {})).status).toBe(200);
    expect(futureWrites).toEqual(['/datasets/shared/archive']);
    for (const [method, path] of [
      ['PATCH', '/datasets/shared/archive'],
      ['PATCH', '/datasets/shared'],
      ['POST', '/datasets/shared'],
      ['POST', '/no/such/route'],
      ['OPTIONS', '/datasets/shared'],
    ] as const) {
      const res = await call('reader-key', method, path);
      expect([method, path, res.status]).toEqual([method, path, 403]);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('read_only_key');
    }
    expect(futureWrites).toEqual(['/datasets/shared/archive']);
    // Reads still go through for it: a missing route is still a 404.
    expect((await call('reader-key', 'HEAD', '/')).status).toBe(200);
    expect((await call('reader-key', 'GET', '/no/such/route')).status).toBe(404);
  });

  it('limits each key of an account to the account\'s requests_per_minute, read at every request', async () => {
    quotas.set('limited', { datasets: 100, requests_per_minute: 3 });
    for (let i = 0; i < 3; i++) {
      const ok = await call('limited-one', 'GET', '/');
      expect(ok.status).toBe(200);
      expect(ok.headers.get('ratelimit-limit')).toBe('3');
    }
    const refused = await call('limited-one', 'GET', '/');
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('rate limit of 3 requests per minute');
    // Per key (SPEC): the account's other key has its own count.
    expect((await call('limited-two', 'GET', '/')).status).toBe(200);
    // Raised: the next request of the refused key goes through.
    quotas.set('limited', { datasets: 100, requests_per_minute: 5 });
    const again = await call('limited-one', 'GET', '/');
    expect(again.status).toBe(200);
    expect(again.headers.get('ratelimit-limit')).toBe('5');
  });

  it('refuses the dataset over the account\'s own limit with 400 naming that limit', async () => {
    quotas.set('few', { datasets: 2, requests_per_minute: 1000 });
    expect((await call('few-key', 'PUT', '/datasets/a', definition)).status).toBe(201);
    expect((await call('few-key', 'PUT', '/datasets/b', definition)).status).toBe(201);
    const third = await call('few-key', 'PUT', '/datasets/c', definition);
    expect(third.status).toBe(400);
    expect(((await third.json()) as { error: { message: string } }).error.message).toContain('limit of 2 datasets');
    // An existing dataset is still found at the limit.
    expect((await call('few-key', 'PUT', '/datasets/a', definition)).status).toBe(200);
    quotas.set('few', { datasets: 3, requests_per_minute: 1000 });
    expect((await call('few-key', 'PUT', '/datasets/c', definition)).status).toBe(201);
  });
});

/*
 * How the gateway reads a write's body (uploads.ts): a deadline, a budget of bytes in flight per key and
 * per process, form media types refused, and a 401 that no browser answers with a login prompt.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import { BODY_LIMIT_BYTES, createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter, UploadBudget, type UploadLimits } from '../src';

const KEYS = { a: 'key-a-0123456789abcdefghij', a2: 'key-a2-0123456789abcdefghij', b: 'key-b-0123456789abcdefghij', c: 'key-c-0123456789abcdefghij' };
const basic = (key: string): string => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function gateway(uploads: UploadLimits) {
  const log = new MemoryEventLog();
  const projection = new MemoryProjection();
  await log.start(projection.apply);
  const keys = new MemoryKeyStore();
  keys.add(hashApiKey(KEYS.a), 'acme');
  keys.add(hashApiKey(KEYS.a2), 'acme');
  keys.add(hashApiKey(KEYS.b), 'globex');
  keys.add(hashApiKey(KEYS.c), 'initech');
  const clock = { now: () => 1_700_000_000_000 };
  let n = 0;
  const app = createGatewayApp({
    schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => `inc-${n++}` } }),
    records: createRecordService({ schemas: projection, log, clock }),
    keys,
    rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
    authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
    log: () => undefined,
    uploads,
  });
  const handle = app.callback();
  const server: Server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;

  /** A request whose body is sent in `parts` (each after `gapMs`), or held open after them when `hold`. */
  const send = (method: string, path: string, opts: { key?: string; headers?: Record<string, string>; parts?: string[]; gapMs?: number; hold?: boolean } = {}): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method, path, headers: { ...(opts.key === undefined ? {} : { authorization: basic(opts.key) }), ...opts.headers } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      const parts = [...(opts.parts ?? [])];
      const next = (): void => {
        const part = parts.shift();
        if (part === undefined) {
          if (opts.hold !== true) req.end();
          return;
        }
        req.write(part);
        setTimeout(next, opts.gapMs ?? 0);
      };
      next();
    });
  const create = async (): Promise<void> => {
    const body = JSON.stringify({ fields: { n: { type: 'number', name: 'N' } } });
    expect((await send('PUT', '/datasets/d', { key: KEYS.a, parts: [body] })).status).toBeLessThan(300);
  };
  return { send, create, projection, close: () => new Promise((r) => server.close(r)) };
}

const LIMITS: UploadLimits = { bodyTimeoutMs: 400, bytesPerAccount: 2 * BODY_LIMIT_BYTES, bytesPerProcess: 3 * BODY_LIMIT_BYTES };
let g: Awaited<ReturnType<typeof gateway>>;
beforeAll(async () => {
  g = await gateway(LIMITS);
  await g.create();
});
afterAll(async () => {
  await g.close();
});

describe('the body of a write', () => {
  it('is abandoned with 408 JSON when it does not arrive within the deadline, and nothing is written', async () => {
    const res = await g.send('POST', '/datasets/d/data', { key: KEYS.a, headers: { 'content-length': '100' }, parts: ['{"data":[{"n":1}'], hold: true });
    expect(res.status).toBe(408);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'body_timeout', message: expect.stringContaining('0.4 s') } });
    expect(res.headers.connection).toBe('close');
    await expect(g.projection.listRecords('acme', 'd')).resolves.toEqual([]);
  });

  it('is refused with 415 when its type is one a cross-site form can send; no type, or JSON, is read as JSON', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'TEXT/PLAIN;charset=utf-8']) {
      const res = await g.send('POST', '/datasets/d/data', { key: KEYS.a, headers: { 'content-type': type }, parts: ['{"data":[{"n":1}]}'] });
      expect({ type, status: res.status }).toEqual({ type, status: 415 });
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'unsupported_media_type' } });
    }
    const put = await g.send('PUT', '/datasets/e', { key: KEYS.a, headers: { 'content-type': 'text/plain' }, parts: ['{"fields":{"n":{"type":"number","name":"N"}}}'] });
    expect(put.status).toBe(415);
    await expect(g.projection.listRecords('acme', 'd')).resolves.toEqual([]);
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.a, parts: ['{"data":[{"n":1}]}'] })).status).toBe(200);
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.a, headers: { 'content-type': 'application/json; charset=utf-8' }, parts: ['{"data":[{"n":2}]}'] })).status).toBe(200);
    expect(await g.projection.listRecords('acme', 'd')).toHaveLength(2);
  });

  it('is refused with 429 while the account has its budget in flight, and 503 once the process has; others go on', async () => {
    // Each account may have two bodies' worth in flight, the process three.
    const slow = (key: string) => g.send('POST', '/datasets/d/data', { key, headers: { 'content-length': String(BODY_LIMIT_BYTES) }, parts: ['{"data":['], hold: true });
    const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 50));
    const held = [slow(KEYS.a), slow(KEYS.a2)];
    await settle();
    // Another key of the same account shares its budget: many keys do not make a tenant more shares.
    const sameAccount = await g.send('POST', '/datasets/d/data', { key: KEYS.a, parts: ['{"data":[]}'] });
    expect(sameAccount.status).toBe(429);
    expect(JSON.parse(sameAccount.body)).toMatchObject({ error: { code: 'uploads_in_flight' } });
    expect(sameAccount.headers['retry-after']).toBe('1');
    held.push(slow(KEYS.b));
    await settle();
    // The process is full: globex's second body is refused, but an account's first body never is.
    const full = await g.send('POST', '/datasets/d/data', { key: KEYS.b, parts: ['{"data":[]}'] });
    expect(full.status).toBe(503);
    expect(JSON.parse(full.body)).toMatchObject({ error: { code: 'server_busy' } });
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.c, parts: ['{"data":[]}'] })).status).toBe(404);
    // The deadline ends the slow ones and frees the budget.
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([408, 408, 408]);
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.b, parts: ['{"data":[]}'] })).status).toBe(404);
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.a, parts: ['{"data":[]}'] })).status).toBe(200);
  });

  it('takes a definition of at most 64 KiB (a maximal one is about 17 KB); records still up to 4 MiB', async () => {
    const big = JSON.stringify({ fields: { n: { type: 'number', name: 'N' } }, pad: 'x'.repeat(70_000) });
    const res = await g.send('PUT', '/datasets/big', { key: KEYS.a, parts: [big] });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'body_too_large', message: 'The request body is larger than the limit of 64 KiB' } });
    const ok = await g.send('PUT', '/datasets/big', { key: KEYS.a, parts: [JSON.stringify({ fields: { n: { type: 'number', name: 'N' } }, pad: 'x'.repeat(60_000) })] });
    expect(ok.status).toBe(201);
    expect((await g.send('POST', '/datasets/big/data', { key: KEYS.a, parts: [JSON.stringify({ data: [{ n: 1 }], pad: 'x'.repeat(200_000) })] })).status).toBe(200);
  });

  it('refuses a write from a web page, whatever its body type; a script or server sends no Origin', async () => {
    for (const headers of [{ origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'null' }]) {
      const res = await g.send('POST', '/datasets/d/data', { key: KEYS.a, headers: { ...headers, 'content-type': 'application/json' }, parts: ['{"data":[{"n":9}]}'] });
      expect({ headers, status: res.status }).toEqual({ headers, status: 403 });
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'browser_write' } });
    }
    expect((await g.send('DELETE', '/datasets/d', { key: KEYS.a, headers: { origin: 'https://evil.example' } })).status).toBe(403);
    // Reads from a page are fine (pushbase's own page reads), and so is a fetch from Node (sec-fetch-mode only).
    expect((await g.send('GET', '/', { key: KEYS.a, headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' } })).status).toBe(200);
    expect((await g.send('POST', '/datasets/d/data', { key: KEYS.a, headers: { 'sec-fetch-mode': 'cors', 'content-type': 'application/json' }, parts: ['{"data":[]}'] })).status).toBe(200);
    expect(await g.projection.listRecords('acme', 'd')).not.toContainEqual(expect.objectContaining({ n: 9 }));
  });
});

it('answers 401 without a Basic challenge, so a browser never prompts for a key and keeps it', async () => {
  for (const key of [undefined, 'no-such-key-0123456789']) {
    const res = await g.send('GET', '/', key === undefined ? {} : { key });
    expect(res.status).toBe(401);
    expect(String(res.headers['www-authenticate'])).not.toMatch(/^\s*basic\b/i);
    expect(res.headers['www-authenticate']).toMatch(/^APIKey realm="pushbase"/);
  }
});

describe('UploadBudget', () => {
  it('reserves per account and per process (but never refuses an account its first body), and a release is counted once', () => {
    const b = new UploadBudget({ bodyTimeoutMs: 1, bytesPerAccount: 10, bytesPerProcess: 15 });
    const r1 = b.reserve('a', 8);
    expect(typeof r1).toBe('function');
    expect(b.reserve('a', 3)).toBe('account');
    const r2 = b.reserve('b', 7);
    expect(b.reserve('b', 1)).toBe('process');
    // An account's first body is let in even so: other tenants cannot lock it out of the process.
    const r3 = b.reserve('c', 1);
    expect(typeof r3).toBe('function');
    (r3 as () => void)();
    (r1 as () => void)();
    (r1 as () => void)();
    expect(b.inFlight).toBe(7);
    expect(typeof b.reserve('a', 8)).toBe('function');
    (r2 as () => void)();
  });
});

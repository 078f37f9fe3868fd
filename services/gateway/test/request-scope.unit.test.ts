/*
 * The gateway runs each request inside the RequestScope it is given, so the adapters behind its ports
 * (the gRPC clients) see the request id the API client sees in X-Request-Id, without the ports taking it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RequestScope, type RecordService, type SchemaService } from '@pushbase/contracts';
import { createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

describe('gateway request scope', () => {
  const scope = new RequestScope();
  const seen: (string | undefined)[] = [];
  const records: RecordService = {
    append: () => {
      seen.push(scope.current()?.requestId);
      return Promise.resolve({ replayed: false });
    },
    replace: () => Promise.resolve({ replayed: false }),
  };
  const schemas: SchemaService = {
    findOrCreate: () => Promise.reject(new Error('not used')),
    get: () => Promise.reject(new Error('not used')),
    delete: () => Promise.resolve({ replayed: false }),
  };
  let server: Server;
  let base: string;

  beforeAll(async () => {
    const keys = new MemoryKeyStore();
    keys.add(hashApiKey('k'), 'acme');
    const app = createGatewayApp({
      schemas,
      records,
      keys,
      rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
      authFailureLimiter: memoryRateLimiter(100, 60, `af-${Math.random()}`),
      requestScope: scope,
      log: () => undefined,
    });
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  const append = (headers: Record<string, string> = {}) =>
    fetch(`${base}/datasets/sales/data`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('k:').toString('base64')}`, 'content-type': 'application/json', ...headers },
      body: '{"data":[]}',
    });

  it('hands the ports the request id the client sent', async () => {
    const res = await append({ 'x-request-id': 'client-id.42' });
    expect(res.status).toBe(200);
    expect(seen.at(-1)).toBe('client-id.42');
  });

  it('hands the ports the request id it made, the one it answers with', async () => {
    const res = await append();
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.at(-1)).toBe(res.headers.get('x-request-id'));
  });

  it('leaves nothing in scope outside a request', () => {
    expect(scope.current()).toBeUndefined();
  });
});

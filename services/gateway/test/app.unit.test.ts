/*
 * The gateway with in-process fakes behind it, for the failures the end-to-end suites cannot provoke from
 * outside: a dependency that is down (503, nothing half-written) and an unexpected error (500 with a
 * request id and no stack trace).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import type { DatasetEvent } from '@pushbase/domain';
import { DomainError } from '@pushbase/domain';
import { createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

class FlakyLog extends MemoryEventLog {
  mode: 'ok' | 'down' | 'unknown' | 'bug' = 'ok';
  override append(events: readonly DatasetEvent[]): Promise<void> {
    // Outages in an adapter's own words: internal addresses, a file path and a connection URL's password.
    if (this.mode === 'down') return Promise.reject(new DomainError('unavailable', 'ClickHouse at http://pb:s3cret@10.0.0.7:8123/ cannot be reached: connect ECONNREFUSED 10.0.0.7:8123'));
    if (this.mode === 'unknown') return Promise.reject(new DomainError('outcome_unknown', 'fsync of /srv/pushbase/data/log/00000001.seg failed: EIO'));
    if (this.mode === 'bug') return Promise.reject(new TypeError('secret internals at /srv/pushbase/x.ts:12'));
    return super.append(events);
  }
}

describe('gateway failure mapping', () => {
  const log = new FlakyLog();
  const projection = new MemoryProjection();
  const keys = new MemoryKeyStore();
  keys.add(hashApiKey('k'), 'acme');
  const lines: string[] = [];
  let server: Server;
  let base: string;

  beforeAll(async () => {
    await log.start(projection.apply);
    const clock = { now: () => 1_700_000_000_000 };
    let n = 0;
    const app = createGatewayApp({
      schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => `inc-${n++}` } }),
      records: createRecordService({ schemas: projection, log, clock }),
      keys,
      rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
      authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
      log: (line) => lines.push(line),
    });
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Basic ${Buffer.from('k:').toString('base64')}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const definition = { fields: { n: { type: 'number', name: 'N' } } };

  it('answers 503 with a JSON error when the event log is down, and stores nothing', async () => {
    log.mode = 'ok';
    expect((await call('PUT', '/datasets/d1', definition)).status).toBe(201);
    log.mode = 'down';
    for (const [method, path, body] of [
      ['POST', '/datasets/d1/data', { data: [{ n: 1 }] }],
      ['PUT', '/datasets/d1/data', { data: [{ n: 2 }] }],
      ['PUT', '/datasets/d2', definition],
      ['DELETE', '/datasets/d1', undefined],
    ] as const) {
      const res = await call(method, path, body);
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.headers.get('x-request-id')).toBeTruthy();
      const requestId = res.headers.get('x-request-id')!;
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({
        error: { message: `The service cannot take this request now; nothing was changed. Try again in a moment (request id ${requestId})`, code: 'unavailable', request_id: requestId },
      });
      expect(text).not.toMatch(/s3cret|10\.0\.0\.7|8123|ECONN/);
      const logged = lines.find((l) => l.includes(requestId));
      expect(logged).toContain('http://***@10.0.0.7:8123/ cannot be reached');
      expect(logged).not.toContain('s3cret');
    }
    log.mode = 'ok';
    await expect(projection.listRecords('acme', 'd1')).resolves.toEqual([]);
    await expect(projection.get('acme', 'd2')).resolves.toBeUndefined();
    expect(log.events.map((e) => e.type)).toEqual(['DatasetDefined']);
  });

  it('answers 500 outcome_unknown with a fixed message and no file path; the log has the detail', async () => {
    log.mode = 'unknown';
    const res = await call('POST', '/datasets/d1/data', { data: [{ n: 1 }] });
    log.mode = 'ok';
    expect(res.status).toBe(500);
    const requestId = res.headers.get('x-request-id')!;
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ error: { code: 'outcome_unknown', request_id: requestId } });
    expect(text).toContain('may or may not have been applied');
    expect(text).not.toMatch(/srv|\.seg|EIO/);
    expect(lines.some((l) => l.includes(requestId) && l.includes('/srv/pushbase/data/log/00000001.seg'))).toBe(true);
  });

  it('answers 500 with the request id and no internals for an unexpected error, and logs it', async () => {
    log.mode = 'bug';
    const res = await call('POST', '/datasets/d1/data', { data: [{ n: 1 }] });
    log.mode = 'ok';
    expect(res.status).toBe(500);
    const requestId = res.headers.get('x-request-id');
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { message: `Internal error; quote request id ${requestId} when reporting it`, code: 'internal', request_id: requestId } });
    expect(text).not.toMatch(/secret|TypeError|\.ts/);
    expect(lines.some((l) => l.includes(requestId!) && l.includes('TypeError'))).toBe(true);
  });
});

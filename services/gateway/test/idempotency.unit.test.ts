/*
 * The Idempotency-Key rules at the public API, with the embedded services and ledger behind the gateway:
 * the header's syntax, the fingerprint, replays (status, body, Idempotent-Replayed, the metric), the 422
 * of a reused key, the 409 of a key in flight, failures that leave the key free, expiry and per-account
 * scope. The durability across kill -9, snapshots and distributed mode is the end-to-end suites' part.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hoursToMs } from '@pushbase/config';
import { createRecordService, createSchemaService, keyedWrites, MemoryEventLog, MemoryIdempotencyLedger, MemoryProjection } from '@pushbase/app';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import { createMetricsRegistry, httpMetrics } from '@pushbase/metrics';
import { createGatewayApp, defaultQuotasOf, hashApiKey, MemoryKeyStore, memoryRateLimiter, parseIdempotencyKey, requestFingerprint, SlidingWindowRateLimiter } from '../src';
import { sample } from '../../../test/helpers/metrics';
import { isObject, loadOpenApiDocument, resolvePointer, validateResponse } from '../../../test/helpers/openapi';

class ControlledLog extends MemoryEventLog {
  mode: 'ok' | 'down' | 'unknown' | 'stored-then-unknown' = 'ok';
  /** When set, appends wait for it. */
  hold: Promise<void> | undefined;
  override async append(events: readonly DatasetEvent[]): Promise<void> {
    if (this.hold !== undefined) await this.hold;
    if (this.mode === 'down') throw new DomainError('unavailable', 'the log is down');
    if (this.mode === 'unknown') throw new DomainError('outcome_unknown', 'the log did not confirm');
    await super.append(events);
    // Stored (the listener saw it), and yet the answer was lost: the retry must find it applied.
    if (this.mode === 'stored-then-unknown') throw new DomainError('outcome_unknown', 'the log did not confirm');
  }
}

const TTL_HOURS = 1;
const definition = { fields: { n: { type: 'number', name: 'N' } } };

describe('Idempotency-Key at the public API', () => {
  const log = new ControlledLog();
  const projection = new MemoryProjection();
  let now = 1_700_000_000_000;
  const clock = { now: () => now };
  const ledger = new MemoryIdempotencyLedger(hoursToMs(TTL_HOURS), clock);
  const keys = new MemoryKeyStore(defaultQuotasOf({ datasets: 1000, requests_per_minute: 100_000 }));
  keys.add(hashApiKey('k-acme'), 'acme');
  keys.add(hashApiKey('k-globex'), 'globex');
  const registry = createMetricsRegistry({ processMetrics: false });
  let server: Server;
  let base: string;
  let n = 0;

  beforeAll(async () => {
    await log.start((events) => {
      projection.apply(events);
      ledger.apply(events);
    });
    const inner = {
      schemas: createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => `inc-${n++}` } }),
      records: createRecordService({ schemas: projection, log, clock }),
    };
    const { schemas, records } = keyedWrites(inner, ledger);
    const app = createGatewayApp({
      schemas,
      records,
      keys,
      rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
      authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
      metrics: httpMetrics(registry),
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
  afterEach(() => {
    log.mode = 'ok';
    log.hold = undefined;
  });

  const call = async (method: string, path: string, opts: { body?: unknown; key?: string | string[]; account?: 'acme' | 'globex' } = {}) => {
    const headers = new Headers({ authorization: `Basic ${Buffer.from(`k-${opts.account ?? 'acme'}:`).toString('base64')}`, 'content-type': 'application/json' });
    for (const k of typeof opts.key === 'string' ? [opts.key] : (opts.key ?? [])) headers.append('idempotency-key', k);
    const res = await fetch(`${base}${path}`, { method, headers, ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }) });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };
  const rows = async (account: string, id: string): Promise<number> => (await projection.listRecords(account, id))?.length ?? -1;
  const eventsWithKey = (key: string): DatasetEvent[] => log.events.filter((e) => e.idempotency?.key === key);
  const uniqueId = (prefix: string): string => `${prefix}-${n++}`;

  async function dataset(account: 'acme' | 'globex' = 'acme'): Promise<string> {
    const id = uniqueId('ds');
    expect((await call('PUT', `/datasets/${id}`, { body: definition, account })).status).toBe(201);
    return id;
  }

  describe('the header', () => {
    it.each([
      ['a bare key', 'bare-17', 'bare-17'],
      ['a quoted key (the draft’s Structured Field String)', '"quoted-17"', 'quoted-17'],
      ['a quoted key with escapes', '"a\\"b\\\\c"', 'a"b\\c'],
      ['a key with inner spaces', 'two words', 'two words'],
      ['255 characters', 'x'.repeat(255), 'x'.repeat(255)],
    ])('accepts %s and stores the key inside the event', async (_, sent, stored) => {
      const id = await dataset();
      const res = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: sent });
      expect(res.status).toBe(200);
      expect(log.events.at(-1)?.idempotency?.key).toBe(stored);
    });

    it.each([
      ['empty inside quotes', '""'],
      ['256 characters', 'x'.repeat(256)],
      ['a non-ASCII character', 'clé'],
      ['an unterminated quoted key', '"abc'],
      ['an unescaped quote inside', '"a"b"'],
      ['a bad escape', '"a\\nb"'],
      ['a control character', 'a\tb'],
    ])('refuses %s with a 400 naming the header, before anything is written', async (_, sent) => {
      const id = await dataset();
      const before = log.events.length;
      const res = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: Buffer.from(sent, 'utf8').toString('latin1') });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_idempotency_key', message: expect.stringContaining('Idempotency-Key') });
      expect(log.events.length).toBe(before);
    });

    it('refuses the header sent twice', async () => {
      const id = await dataset();
      // fetch would join the two into one line; node:http sends an array as two.
      const { status, body } = await new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = httpRequest(`${base}/datasets/${id}/data`, {
          method: 'POST',
          headers: { authorization: `Basic ${Buffer.from('k-acme:').toString('base64')}`, 'idempotency-key': ['a', 'b'] },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ data: [{ n: 1 }] }));
      });
      expect(status).toBe(400);
      expect(body.error.message).toMatch(/Idempotency-Key.*once/);
    });

    it('is ignored on reads', async () => {
      expect((await call('GET', '/', { key: 'x'.repeat(300) })).status).toBe(200);
    });

    it('fingerprints the method, the path and the body bytes', () => {
      const body = Buffer.from('{"data":[]}');
      const fp = requestFingerprint('POST', '/datasets/a/data', body);
      expect(requestFingerprint('POST', '/datasets/a/data', Buffer.from('{"data":[]}'))).toBe(fp);
      expect(requestFingerprint('PUT', '/datasets/a/data', body)).not.toBe(fp);
      expect(requestFingerprint('POST', '/datasets/b/data', body)).not.toBe(fp);
      expect(requestFingerprint('POST', '/datasets/a/data', Buffer.from('{"data": []}'))).not.toBe(fp);
      expect(requestFingerprint('DELETE', '/datasets/a', undefined)).not.toBe(requestFingerprint('DELETE', '/datasets/b', undefined));
    });
  });

  describe('a repeated request', () => {
    const replays = async (route: string): Promise<number> => sample(await registry.metrics(), 'pushbase_idempotent_replays_total', { route }) ?? 0;

    it('appends once; the repeat gets the same answer with Idempotent-Replayed and is counted', async () => {
      const id = await dataset();
      const before = await replays('/datasets/:id/data');
      const first = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'append-once' });
      expect(first.status).toBe(200);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      for (let i = 0; i < 3; i++) {
        const again = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'append-once' });
        expect({ status: again.status, body: again.body, replayed: again.headers.get('idempotent-replayed') }).toEqual({ status: 200, body: {}, replayed: 'true' });
      }
      expect(await rows('acme', id)).toBe(1);
      expect(eventsWithKey('append-once')).toHaveLength(1);
      expect(await replays('/datasets/:id/data')).toBe(before + 3);
    });

    it('replays a create’s 201 and dataset, even after the dataset was deleted', async () => {
      const id = uniqueId('created');
      const first = await call('PUT', `/datasets/${id}`, { body: definition, key: 'create-1' });
      expect(first.status).toBe(201);
      expect((await call('DELETE', `/datasets/${id}`)).status).toBe(200);
      const again = await call('PUT', `/datasets/${id}`, { body: definition, key: 'create-1' });
      expect({ status: again.status, body: again.body, replayed: again.headers.get('idempotent-replayed') }).toEqual({ status: 201, body: first.body, replayed: 'true' });
      expect(await projection.get('acme', id)).toBeUndefined(); // not created again
      // Answered from the body again: the retained key holds no copy of the definition.
      expect((await ledger.applied('acme', 'create-1'))?.dataset).not.toHaveProperty('definition');
    });

    it('replays a delete, which does not become a 404', async () => {
      const id = await dataset();
      expect((await call('DELETE', `/datasets/${id}`, { key: 'delete-1' })).status).toBe(200);
      const again = await call('DELETE', `/datasets/${id}`, { key: 'delete-1' });
      expect({ status: again.status, replayed: again.headers.get('idempotent-replayed') }).toEqual({ status: 200, replayed: 'true' });
    });

    it('replays a replace without applying it over later writes', async () => {
      const id = await dataset();
      expect((await call('PUT', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'replace-1' })).status).toBe(200);
      expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 2 }] } })).status).toBe(200);
      expect((await call('PUT', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'replace-1' })).headers.get('idempotent-replayed')).toBe('true');
      expect(await rows('acme', id)).toBe(2);
    });
  });

  it('refuses the key with another request: 422 naming the key, nothing applied', async () => {
    const id = await dataset();
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'reused' })).status).toBe(200);
    for (const [method, path, body] of [
      ['POST', `/datasets/${id}/data`, { data: [{ n: 2 }] }],
      ['PUT', `/datasets/${id}/data`, { data: [{ n: 1 }] }],
      ['DELETE', `/datasets/${id}`, undefined],
    ] as const) {
      const res = await call(method, path, { body, key: 'reused' });
      expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 422, code: 'idempotency_mismatch' });
      expect(res.body.error.message).toContain('"reused"');
    }
    expect(await rows('acme', id)).toBe(1);
  });

  it('refuses a request while the first with its key is in flight: 409 with Retry-After; then replays', async () => {
    const id = await dataset();
    let release!: () => void;
    log.hold = new Promise<void>((r) => (release = r));
    const first = call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'slow' });
    await new Promise((r) => setTimeout(r, 50));
    const during = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'slow' });
    expect({ status: during.status, code: during.body.error.code, retryAfter: during.headers.get('retry-after') }).toEqual({ status: 409, code: 'idempotency_in_flight', retryAfter: '1' });
    // As docs/openapi.yaml describes it (the e2e conformance session cannot hold a write in flight).
    expect(validateResponse('POST', '/datasets/{id}/data', 409, Object.fromEntries(during.headers), during.body)).toEqual([]);
    release();
    expect((await first).status).toBe(200);
    const after = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'slow' });
    expect(after.headers.get('idempotent-replayed')).toBe('true');
    expect(await rows('acme', id)).toBe(1);
  });

  it('does not remember a 503: the retry runs and applies once', async () => {
    const id = await dataset();
    log.mode = 'down';
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'down-first' })).status).toBe(503);
    log.mode = 'ok';
    const retry = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'down-first' });
    expect({ status: retry.status, replayed: retry.headers.get('idempotent-replayed') }).toEqual({ status: 200, replayed: null });
    expect(await rows('acme', id)).toBe(1);
  });

  it('does not remember a refused request (4xx): the corrected retry runs', async () => {
    const id = await dataset();
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 'x' }] }, key: 'fix-me' })).status).toBe(400);
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'fix-me' })).status).toBe(200);
    expect(await rows('acme', id)).toBe(1);
  });

  it('settles an outcome_unknown from the log: stored → replayed, not stored → applied by the retry', async () => {
    const id = await dataset();
    log.mode = 'stored-then-unknown';
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'lost-answer' })).status).toBe(500);
    log.mode = 'ok';
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'lost-answer' })).headers.get('idempotent-replayed')).toBe('true');
    log.mode = 'unknown';
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 2 }] }, key: 'never-stored' })).status).toBe(500);
    log.mode = 'ok';
    const retry = await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 2 }] }, key: 'never-stored' });
    expect({ status: retry.status, replayed: retry.headers.get('idempotent-replayed') }).toEqual({ status: 200, replayed: null });
    expect(await rows('acme', id)).toBe(2);
  });

  it('scopes keys per account', async () => {
    const a = await dataset('acme');
    const g = await dataset('globex');
    expect((await call('POST', `/datasets/${a}/data`, { body: { data: [{ n: 1 }] }, key: 'shared', account: 'acme' })).status).toBe(200);
    const other = await call('POST', `/datasets/${g}/data`, { body: { data: [{ n: 1 }] }, key: 'shared', account: 'globex' });
    expect({ status: other.status, replayed: other.headers.get('idempotent-replayed') }).toEqual({ status: 200, replayed: null });
    expect([await rows('acme', a), await rows('globex', g)]).toEqual([1, 1]);
  });

  it('forgets a key after the retention: the same request then applies again', async () => {
    const id = await dataset();
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'expiring' })).status).toBe(200);
    now += hoursToMs(TTL_HOURS) - 1;
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'expiring' })).headers.get('idempotent-replayed')).toBe('true');
    now += 1;
    expect((await call('POST', `/datasets/${id}/data`, { body: { data: [{ n: 1 }] }, key: 'expiring' })).headers.get('idempotent-replayed')).toBeNull();
    expect(await rows('acme', id)).toBe(2);
  });
});

describe('the Idempotency-Key rule of docs/openapi.yaml', () => {
  const node = resolvePointer(loadOpenApiDocument(), '#/components/parameters/IdempotencyKey');
  const pattern = new RegExp(String(isObject(node) && isObject(node.schema) ? node.schema.pattern : ''), 'u');

  it('is the server’s: a value matches the documented pattern exactly when the server takes it', () => {
    const values = ['a', ' a', 'a b', '"', '""', '"a"', '"a', 'a"', '"a\\"b"', '"a\\\\"', '"a"b"', '"a\\nb"', 'x'.repeat(255), 'x'.repeat(256), `"${'x'.repeat(255)}"`, `"${'x'.repeat(256)}"`, 'é', 'a\tb', '\u007f'];
    let seed = 7;
    const random = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 2000; i++) {
      const length = Math.floor(random() * 8);
      values.push(Array.from({ length }, () => '"\\ ax~'[Math.floor(random() * 7)]).join(''));
    }
    const disagreements = values.filter((v) => pattern.test(v) !== (typeof parseIdempotencyKey(v) === 'string'));
    expect(disagreements).toEqual([]);
  });
});

describe('MemoryIdempotencyLedger', () => {
  const event = (key: string, at: number, account = 'acme'): DatasetEvent => ({
    type: 'RecordsAppended',
    schema_version: 2,
    account,
    dataset: 'd',
    incarnation: 'i',
    at,
    records: [],
    delete_by: null,
    idempotency: { key, fingerprint: `fp-${key}` },
  });

  it('drops expired keys, so it holds at most a retention’s worth of them', () => {
    let now = 0;
    const ledger = new MemoryIdempotencyLedger(1000, { now: () => now });
    for (let i = 0; i < 100; i++) {
      now = i * 100;
      ledger.apply([event(`k${i}`, now)]);
    }
    expect(ledger.size).toBe(10);
    expect(ledger.entries().map((e) => e.key)).toEqual(Array.from({ length: 10 }, (_, i) => `k${90 + i}`));
    now += 10_000;
    expect(ledger.entries()).toEqual([]);
  });

  it('is not held up by a key stamped in the future (a clock set back): later keys still expire', () => {
    let now = 10_000;
    const ledger = new MemoryIdempotencyLedger(1000, { now: () => now });
    ledger.apply([event('ahead', now + 3_600_000)]); // written before the clock was set back an hour
    for (let i = 0; i < 50; i++) {
      now += 100;
      ledger.apply([event(`k${i}`, now)]);
    }
    expect(ledger.size).toBe(10);
    expect(ledger.entries().map((e) => e.key)).toEqual(Array.from({ length: 10 }, (_, i) => `k${40 + i}`));
  });

  it('takes a snapshot key stamped in the future as applied now, and drops it a retention later', async () => {
    let now = 5000;
    const ledger = new MemoryIdempotencyLedger(1000, { now: () => now }, [{ account: 'acme', key: 'ahead', fingerprint: 'f', at: 3_605_000 }]);
    expect(await ledger.applied('acme', 'ahead')).toMatchObject({ at: 5000 });
    now = 6000;
    expect(ledger.entries()).toEqual([]);
  });

  it('starts from a snapshot’s keys, dropping those already expired', async () => {
    const ledger = new MemoryIdempotencyLedger(1000, { now: () => 5000 }, [
      { account: 'acme', key: 'old', fingerprint: 'f', at: 3000 },
      { account: 'acme', key: 'new', fingerprint: 'f', at: 4500 },
    ]);
    expect(await ledger.applied('acme', 'old')).toBeUndefined();
    expect(await ledger.applied('acme', 'new')).toMatchObject({ fingerprint: 'f' });
    expect(await ledger.applied('globex', 'new')).toBeUndefined();
  });

  it('lets one attempt hold a key at a time', async () => {
    const ledger = new MemoryIdempotencyLedger(1000, { now: () => 0 });
    const claim = await ledger.claim('acme', 'k');
    expect(claim).toBeDefined();
    expect(await ledger.claim('acme', 'k')).toBeUndefined();
    expect(await ledger.claim('globex', 'k')).toBeDefined();
    await claim!.settle('not_applied');
    expect(await ledger.claim('acme', 'k')).toBeDefined();
  });
});

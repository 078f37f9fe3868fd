/*
 * Real gRPC servers and clients on loopback, in this process (no Kafka needed): health and graceful
 * shutdown, deadlines, what a transport failure becomes for a read and a write, Get's retries, the
 * request id across metadata, and the message size a 4 MiB body needs.
 */
import { RequestScope, pushbaseServices, type DatasetRef, type RawDatasetBody, type RecordService, type SchemaService, type WriteAnswer } from '@pushbase/contracts';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import { connect as connectHttp2 } from 'node:http2';
import { CALL_WINDOW_BYTES, CONNECTION_WINDOW_BYTES, connectRecordService, connectSchemaService, createGrpcServer, jsonLogger, requestLogger, type GrpcCallMetrics, type GrpcServer } from '../src';
import { freePort, healthClient, latch, silentListener, summary } from './support';
import { eventually } from '../../../test/helpers/eventually';

const protos = pushbaseServices();
const HOST = '127.0.0.1';

/** Services whose every method does what the test sets, counting calls. */
function fakes() {
  const calls: { method: string; req: unknown }[] = [];
  let getImpl: (req: DatasetRef) => Promise<DatasetSummary> = (req) => Promise.resolve(summary(req.account, req.id));
  let writeImpl: (req: RawDatasetBody) => Promise<WriteAnswer> = () => Promise.resolve({ replayed: false });
  const schema: SchemaService = {
    findOrCreate: (req) => {
      calls.push({ method: 'findOrCreate', req });
      return Promise.resolve({ created: true, dataset: summary(req.account, req.id) });
    },
    get: (req) => {
      calls.push({ method: 'get', req });
      return getImpl(req);
    },
    delete: (req) => {
      calls.push({ method: 'delete', req });
      return Promise.resolve({ replayed: false });
    },
  };
  const records: RecordService = {
    append: (req) => {
      calls.push({ method: 'append', req });
      return writeImpl(req);
    },
    replace: (req) => {
      calls.push({ method: 'replace', req });
      return writeImpl(req);
    },
  };
  return {
    schema,
    records,
    calls,
    count: (method: string) => calls.filter((c) => c.method === method).length,
    onGet: (f: typeof getImpl) => (getImpl = f),
    onWrite: (f: typeof writeImpl) => (writeImpl = f),
  };
}

interface Started {
  server: GrpcServer;
  address: string;
  f: ReturnType<typeof fakes>;
  lines: Record<string, unknown>[];
}

const running: GrpcServer[] = [];
const closers: (() => void)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await Promise.all(running.splice(0).map((s) => s.shutdown(0)));
});

async function start(scope?: RequestScope, metrics?: GrpcCallMetrics): Promise<Started> {
  const f = fakes();
  const lines: Record<string, unknown>[] = [];
  const log = jsonLogger('test', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  const server = createGrpcServer({ schema: f.schema, records: f.records, log, protos, ...(scope === undefined ? {} : { requestScope: scope }), ...(metrics === undefined ? {} : { metrics }) });
  running.push(server);
  const port = await server.listen(HOST, 0);
  expect(port).toBeGreaterThan(0);
  return { server, address: `${HOST}:${port}`, f, lines };
}

function clients(address: string, opts: Parameters<typeof connectSchemaService>[1] = {}) {
  const schema = connectSchemaService(address, { protos, ...opts });
  const records = connectRecordService(address, { protos, ...opts });
  closers.push(() => schema.close(), () => records.close());
  return { schema, records };
}

const body = (json: unknown): Uint8Array => Buffer.from(JSON.stringify(json));
const rejection = async (p: Promise<unknown>): Promise<unknown> => p.then(() => new Error('resolved, expected a rejection'), (e: unknown) => e);

describe('gRPC server and clients on loopback', () => {
  it('serves both services through the adapters, messages intact', async () => {
    const { address, f } = await start();
    const { schema, records } = clients(address);
    await expect(schema.findOrCreate({ account: 'acme', id: 'sales', body: { fields: { n: { type: 'number', name: 'N' } } } })).resolves.toEqual({
      created: true,
      dataset: summary('acme', 'sales'),
    });
    await expect(schema.get({ account: 'acme', id: 'sales' })).resolves.toEqual(summary('acme', 'sales'));
    await schema.delete({ account: 'acme', id: 'sales' });
    await records.append({ account: 'acme', id: 'sales', json: body({ data: [{ n: 1 }] }) });
    await records.replace({ account: 'acme', id: 'sales', json: body({ data: [] }) });
    expect(f.calls.map((c) => c.method)).toEqual(['findOrCreate', 'get', 'delete', 'append', 'replace']);
    expect(f.calls[0]!.req).toEqual({ account: 'acme', id: 'sales', body: { fields: { n: { type: 'number', name: 'N' } } } });
    const appended = f.calls[3]!.req as RawDatasetBody;
    expect(JSON.parse(Buffer.from(appended.json).toString('utf8'))).toEqual({ data: [{ n: 1 }] });
  });

  it('carries a write’s Idempotency-Key to the service, and a replayed answer back; none when unset', async () => {
    const { address, f } = await start();
    const { schema, records } = clients(address);
    const idempotency = { key: 'order 17 "a"', fingerprint: 'fp-1' };
    f.onWrite(() => Promise.resolve({ replayed: true }));
    await expect(records.append({ account: 'acme', id: 'sales', json: body({ data: [] }), idempotency })).resolves.toEqual({ replayed: true });
    await expect(records.replace({ account: 'acme', id: 'sales', json: body({ data: [] }) })).resolves.toEqual({ replayed: true });
    await schema.delete({ account: 'acme', id: 'sales', idempotency });
    await schema.findOrCreate({ account: 'acme', id: 'sales', body: {}, idempotency });
    expect(f.calls.map((c) => (c.req as { idempotency?: unknown }).idempotency)).toEqual([idempotency, undefined, idempotency, idempotency]);
  });

  it('carries a 4 MiB body (above gRPC’s default message limit)', async () => {
    const { address, f } = await start();
    const { records } = clients(address);
    const json = Buffer.alloc(4 * 1024 * 1024, 0x20);
    await records.append({ account: 'acme', id: 'big', json });
    expect((f.calls[0]!.req as RawDatasetBody).json.length).toBe(json.length);
  });

  it('lets a caller send 1 MiB per call and 8 MiB per connection before any window update (flow-control.ts)', async () => {
    const { address, lines } = await start();
    // What a gateway's channel sees: the server's SETTINGS (per call) and its connection window.
    const session = connectHttp2(`http://${address}`);
    closers.push(() => session.destroy());
    let perCall = 0;
    session.on('remoteSettings', (settings) => (perCall = settings.initialWindowSize ?? perCall));
    await eventually(() => perCall === CALL_WINDOW_BYTES && (session.state.remoteWindowSize ?? 0) >= CONNECTION_WINDOW_BYTES, { what: 'the widened windows', timeoutMs: 5_000 });
    // HTTP/2's default, which grpc-js leaves a server at, is 64 KiB for both: a 500-record append is larger.
    expect(CALL_WINDOW_BYTES).toBeGreaterThan(128 * 1024);
    expect(lines.filter((l) => String(l.msg).includes('receive windows'))).toEqual([]);
  });

  it('health: SERVING once listening, NOT_SERVING on shutdown before draining; the call in flight completes', async () => {
    const { server, address, f } = await start();
    const health = healthClient(address);
    closers.push(() => health.close());
    expect(await health.check('')).toBe('SERVING');
    expect(await health.check('pushbase.v1.SchemaService')).toBe('SERVING');
    expect(await health.check('pushbase.v1.RecordService')).toBe('SERVING');
    const watch = health.watch('');
    await eventually(() => watch.statuses.length === 1, { what: 'the first health status', timeoutMs: 5_000 });

    const release = latch<WriteAnswer>();
    f.onWrite(() => release.promise);
    const { records } = clients(address);
    const inFlight = records.append({ account: 'acme', id: 'x', json: body({ data: [] }) });
    await eventually(() => f.count('append') === 1, { what: 'the append to reach the handler', timeoutMs: 5_000 });

    let stopped = false;
    const stopping = server.shutdown(30_000).then(() => (stopped = true));
    await eventually(() => watch.statuses.includes('NOT_SERVING'), { what: 'NOT_SERVING', timeoutMs: 5_000 });
    expect(watch.statuses).toEqual(['SERVING', 'NOT_SERVING']);
    // The watch stream itself would hold the drain until the grace ends; a real watcher goes away too.
    watch.cancel();
    // Draining: the call in flight holds the server open.
    await new Promise((r) => setTimeout(r, 200));
    expect(stopped).toBe(false);
    // A new call is refused without reaching the service: provably unsent.
    await expect(records.replace({ account: 'acme', id: 'x', json: body({ data: [] }) })).rejects.toMatchObject({ code: 'unavailable' });
    expect(f.count('replace')).toBe(0);

    release.resolve({ replayed: false });
    await expect(inFlight).resolves.toEqual({ replayed: false });
    await stopping;
    expect(stopped).toBe(true);
  });

  it('with a drain delay: NOT_SERVING while still taking calls, then no more calls', async () => {
    const { server, address, f } = await start();
    const health = healthClient(address);
    closers.push(() => health.close());
    const { records } = clients(address);
    expect(await health.check('')).toBe('SERVING');
    const stopping = server.shutdown(5_000, 1_500);
    // Probes see NOT_SERVING at once, while the server still serves those that have not noticed yet.
    expect(await health.check('')).toBe('NOT_SERVING');
    expect(await health.check('pushbase.v1.RecordService')).toBe('NOT_SERVING');
    await records.append({ account: 'acme', id: 'x', json: body({ data: [] }) });
    expect(f.count('append')).toBe(1);
    await stopping;
    await expect(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) })).rejects.toMatchObject({ code: 'unavailable' });
    expect(f.count('append')).toBe(1);
    // Shutting down twice is one shutdown.
    await expect(server.shutdown(0)).resolves.toBeUndefined();
  });

  it('cancels calls still running when the grace runs out: a write is outcome_unknown', async () => {
    const { server, address, f } = await start();
    f.onWrite(() => new Promise(() => undefined));
    const { records } = clients(address);
    const inFlight = rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    await eventually(() => f.count('append') === 1, { what: 'the append to reach the handler', timeoutMs: 5_000 });
    const t0 = Date.now();
    await server.shutdown(300);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(await inFlight).toMatchObject({ name: 'DomainError', code: 'outcome_unknown' });
  });

  it('deadline exceeded on a hung handler: outcome_unknown for a write, unavailable for Get', async () => {
    const { address, f } = await start();
    f.onWrite(() => new Promise(() => undefined));
    f.onGet(() => new Promise(() => undefined));
    const { schema, records } = clients(address, { readDeadlineMs: 300, writeDeadlineMs: 300 });
    const write = await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    expect(write).toMatchObject({ name: 'DomainError', code: 'outcome_unknown' });
    const read = await rejection(schema.get({ account: 'acme', id: 'x' }));
    expect(read).toMatchObject({ name: 'DomainError', code: 'unavailable' });
    // A deadline is not retried: Get ran once.
    expect(f.count('get')).toBe(1);
  });

  it('server not running: every call is unavailable at once, no hang until the deadline', async () => {
    const address = `${HOST}:${await freePort()}`;
    const { schema, records } = clients(address, { readDeadlineMs: 20_000, writeDeadlineMs: 20_000 });
    const t0 = Date.now();
    for (const call of [
      () => records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }),
      () => records.replace({ account: 'acme', id: 'x', json: body({ data: [] }) }),
      () => schema.findOrCreate({ account: 'acme', id: 'x', body: {} }),
      () => schema.delete({ account: 'acme', id: 'x' }),
      () => schema.get({ account: 'acme', id: 'x' }),
    ]) {
      const e = await rejection(call());
      expect(e).toBeInstanceOf(DomainError);
      expect(e).toMatchObject({ code: 'unavailable' });
    }
    // Get's retries back off for well under its deadline; the rest fail at the first failed connect.
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('spreads the calls of one channel over replicas given as ip:port,ip:port, and skips one that is gone', async () => {
    const one = await start();
    const two = await start();
    const { records } = clients(`${one.address},${two.address}`);
    await records.waitForReady(10_000);
    const append = () => records.append({ account: 'acme', id: 'x', json: body({ data: [] }) });
    // Round robin over the connected replicas: once both are connected, they take turns.
    await eventually(async () => (await append(), one.f.count('append') > 0 && two.f.count('append') > 0), { timeoutMs: 10_000, what: 'a call on each replica' });
    const counts = [one.f.count('append'), two.f.count('append')];
    for (let i = 0; i < 10; i++) await append();
    expect([one.f.count('append') - counts[0]!, two.f.count('append') - counts[1]!]).toEqual([5, 5]);
    // The first replica goes away (its connections dropped at once, as a kill does): once the channel has
    // noticed, every call lands on the second and none is refused.
    await one.server.shutdown(0);
    const before = one.f.count('append');
    await eventually(() => append().then(() => true, () => false), { timeoutMs: 10_000, what: 'a call served by the replica left' });
    const served = two.f.count('append');
    for (let i = 0; i < 10; i++) await records.append({ account: 'acme', id: 'x', json: body({ data: [] }) });
    expect({ gone: one.f.count('append') - before, other: two.f.count('append') - served }).toEqual({ gone: 0, other: 10 });
  });

  it('waitForReady resolves once a server listens, and rejects in time when none does', async () => {
    const port = await freePort();
    const { records } = clients(`${HOST}:${port}`);
    const t0 = Date.now();
    await expect(records.waitForReady(300)).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(5_000);
    const { server, address } = await start();
    const { schema } = clients(address);
    await expect(schema.waitForReady(10_000)).resolves.toBeUndefined();
    await server.shutdown(1_000);
  });

  it('a write whose deadline passes while no connection is up is unavailable (never sent)', async () => {
    const silent = await silentListener();
    try {
      const { records } = clients(`${HOST}:${silent.port}`, { writeDeadlineMs: 500 });
      const e = await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
      expect(e).toMatchObject({ name: 'DomainError', code: 'unavailable' });
    } finally {
      await silent.close();
    }
  });

  it('retries Get across a transient UNAVAILABLE, and never a write', async () => {
    const { address, f } = await start();
    let failures = 2;
    f.onGet((req) => (failures-- > 0 ? Promise.reject(new DomainError('unavailable', 'The schema store cannot answer now')) : Promise.resolve(summary(req.account, req.id))));
    f.onWrite(() => Promise.reject(new DomainError('unavailable', 'Kafka cannot take the write now')));
    const { schema, records } = clients(address);
    await expect(schema.get({ account: 'acme', id: 'x' })).resolves.toEqual(summary('acme', 'x'));
    expect(f.count('get')).toBe(3);
    await expect(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) })).rejects.toMatchObject({
      code: 'unavailable',
      message: 'Kafka cannot take the write now',
    });
    expect(f.count('append')).toBe(1);
  });

  it('times every call on both sides by service, method and status name, a call its caller gave up on as CANCELLED on the server', async () => {
    const timings = (): GrpcCallMetrics & { seen: { service: string; method: string; code: string; ms: number }[] } => {
      const seen: { service: string; method: string; code: string; ms: number }[] = [];
      return { seen, call: (service, method, code, ms) => void seen.push({ service, method, code, ms }) };
    };
    const server = timings();
    const client = timings();
    const { address, f } = await start(undefined, server);
    const { schema, records } = clients(address, { metrics: client, writeDeadlineMs: 200 });
    await schema.get({ account: 'acme', id: 'x' });
    await records.append({ account: 'acme', id: 'x', json: body({ data: [] }) });
    f.onWrite(() => new Promise((_, reject) => setTimeout(() => reject(new DomainError('invalid', 'bad record')), 60)));
    await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    // Past the caller's deadline: the gateway's side sees DEADLINE_EXCEEDED, the service's CANCELLED once its handler ends.
    f.onWrite(() => new Promise((resolve) => setTimeout(() => resolve({ replayed: false }), 400)));
    await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    await eventually(() => server.seen.length === 4, { what: 'the service to time the call it ran past the deadline', timeoutMs: 5_000 });
    const calls = (seen: { service: string; method: string; code: string }[]): string[] => seen.map((c) => `${c.service}/${c.method} ${c.code}`);
    expect(calls(server.seen)).toEqual(['pushbase.v1.SchemaService/Get OK', 'pushbase.v1.RecordService/Append OK', 'pushbase.v1.RecordService/Append INVALID_ARGUMENT', 'pushbase.v1.RecordService/Append CANCELLED']);
    expect(calls(client.seen)).toEqual(['pushbase.v1.SchemaService/Get OK', 'pushbase.v1.RecordService/Append OK', 'pushbase.v1.RecordService/Append INVALID_ARGUMENT', 'pushbase.v1.RecordService/Append DEADLINE_EXCEEDED']);
    // The refused append took its 60 ms on both sides; the client gave up at its deadline, the handler ran on.
    expect(server.seen[2]!.ms).toBeGreaterThanOrEqual(55);
    expect(client.seen[2]!.ms).toBeGreaterThanOrEqual(55);
    expect(client.seen[3]!.ms).toBeLessThan(400);
    expect(server.seen[3]!.ms).toBeGreaterThanOrEqual(390);

    // No server: the write fails at once, and the gateway's side still counts it.
    const alone = timings();
    const nowhere = clients(`${HOST}:${await freePort()}`, { metrics: alone });
    await rejection(nowhere.records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    expect(calls(alone.seen)).toEqual(['pushbase.v1.RecordService/Append UNAVAILABLE']);
  });

  it('carries a path of any characters the client sent back intact, and the server keeps serving', async () => {
    const { address, f } = await start();
    // grpc-js throws on a text metadata value outside printable ASCII; one such answer once killed records.
    f.onWrite(() => Promise.reject(new DomainError('invalid', 'Record 0 has an unknown key "ø\u{1F600}\\n"', 'data[0].ø\u{1F600}\n')));
    const { records } = clients(address);
    for (let i = 0; i < 2; i++) {
      const e = await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
      expect(e).toMatchObject({ code: 'invalid', path: 'data[0].ø\u{1F600}\n', message: 'Record 0 has an unknown key "ø\u{1F600}\\n"' });
    }
    expect(f.count('append')).toBe(2);
  });

  it('answers INTERNAL when answering itself fails, instead of leaving the call to its deadline', async () => {
    const throwing: GrpcCallMetrics = {
      call: () => {
        throw new Error('a bug while answering');
      },
    };
    const { address, lines } = await start(undefined, throwing);
    const { schema } = clients(address, { readDeadlineMs: 20_000 });
    const started = performance.now();
    await expect(schema.get({ account: 'acme', id: 'x' })).rejects.toThrow(/INTERNAL/);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'answering a call failed', method: 'Get' }));
  });

  it('carries the request id in metadata; the service logs with it', async () => {
    const serverScope = new RequestScope();
    const { address, f, lines, server } = await start(serverScope);
    expect(server.requestScope).toBe(serverScope);
    const seen: (string | undefined)[] = [];
    const serviceLog = requestLogger(jsonLogger('records', (line) => lines.push(JSON.parse(line) as Record<string, unknown>)), serverScope);
    f.onWrite(() => {
      seen.push(serverScope.current()?.requestId);
      serviceLog('info', 'appending');
      return Promise.reject(new TypeError('secret internals at /srv/x.ts:1'));
    });
    const gatewayScope = new RequestScope();
    const { records } = clients(address, { requestScope: gatewayScope });
    const e = await rejection(gatewayScope.run({ requestId: 'req-abc.123' }, () => records.append({ account: 'acme', id: 'x', json: body({ data: [] }) })));
    // An unexpected failure of a write leaves its outcome unknown to the gateway; no internals travel.
    expect(e).toMatchObject({ code: 'outcome_unknown' });
    expect((e as Error).message).not.toContain('secret');
    expect(seen).toEqual(['req-abc.123']);
    expect(lines).toContainEqual(expect.objectContaining({ service: 'records', msg: 'appending', request_id: 'req-abc.123' }));
    const failed = lines.find((l) => l.msg === 'call failed');
    expect(failed).toMatchObject({ level: 'error', method: 'Append', request_id: 'req-abc.123' });
    expect(String(failed?.error)).toContain('secret internals');

    // Outside any request the server makes an id of its own, so its log lines still group by call.
    await rejection(records.append({ account: 'acme', id: 'x', json: body({ data: [] }) }));
    expect(seen[1]).toMatch(/^[0-9a-f-]{36}$/);
  });
});

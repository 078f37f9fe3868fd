/*
 * The gateway runs the requests of one connection in the order they were sent (docs/api.md → Basics, Pipelining), whatever
 * server and services are behind it: here over plain HTTP with in-process services and an event log that
 * holds a dataset's creation until the append pipelined behind it has reached the server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import type { DatasetEvent } from '@pushbase/domain';
import { pipeline } from '../../../test/helpers/pipeline';
import { createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

/** Holds each DatasetDefined until `release` opens the gate: a slow disk under the create. */
class SlowCreateLog extends MemoryEventLog {
  private gate: Promise<void> = Promise.resolve();
  release: () => void = () => undefined;

  holdCreates(): void {
    this.gate = new Promise((resolve) => (this.release = resolve));
  }

  override async append(events: readonly DatasetEvent[]): Promise<void> {
    if (events.some((e) => e.type === 'DatasetDefined')) await this.gate;
    return super.append(events);
  }
}

describe('requests pipelined on one connection', () => {
  const log = new SlowCreateLog();
  const projection = new MemoryProjection();
  const keys = new MemoryKeyStore();
  keys.add(hashApiKey('k'), 'acme');
  let server: Server;
  let port = 0;
  let requestsSeen = 0;

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
      log: () => undefined,
    });
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    server.on('request', () => {
      // Node hands over a pipelined request as soon as it is parsed: let the create finish only well after
      // the append behind it has arrived, so that an append not kept waiting would run first.
      if (++requestsSeen === 2) setTimeout(() => log.release(), 200);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  it('start one after another: an append pipelined behind its dataset\'s create is not refused with 404', async () => {
    log.holdCreates();
    const definition = { fields: { n: { type: 'number', name: 'N' } } };
    const responses = await pipeline({ port, plainHttp: true, ca: '' }, [
      { method: 'PUT', path: '/datasets/d1', key: 'k', body: definition },
      { method: 'POST', path: '/datasets/d1/data', key: 'k', body: { data: [{ n: 1 }] } },
      { method: 'GET', path: '/', key: 'k' },
    ]);
    expect(responses.map((r) => [r.status, r.body?.error?.message])).toEqual([
      [201, undefined],
      [200, undefined],
      [200, undefined],
    ]);
    expect(log.events.map((e) => e.type)).toEqual(['DatasetDefined', 'RecordsAppended']);
    await expect(projection.listRecords('acme', 'd1')).resolves.toEqual([{ n: 1 }]);
  });
});

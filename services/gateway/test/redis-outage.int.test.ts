import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadGatewayConfig } from '../src/config';
import { runGateway, type RunningGateway } from '../src/main';
import { createLogger } from '@pushbase/telemetry';
import { connectTestRedis, deleteUnder, randomPrefix, redisUrl } from '../../../test/helpers/redis';
import { requestTo } from '../../../test/helpers/server';

/*
 * The distributed gateway while Redis is unreachable (docs/architecture.md → The gateway): every request needs the rate limiter (and a
 * key from the Redis key store), so it is answered 503 JSON — at once, not after ioredis's reconnection
 * attempts — and served again as soon as Redis is back. Redis is "stopped" by cutting a TCP relay between
 * the gateway and the shared Redis (the shared server itself is never stopped).
 */

/** A TCP relay to Redis that can be cut (listener closed, connections destroyed) and restored on its port. */
class Relay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

const dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-gateway-'));
const prefix = randomPrefix();
const key = 'key-outage-0123456789abcdef';
const url = new URL(redisUrl());
const relay = new Relay({ host: url.hostname, port: Number(url.port || 6379) });
let gateway: RunningGateway;
let target: { port: number; ca: string; plainHttp: boolean };

beforeAll(async () => {
  await relay.open();
  gateway = await runGateway(
    loadGatewayConfig({
      PUSHBASE_PORT: '0',
      PUSHBASE_HOST: '127.0.0.1',
      PUSHBASE_ADMIN_PORT: '0',
      PUSHBASE_ADMIN_TOKEN: 'admin-token-0123456789',
      PUSHBASE_DATA_DIR: dataDir,
      PUSHBASE_API_KEYS: `${key}:acme`,
      PUSHBASE_REDIS_URL: `redis://127.0.0.1:${relay.port}`,
      PUSHBASE_REDIS_PREFIX: prefix,
      // Never called by these requests (GET / needs neither service).
      PUSHBASE_SCHEMA_ADDRESS: '127.0.0.1:1',
      PUSHBASE_RECORDS_ADDRESS: '127.0.0.1:1',
    }),
    createLogger({ service: 'gateway', level: 'silent' }),
  );
  target = { port: gateway.port, ca: readFileSync(gateway.certFile!, 'utf8'), plainHttp: false };
});

afterAll(async () => {
  await gateway?.stop();
  await relay.cut();
  const redis = await connectTestRedis();
  await deleteUnder(redis, prefix);
  await redis.quit();
  rmSync(dataDir, { recursive: true, force: true });
});

it('answers 503 JSON at once while Redis is unreachable, and serves again when it is back', async () => {
  expect((await requestTo(target, 'GET', '/', { key })).status).toBe(200);

  await relay.cut();
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const res = await requestTo(target, 'GET', '/', { key });
    const ms = performance.now() - started;
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: expect.objectContaining({ code: 'unavailable', message: expect.stringContaining(String(res.headers['x-request-id'])) }) });
    // Not even an unauthenticated caller learns where Redis is.
    expect(res.text).not.toMatch(/Redis|redis:|127\.0\.0\.1/);
    // Without failing fast a command waits through ioredis's reconnection attempts (seconds).
    expect(ms).toBeLessThan(1000);
  }
  // A key that is not in PUSHBASE_API_KEYS needs the Redis key store: 503 too, never a 401.
  expect((await requestTo(target, 'GET', '/', { key: 'key-unknown-0123456789abc' })).status).toBe(503);

  await relay.open();
  const deadline = Date.now() + 20_000;
  let status = 0;
  while (Date.now() < deadline && status !== 200) {
    status = (await requestTo(target, 'GET', '/', { key })).status;
    if (status !== 200) await new Promise((r) => setTimeout(r, 100));
  }
  expect(status).toBe(200);
});

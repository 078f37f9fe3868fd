import { connect } from 'node:tls';
import { TestServer, type Response } from '../helpers/server';
import { uid } from './support';

/*
 * Idempotency-Keys against the real server, in both modes: a retried append without unique_by stays single
 * after a connection cut once the request was sent, after kill -9 of the server between the attempts and
 * during the first; the key with another request is refused. (Embedded: compaction keeps keys,
 * test/embedded/idempotency.e2e.test.ts; distributed: two gateways, the records service killed alone,
 * test/distributed/idempotency.e2e.test.ts.)
 */

jest.setTimeout(240_000);

const DEFINITION = { fields: { n: { type: 'number', name: 'N' } } };
// A short append deadline keeps the lease of a killed distributed attempt short (the embedded server ignores it).
const ENV = { PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000', PUSHBASE_RECORDS_APPEND_TIMEOUT_MS: '3000' };

const append = (s: TestServer, id: string, key: string, n = 1): Promise<Response> =>
  s.request('POST', `/datasets/${id}/data`, { key: s.keys.acme!, body: { data: [{ n }] }, headers: { 'Idempotency-Key': key } });
const count = async (s: TestServer, id: string): Promise<number> => (await s.records('acme', id)).length;

/** A client's retry loop: on 409 it waits Retry-After and sends the same request again, until answered. */
async function appendUntilAnswered(s: TestServer, id: string, key: string, deadlineMs = 120_000): Promise<Response> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const res = await append(s, id, key);
    if (res.status !== 409 || Date.now() > until) return res;
    await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? '1') * 1000));
  }
}

async function createDataset(s: TestServer): Promise<string> {
  const id = uid('idem');
  expect((await s.request('PUT', `/datasets/${id}`, { key: s.keys.acme!, body: DEFINITION })).status).toBe(201);
  return id;
}

/** Sends the whole request on a socket of its own and cuts the connection before any answer can come. */
function sendAndCut(s: TestServer, id: string, key: string): Promise<void> {
  const body = JSON.stringify({ data: [{ n: 1 }] });
  const head = [
    `POST /datasets/${id}/data HTTP/1.1`,
    'Host: localhost',
    `Authorization: Basic ${Buffer.from(`${s.keys.acme!}:`).toString('base64')}`,
    'Content-Type: application/json',
    `Idempotency-Key: ${key}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
  ].join('\r\n');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: s.port, ca: s.ca, servername: 'localhost' }, () => {
      socket.write(`${head}\r\n\r\n${body}`, () => {
        socket.destroy();
        resolve();
      });
    });
    socket.on('error', reject);
  });
}

describe('Idempotency-Key (e2e)', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('keeps a retried append single after the connection was cut with the request sent', async () => {
    server = await new TestServer({ env: ENV }).start();
    const id = await createDataset(server);
    const keys = Array.from({ length: 10 }, (_, i) => `cut-${i}`);
    for (const key of keys) await sendAndCut(server, id, key);
    let replayed = 0;
    for (const key of keys) {
      // The retry of a client that got no answer: applied now, or the first attempt's answer again.
      const retry = await appendUntilAnswered(server, id, key);
      expect(retry.status).toBe(200);
      if (retry.headers['idempotent-replayed'] === 'true') replayed += 1;
      expect((await append(server, id, key)).headers['idempotent-replayed']).toBe('true');
    }
    expect(await count(server, id)).toBe(keys.length);
    // The first attempts were sent whole: the server applies them although nobody reads the answers.
    expect(replayed).toBeGreaterThan(0);
  });

  it('replays after kill -9 between the attempts, and settles first attempts killed in flight', async () => {
    server = await new TestServer({ env: ENV }).start();
    const id = await createDataset(server);
    expect((await append(server, id, 'before-kill')).status).toBe(200);
    const inFlight = Array.from({ length: 5 }, (_, i) => append(server!, id, `in-flight-${i}`).catch(() => undefined));
    await new Promise((r) => setTimeout(r, 5));
    await server.kill9();
    await Promise.all(inFlight);

    server = await new TestServer({ env: ENV, dataDir: server.dataDir, keys: server.keys }).start();
    const retry = await appendUntilAnswered(server, id, 'before-kill');
    expect({ status: retry.status, body: retry.body, replayed: retry.headers['idempotent-replayed'] }).toEqual({ status: 200, body: {}, replayed: 'true' });
    for (let i = 0; i < 5; i++) expect((await appendUntilAnswered(server, id, `in-flight-${i}`)).status).toBe(200);
    expect(await count(server, id)).toBe(6);
    // The key holds the first request's fingerprint after the restart too.
    expect((await append(server, id, 'before-kill', 2)).status).toBe(422);
  });

  it('refuses the key with another request (422)', async () => {
    // Expiry is not waited for here: the retention is at least an hour (services/redis/test/idempotency.int.test.ts
    // checks the keys' expiry in Redis).
    server = await new TestServer({ env: ENV }).start();
    const id = await createDataset(server);
    expect((await append(server, id, 'reused')).status).toBe(200);
    const reused = await append(server, id, 'reused', 2);
    expect({ status: reused.status, code: reused.body.error.code }).toEqual({ status: 422, code: 'idempotency_mismatch' });
    expect((await append(server, id, 'reused')).headers['idempotent-replayed']).toBe('true');
    expect(await count(server, id)).toBe(1);
  });
});

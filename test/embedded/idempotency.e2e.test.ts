import { readdirSync } from 'node:fs';
import path from 'node:path';
import { connect } from 'node:tls';
import { eventually, TestServer, type Response } from '../helpers/server';
import { uid } from '../e2e/support';

/*
 * Idempotency-Keys against the real server: a retried append without unique_by stays single after a
 * connection cut once the request was sent, after kill -9 between the attempts and during the first, and
 * after the log the keys came from was compacted away; keys expire after the retention, restarts included.
 */

jest.setTimeout(120_000);

const DEFINITION = { fields: { n: { type: 'number', name: 'N' } } };
const UNLIMITED = { PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000' };

const append = (s: TestServer, id: string, key: string, n = 1): Promise<Response> =>
  s.request('POST', `/datasets/${id}/data`, { key: s.keys.acme!, body: { data: [{ n }] }, headers: { 'Idempotency-Key': key } });
const count = async (s: TestServer, id: string): Promise<number> => (await s.records('acme', id)).length;

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

describe('Idempotency-Key, embedded server (e2e)', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('keeps a retried append single after the connection was cut with the request sent', async () => {
    server = await new TestServer({ env: UNLIMITED }).start();
    const id = await createDataset(server);
    const keys = Array.from({ length: 10 }, (_, i) => `cut-${i}`);
    for (const key of keys) await sendAndCut(server, id, key);
    let replayed = 0;
    for (const key of keys) {
      // The retry of a client that got no answer: applied now, or the first attempt's answer again.
      const retry = await append(server, id, key);
      expect(retry.status).toBe(200);
      if (retry.headers['idempotent-replayed'] === 'true') replayed += 1;
      expect((await append(server, id, key)).headers['idempotent-replayed']).toBe('true');
    }
    expect(await count(server, id)).toBe(keys.length);
    // The first attempts were sent whole: the server applies them although nobody reads the answers.
    expect(replayed).toBeGreaterThan(0);
  });

  it('replays after kill -9 between the attempts, and settles a first attempt killed in flight', async () => {
    server = await new TestServer({ env: UNLIMITED }).start();
    const id = await createDataset(server);
    expect((await append(server, id, 'before-kill')).status).toBe(200);
    const inFlight = Array.from({ length: 5 }, (_, i) => append(server!, id, `in-flight-${i}`).catch(() => undefined));
    await new Promise((r) => setTimeout(r, 5));
    await server.kill9();
    await Promise.all(inFlight);

    server = await new TestServer({ env: UNLIMITED, dataDir: server.dataDir, keys: server.keys }).start();
    const retry = await append(server, id, 'before-kill');
    expect({ status: retry.status, body: retry.body, replayed: retry.headers['idempotent-replayed'] }).toEqual({ status: 200, body: {}, replayed: 'true' });
    for (let i = 0; i < 5; i++) expect((await append(server, id, `in-flight-${i}`)).status).toBe(200);
    expect(await count(server, id)).toBe(6);
    // The key holds the first request's fingerprint after the restart too.
    expect((await append(server, id, 'before-kill', 2)).status).toBe(422);
  });

  it('keeps the keys whose events were compacted away: the snapshot carries them', async () => {
    const env = { ...UNLIMITED, PUSHBASE_SEGMENT_BYTES: '4096', PUSHBASE_COMPACT_AFTER_BYTES: '8192' };
    server = await new TestServer({ env }).start();
    const id = await createDataset(server);
    for (let i = 0; i < 80; i++) expect((await append(server, id, `compacted-${i}`, i)).status).toBe(200);
    await eventually(() => Promise.resolve(server!.output.some((l) => l.includes('"msg":"compaction finished"')) ? true : undefined), 20_000);
    expect(await server.stop()).toBe(0);
    // The first segments, which held the first keys' events, are gone.
    expect(readdirSync(path.join(server.dataDir, 'log'))[0]).not.toBe('00000000000000000000.seg');

    server = await new TestServer({ env, dataDir: server.dataDir, keys: server.keys }).start();
    for (let i = 0; i < 80; i++) expect((await append(server, id, `compacted-${i}`, i)).headers['idempotent-replayed']).toBe('true');
    expect(await count(server, id)).toBe(80);
  });

  it('forgets a key after the retention, across a restart too', async () => {
    // Two seconds.
    const env = { ...UNLIMITED, PUSHBASE_IDEMPOTENCY_TTL_HOURS: String(2 / 3600) };
    server = await new TestServer({ env }).start();
    const id = await createDataset(server);
    expect((await append(server, id, 'short-lived')).status).toBe(200);
    expect((await append(server, id, 'short-lived')).headers['idempotent-replayed']).toBe('true');
    expect((await append(server, id, 'until-restart')).status).toBe(200);
    expect(await server.stop()).toBe(0);
    await new Promise((r) => setTimeout(r, 2500));

    server = await new TestServer({ env, dataDir: server.dataDir, keys: server.keys }).start();
    // Replayed from the log at start, already expired: applied again.
    const again = await append(server, id, 'until-restart');
    expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: undefined });
    expect((await append(server, id, 'short-lived')).headers['idempotent-replayed']).toBeUndefined();
    expect(await count(server, id)).toBe(4);
  });
});

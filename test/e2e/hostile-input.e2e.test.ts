import { request as httpsRequest } from 'node:https';
import { validateResponse } from '../helpers/openapi';
import { TestServer } from '../helpers/server';
import { createDataset, expectError, expectOk, field, uid, UNLIMITED } from './support';

/*
 * Requests a careless or hostile tenant sends, against the whole server (in distributed mode: through
 * gRPC to the schema and records services): each is answered as the rules say, and the server goes on
 * serving every other request afterwards.
 */

const key = 'key-hostile-0123456789abcdef';
const neighbourKey = 'key-neighbour-0123456789abcdef';
const MiB = 1024 * 1024;
const BODY_TIMEOUT_MS = 1500;
let s: TestServer;
beforeAll(async () => {
  s = await new TestServer({
    keys: { hostile: key, neighbour: neighbourKey },
    // Room for two bodies in the whole process, so that one tenant can fill it.
    env: { ...UNLIMITED, PUSHBASE_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS), PUSHBASE_UPLOAD_BYTES_PER_ACCOUNT: String(8 * MiB), PUSHBASE_UPLOAD_BYTES_PER_PROCESS: String(8 * MiB) },
  }).start();
});
afterAll(async () => {
  await s.stop();
});

describe('keys outside ASCII in a body', () => {
  it('an unknown record key of any characters is a 400 naming it, and writes go on', async () => {
    const id = uid('nonascii');
    await createDataset(s, key, id, { n: field('number', 'N') });
    for (const bad of ['ø', 'ключ', '😀', 'a\u0000b', 'line\r\nbreak', '\u200b']) {
      const res = await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ [bad]: 1 }] } });
      expectError(res, 400, /.+/);
      expect(res.body.error.path).toBe(`data[0].${bad}`);
    }
    expectOk(await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ n: 1 }] } }));
    expectOk(await s.request('PUT', `/datasets/${id}/data`, { key, body: { data: [{ n: 2 }] } }));
    expect(await s.records('hostile', id)).toEqual([{ n: 2 }]);
  });

  it('a field key outside ASCII in a definition is a 400, and datasets are still created', async () => {
    const res = await s.request('PUT', `/datasets/${uid('nonascii')}`, { key, body: { fields: { ø: field('number', 'N') } } });
    expectError(res, 400, /.+/);
    await createDataset(s, key, uid('after'), { n: field('number', 'N') });
  });
});

describe('a body sent slowly', () => {
  /** Sends the headers and the first bytes of a body, then nothing more; resolves with the answer. */
  const trickle = (path: string, length = 1000): Promise<{ status: number; body: string; closed: boolean; headers: Record<string, string | string[] | undefined> }> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port: s.port,
          method: 'POST',
          path,
          ca: s.ca,
          servername: 'localhost',
          agent: false,
          headers: { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`, 'content-type': 'application/json', 'content-length': String(length) },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, closed: res.headers.connection === 'close', headers: res.headers }));
        },
      );
      req.on('error', reject);
      req.write('{"data":[{"n":1}');
    });

  it('is answered 408 once the body deadline passes, with nothing written, and the server goes on', async () => {
    const id = uid('slow');
    await createDataset(s, key, id, { n: field('number', 'N') });
    const res = await trickle(`/datasets/${id}/data`);
    expect(res.status).toBe(408);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'body_timeout' } });
    expect(res.closed).toBe(true);
    expect(validateResponse('POST', '/datasets/{id}/data', res.status, res.headers, JSON.parse(res.body))).toEqual([]);
    expectOk(await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ n: 2 }] } }));
    expect(await s.records('hostile', id)).toEqual([{ n: 2 }]);
  });

  it('held by one tenant up to the whole process budget, leaves another tenant its first body', async () => {
    const id = uid('crowded');
    await createDataset(s, neighbourKey, id, { n: field('number', 'N') });
    // The hostile tenant holds both 4 MiB of the process's 8 MiB with bodies that never come.
    const held = [trickle(`/datasets/${id}/data`, 4 * MiB), trickle(`/datasets/${id}/data`, 4 * MiB)];
    await new Promise((r) => setTimeout(r, 300));
    expectOk(await s.request('POST', `/datasets/${id}/data`, { key: neighbourKey, body: { data: [{ n: 1 }] } }));
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([408, 408]);
    expect(await s.records('neighbour', id)).toEqual([{ n: 1 }]);
  });
});

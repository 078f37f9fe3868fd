import { readdirSync } from 'node:fs';
import path from 'node:path';
import { TestServer, type Response } from '../helpers/server';
import { eventually } from '../helpers/eventually';
import { uid } from '../e2e/support';

/*
 * Idempotency-Keys and the embedded data directory: keys outlive the log segments their events were in
 * (the snapshots carry them). Expiry is not waited for here (the retention is at least an hour):
 * services/embedded/test/snapshot-keys.int.test.ts ages keys across restarts with a clock.
 * The rules in both modes: test/e2e/idempotency.e2e.test.ts.
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

describe('Idempotency-Key, embedded server (e2e)', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('keeps the keys whose events were compacted away: the snapshot carries them', async () => {
    const env = { ...UNLIMITED, PUSHBASE_SEGMENT_BYTES: '4096', PUSHBASE_COMPACT_AFTER_BYTES: '8192' };
    server = await new TestServer({ env }).start();
    const id = await createDataset(server);
    for (let i = 0; i < 80; i++) expect((await append(server, id, `compacted-${i}`, i)).status).toBe(200);
    await eventually(() => server!.output.some((l) => l.includes('"msg":"compaction finished"')));
    expect(await server.stop()).toBe(0);
    // The first segments, which held the first keys' events, are gone.
    expect(readdirSync(path.join(server.dataDir, 'log'))[0]).not.toBe('00000000000000000000.seg');

    server = await new TestServer({ env, dataDir: server.dataDir, keys: server.keys }).start();
    for (let i = 0; i < 80; i++) expect((await append(server, id, `compacted-${i}`, i)).headers['idempotent-replayed']).toBe('true');
    expect(await count(server, id)).toBe(80);
  });
});

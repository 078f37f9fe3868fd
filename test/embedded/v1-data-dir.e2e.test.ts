import { cpSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestServer } from '../helpers/server';

/*
 * A data directory written by pushbase before the batch-framed log (commit e4de4d5, the v1 format: one
 * [length][crc][JSON] frame per append, a pid-file LOCK left behind by kill -9, side files without fsync)
 * must keep opening: same datasets and records, the same stored API key (imported from api-keys.json into
 * the account log), admin token and certificate; and what is written after the upgrade survives a restart
 * and a kill -9 too.
 */

jest.setTimeout(90_000);

const FIXTURE = path.join(__dirname, '..', '..', 'services', 'embedded', 'test', 'fixtures', 'v1-data-dir');
const expected = JSON.parse(readFileSync(`${FIXTURE}.expected.json`, 'utf8')) as { api_key: string; datasets: unknown[]; plain: unknown[]; keyed: unknown[] };

async function visible(server: TestServer, token: string): Promise<unknown> {
  const list = await server.admin('/admin/accounts/default/datasets', token);
  expect(list.status).toBe(200);
  const records = async (id: string): Promise<unknown> => (await server.admin(`/admin/accounts/default/datasets/${id}/records`, token)).body.records;
  return { datasets: list.body.datasets, plain: await records('plain'), keyed: await records('keyed') };
}

describe('a v1 data directory (written before the batch-framed log)', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill9();
  });

  it('opens with the same state and side files, and keeps what is written after the upgrade', async () => {
    const dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-v1-'));
    cpSync(FIXTURE, dataDir, { recursive: true });
    const token = readFileSync(path.join(dataDir, 'admin.token'), 'utf8').trim();
    // Only what the directory stores: no configured keys, no configured admin token.
    const options = { dataDir, keys: { default: expected.api_key }, env: { PUSHBASE_API_KEYS: '', PUSHBASE_ADMIN_TOKEN: '', PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000' } };
    const start = async (): Promise<TestServer> => {
      const s = await new TestServer(options).start();
      servers.push(s);
      return s;
    };

    expect(existsSync(path.join(dataDir, 'FORMAT'))).toBe(false);
    const s = await start();
    // Upgraded, then marked with the current format (and the guard that stops the releases before it).
    expect(readFileSync(path.join(dataDir, 'FORMAT'), 'utf8')).toBe('1\n');
    expect(existsSync(path.join(dataDir, 'events.log', 'README'))).toBe(true);
    expect(readFileSync(s.certFile, 'utf8')).toBe(readFileSync(path.join(FIXTURE, 'tls', 'cert.pem'), 'utf8'));
    const { api_key: _key, ...state } = expected;
    expect(await visible(s, token)).toEqual(state);
    const key = expected.api_key;
    expect((await s.request('GET', '/', { key })).status).toBe(200);
    // Its api-keys.json was imported into the account log once and moved aside (docs/operations.md → Accounts and API keys).
    expect(existsSync(path.join(dataDir, 'api-keys.json'))).toBe(false);
    expect(readFileSync(path.join(dataDir, 'api-keys.json.imported'), 'utf8')).toBe(readFileSync(path.join(FIXTURE, 'api-keys.json'), 'utf8'));
    const listed = await fetch(`http://127.0.0.1:${s.adminPort}/admin/accounts/default/keys`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await listed.json()) as { keys: unknown[] }).keys).toEqual([
      { key_id: expect.stringMatching(/^kid_/), account: 'default', scope: 'write', label: 'imported from api-keys.json', created_at: '2026-11-23T09:07:16.323Z' },
    ]);

    const more = [{ day: '2024-03-01', name: 'after-upgrade', n: 1000 }];
    expect((await s.request('POST', '/datasets/plain/data', { key, body: { data: more } })).status).toBe(200);
    expect((await s.request('POST', '/datasets/keyed/data', { key, body: { data: more } })).status).toBe(200);
    const after = await visible(s, token);
    expect((after as { plain: unknown[] }).plain).toHaveLength(expected.plain.length + 1);
    expect(await s.stop()).toBe(0);

    const t = await start();
    expect(await visible(t, token)).toEqual(after);
    expect((await t.request('POST', '/datasets/plain/data', { key, body: { data: [{ day: '2024-03-02', name: 'x', n: 1001 }] } })).status).toBe(200);
    const beforeKill = await visible(t, token);
    await t.kill9();

    const u = await start();
    expect(await visible(u, token)).toEqual(beforeKill);
    expect(await u.stop()).toBe(0);
  });
});

import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestServer } from '../helpers/server';

/*
 * A data directory written by the release before the positional event encoding (commit c5d8818: events of
 * schema_version 1, records as JSON objects, in the batch-framed log, with a snapshot) must keep opening:
 * from its snapshot plus the log after it, and from the log alone (every event replayed through the
 * upcaster); what is written after the upgrade lands beside the old events and survives a restart.
 */

jest.setTimeout(120_000);

const FIXTURE = path.join(__dirname, '..', '..', 'services', 'embedded', 'test', 'fixtures', 'events-v1-data-dir');
const expected = JSON.parse(readFileSync(`${FIXTURE}.expected.json`, 'utf8')) as {
  api_key: string;
  datasets: unknown[];
  every: unknown[];
  keyed: unknown[];
  gone: unknown[];
};
const { api_key: key, ...state } = expected;

async function visible(server: TestServer, token: string): Promise<typeof state> {
  const list = await server.admin('/admin/accounts/default/datasets', token);
  expect(list.status).toBe(200);
  const records = async (id: string): Promise<unknown[]> => (await server.admin(`/admin/accounts/default/datasets/${id}/records`, token)).body.records as unknown[];
  return { datasets: list.body.datasets as unknown[], every: await records('every'), keyed: await records('keyed'), gone: await records('gone') };
}

describe('a data directory of schema_version 1 events (written before the positional encoding)', () => {
  const servers: TestServer[] = [];
  const dirs: string[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill9();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const copy = (withSnapshots: boolean): string => {
    const dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-events-v1-'));
    dirs.push(dataDir);
    cpSync(FIXTURE, dataDir, { recursive: true });
    if (!withSnapshots) rmSync(path.join(dataDir, 'snapshots'), { recursive: true, force: true });
    return dataDir;
  };
  const start = async (dataDir: string): Promise<TestServer> => {
    // Only what the directory stores: no configured keys, no configured admin token.
    const env = { PUSHBASE_API_KEYS: '', PUSHBASE_ADMIN_TOKEN: '', PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000' };
    const s = await new TestServer({ dataDir, keys: { default: key }, env }).start();
    servers.push(s);
    return s;
  };
  const token = readFileSync(path.join(FIXTURE, 'admin.token'), 'utf8').trim();

  it.each([
    ['its snapshot and the log after it', true],
    ['the whole log, replayed without the snapshot', false],
  ])('opens with the same state from %s, and keeps what is written after the upgrade', async (_what, withSnapshots) => {
    const dataDir = copy(withSnapshots);
    const s = await start(dataDir);
    expect(await visible(s, token)).toEqual(state);

    const more = { day: '2024-03-01', at: '2024-03-01T12:00:00+01:00', name: 'after-upgrade', n: 1000, share: null, cost: 5, took: 1 };
    expect((await s.request('POST', '/datasets/every/data', { key, body: { data: [more] } })).status).toBe(200);
    expect((await s.request('POST', '/datasets/keyed/data', { key, body: { data: [{ name: 'k1', day: '2024-03-02', n: 99 }] } })).status).toBe(200);
    const after = await visible(s, token);
    expect(after.every).toHaveLength(expected.every.length + 1);
    expect(after.every).toContainEqual({ ...more, at: '2024-03-01T11:00:00.000Z' });
    expect(after.keyed).toContainEqual({ name: 'k1', day: '2024-03-02', n: 99 });
    expect(await s.stop()).toBe(0);

    const t = await start(dataDir);
    expect(await visible(t, token)).toEqual(after);
    expect(await t.stop()).toBe(0);
  });
});

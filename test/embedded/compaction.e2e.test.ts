import { readdirSync } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { BUNDLE, TestServer } from '../helpers/server';
import { eventually } from '../helpers/eventually';

/*
 * The embedded server with tiny segments and a tiny compaction threshold: compaction snapshots the live
 * projection while requests are served, and a restart from snapshot + tail shows exactly
 * the admin-visible state the server showed before, then keeps appending in order.
 */

jest.setTimeout(60_000);

const ENV = { PUSHBASE_SEGMENT_BYTES: '4096', PUSHBASE_COMPACT_AFTER_BYTES: '8192', PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000' };
const DEFINITION = {
  fields: { day: { type: 'date', name: 'Day' }, name: { type: 'string', name: 'Name' }, n: { type: 'number', name: 'N' } },
};

async function visibleState(server: TestServer, account: string): Promise<unknown> {
  const list = await server.admin(`/admin/accounts/${account}/datasets`);
  expect(list.status).toBe(200);
  const out: Record<string, unknown> = { datasets: list.body.datasets };
  for (const d of list.body.datasets as { id: string }[]) out[d.id] = await server.records(account, d.id);
  return out;
}

const finished = (server: TestServer): number => server.output.filter((l) => l.includes('"msg":"compaction finished"')).length;

describe('embedded compaction (e2e)', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('compacts in the background and restarts from the snapshot to the same admin-visible state', async () => {
    server = await new TestServer({ env: ENV }).start();
    const key = server.keys.acme!;
    expect((await server.request('PUT', '/datasets/plain', { key, body: DEFINITION })).status).toBe(201);
    expect((await server.request('PUT', '/datasets/keyed', { key, body: { ...DEFINITION, unique_by: ['name'] } })).status).toBe(201);
    for (let i = 0; i < 60; i++) {
      const data = Array.from({ length: 5 }, (_, j) => ({ day: `2024-01-${String(1 + ((i + j) % 28)).padStart(2, '0')}`, name: `n${(i * 5 + j) % 37}`, n: i * 5 + j }));
      expect((await server.request('POST', '/datasets/plain/data', { key, body: { data } })).status).toBe(200);
      expect((await server.request('POST', '/datasets/keyed/data', { key, body: { data } })).status).toBe(200);
      if (i === 30) expect((await server.request('PUT', '/datasets/keyed/data', { key, body: { data: data.slice(0, 2) } })).status).toBe(200);
    }
    await eventually(() => finished(server!) >= 2);
    const before = await visibleState(server, 'acme');
    expect(await server.stop()).toBe(0);

    const dataDir = server.dataDir;
    expect(readdirSync(path.join(dataDir, 'snapshots')).filter((n) => n.endsWith('.snap')).length).toBeGreaterThan(0);
    expect(readdirSync(path.join(dataDir, 'log'))[0]).not.toBe('00000000000000000000.seg'); // covered segments are gone

    server = await new TestServer({ env: ENV, dataDir, keys: server.keys }).start();
    const replayed = server.output.map((l) => (l.includes('"msg":"event log replayed"') ? JSON.parse(l) : undefined)).find((m) => m !== undefined);
    expect(replayed.snapshot_position).toBeGreaterThan(0);
    expect(await visibleState(server, 'acme')).toEqual(before);

    // Appends continue after the restored rows, in order.
    expect((await server.request('POST', '/datasets/plain/data', { key, body: { data: [{ day: '2024-02-01', name: 'after', n: -1 }] } })).status).toBe(200);
    const rows = await server.records('acme', 'plain');
    expect(rows[rows.length - 1]).toMatchObject({ name: 'after', n: -1 });
    expect(rows.length).toBe(301);
  });

  it('`pushbase compact` compacts a stopped server\'s data directory, and refuses while it runs', async () => {
    const noAuto = { ...ENV, PUSHBASE_COMPACT_AFTER_BYTES: String(1024 ** 3) };
    server = await new TestServer({ env: noAuto }).start();
    const key = server.keys.acme!;
    expect((await server.request('PUT', '/datasets/plain', { key, body: DEFINITION })).status).toBe(201);
    for (let i = 0; i < 40; i++) {
      const data = Array.from({ length: 5 }, (_, j) => ({ day: '2024-01-01', name: `n${i}-${j}`, n: i * 5 + j }));
      expect((await server.request('POST', '/datasets/plain/data', { key, body: { data } })).status).toBe(200);
    }
    const dataDir = server.dataDir;
    const env = { ...process.env, PUSHBASE_DATA_DIR: dataDir };
    const compactCli = () => spawnSync(process.execPath, [BUNDLE, 'compact'], { env, encoding: 'utf8' });

    const whileRunning = compactCli();
    expect(whileRunning.status).toBe(1);
    expect(whileRunning.stderr).toMatch(/in use by process/);

    const before = await visibleState(server, 'acme');
    expect(await server.stop()).toBe(0);
    const segmentsBefore = readdirSync(path.join(dataDir, 'log')).length;
    expect(segmentsBefore).toBeGreaterThan(2);
    const run = compactCli();
    expect(run.status).toBe(0);
    const done = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    // Everything but the last segment (which stays, as the log's tail) is now in the snapshot.
    expect(done).toMatchObject({ msg: 'compaction finished', datasets: 1, segments_deleted: segmentsBefore - 1 });
    expect(done.records).toBeGreaterThan(100);
    expect(done.records).toBeLessThan(200);
    expect(readdirSync(path.join(dataDir, 'log'))).toHaveLength(1);

    server = await new TestServer({ env: noAuto, dataDir, keys: server.keys }).start();
    expect(await visibleState(server, 'acme')).toEqual(before);
  });

  it('loses no acknowledged append when killed -9 while compacting, round after round', async () => {
    // Tiny segments and threshold: snapshots are written and segments pruned all the time while appends
    // stream in; each round kills the server at a different moment and restarts on the same directory.
    const env = { ...ENV, PUSHBASE_SEGMENT_BYTES: '2048', PUSHBASE_COMPACT_AFTER_BYTES: '4096' };
    server = await new TestServer({ env }).start();
    const keys = server.keys;
    const dataDir = server.dataDir;
    const key = keys.acme!;
    expect((await server.request('PUT', '/datasets/stream', { key, body: DEFINITION })).status).toBe(201);
    const acknowledged = new Set<number>();
    let next = 0;
    for (let round = 0; round < 4; round++) {
      const current = server;
      let stop = false;
      const writer = async (): Promise<void> => {
        while (!stop) {
          const n = next++;
          const res = await current
            .request('POST', '/datasets/stream/data', { key, body: { data: [{ day: '2024-01-01', name: `r${n}`, n }] } })
            .catch(() => undefined); // the kill cuts requests off: their outcome is unknown, not refused
          if (res?.status === 200) acknowledged.add(n);
          else if (res !== undefined) throw new Error(`append ${n} answered ${res.status}: ${res.text}`);
        }
      };
      const writers = Array.from({ length: 6 }, writer);
      await eventually(() => finished(current) >= 1).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 50 + round * 37));
      await current.kill9();
      stop = true;
      await Promise.all(writers);
      server = await new TestServer({ env, dataDir, keys }).start();
      const stored = new Set((await server.records('acme', 'stream')).map((r: { n: number }) => r.n));
      const lost = [...acknowledged].filter((n) => !stored.has(n));
      expect(lost).toEqual([]);
    }
    expect(acknowledged.size).toBeGreaterThan(100);
    expect(readdirSync(path.join(dataDir, 'snapshots')).some((n) => n.endsWith('.snap'))).toBe(true);
  });
});

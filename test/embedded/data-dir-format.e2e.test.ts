import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { BUNDLE, ROOT, TestServer } from '../helpers/server';

/*
 * A data directory says its format in FORMAT. Every start writes it, and a directory of a later format (a
 * later release's) is refused as it is, by `pushbase serve` and `pushbase compact` alike. Releases from
 * before FORMAT never read it: a trial with one from before the group-commit log took the commits for a torn
 * tail and cut 5000 records to none. They are stopped by a guard instead, a directory named events.log
 * beside each log's segments: every release since the segmented log refuses to start when it finds
 * `<dir>/events.log` and segments in `<dir>/log/`, before reading a frame; earlier ones cannot open a
 * directory as their log.
 */

jest.setTimeout(90_000);

const run = promisify(execFile);
const DEFINITION = { fields: { n: { type: 'number', name: 'N' } } };

/** Every entry under `dir` with its kind, size, modification time and bytes: equal means untouched. */
function snapshotOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name);
      const st = statSync(full);
      out[path.relative(dir, full)] = entry.isDirectory() ? `dir ${st.mtimeMs}` : `file ${st.size} ${st.mtimeMs} ${readFileSync(full).toString('base64')}`;
      if (entry.isDirectory()) walk(full);
    }
  };
  walk(dir);
  return out;
}

describe('the data directory format', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill9();
  });
  const start = (server: TestServer): Promise<TestServer> => {
    servers.push(server);
    return server.start();
  };

  it('is written at start, with the guard that stops releases from before it beside both logs', async () => {
    const s = await start(new TestServer());
    const dir = s.dataDir;
    expect(readFileSync(path.join(dir, 'FORMAT'), 'utf8')).toBe('1\n');
    for (const logDir of [dir, path.join(dir, 'accounts')]) {
      // What an older release checks: <dir>/events.log exists, and <dir>/log/ holds segments.
      expect(statSync(path.join(logDir, 'events.log')).isDirectory()).toBe(true);
      expect(readFileSync(path.join(logDir, 'events.log', 'README'), 'utf8')).toMatch(/not an event log/);
      expect(readdirSync(path.join(logDir, 'log')).filter((f) => f.endsWith('.seg')).length).toBeGreaterThan(0);
    }
    expect(await s.stop()).toBe(0);
    const t = await start(new TestServer({ dataDir: dir, keys: s.keys }));
    expect((await t.request('GET', '/', { key: s.keys.acme! })).status).toBe(200);
    expect(await t.stop()).toBe(0);
  });

  it('of a later release is refused as it is, by serve and by compact, and opens again once its format is known', async () => {
    const s = await start(new TestServer());
    const key = s.keys.acme!;
    expect((await s.request('PUT', '/datasets/sales', { key, body: DEFINITION })).status).toBe(201);
    expect((await s.request('POST', '/datasets/sales/data', { key, body: { data: [{ n: 1 }, { n: 2 }] } })).status).toBe(200);
    expect(await s.stop()).toBe(0);

    const format = path.join(s.dataDir, 'FORMAT');
    writeFileSync(format, '2\n');
    const before = snapshotOf(s.dataDir);
    const refused = start(new TestServer({ dataDir: s.dataDir, keys: s.keys }));
    await expect(refused).rejects.toThrow(/exited with 1 before listening/);
    await expect(refused).rejects.toThrow(`The data directory ${s.dataDir} is in format 2 (${format}), newer than this pushbase reads (format 1)`);
    const compact = await run(process.execPath, [BUNDLE, 'compact'], { cwd: ROOT, env: { ...process.env, PUSHBASE_DATA_DIR: s.dataDir } }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(compact.code).toBe(1);
    expect(compact.stderr).toContain('is in format 2');
    expect(snapshotOf(s.dataDir)).toEqual(before);

    writeFileSync(format, '1\n');
    const t = await start(new TestServer({ dataDir: s.dataDir, keys: s.keys }));
    expect(await t.records('acme', 'sales')).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await t.stop()).toBe(0);
  });
});

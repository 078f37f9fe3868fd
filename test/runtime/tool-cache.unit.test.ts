/*
 * scripts/tool-cache.js: every tool the tests fetch is made once per machine, in a folder of its own that
 * is renamed into place when complete, so a failed or killed run never leaves a folder that looks done.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain CommonJS script (it runs before npm ci)
const { provisionOnce, toolsDir } = require('../../scripts/tool-cache.js') as {
  provisionOnce: (name: string, build: (dir: string, log: string) => void) => string;
  toolsDir: () => string;
};

let tools: string;
const saved = process.env.PUSHBASE_TOOLS_DIR;
beforeEach(() => {
  tools = mkdtempSync(path.join(os.tmpdir(), 'pushbase-tool-cache-'));
  process.env.PUSHBASE_TOOLS_DIR = tools;
});
afterEach(() => {
  rmSync(tools, { recursive: true, force: true });
  if (saved === undefined) delete process.env.PUSHBASE_TOOLS_DIR;
  else process.env.PUSHBASE_TOOLS_DIR = saved;
});

test('PUSHBASE_TOOLS_DIR names the cache', () => {
  expect(toolsDir()).toBe(tools);
});

test('a tool is built once; later calls find it complete', () => {
  const build = jest.fn((dir: string) => writeFileSync(path.join(dir, 'tool'), 'v1'));
  const home = provisionOnce('tool-1', build);
  expect(home).toBe(path.join(tools, 'tool-1'));
  expect(readFileSync(path.join(home, 'tool'), 'utf8')).toBe('v1');
  expect(existsSync(path.join(home, '.complete'))).toBe(true);
  expect(provisionOnce('tool-1', build)).toBe(home);
  expect(build).toHaveBeenCalledTimes(1);
  // Nothing but the tool is left in the cache: no build folder, no log.
  expect(readdirSync(tools)).toEqual(['tool-1']);
});

test('a failed build leaves no folder behind and keeps its log; the next call builds again', () => {
  expect(() =>
    provisionOnce('tool-1', (dir, log) => {
      writeFileSync(log, 'what went wrong\n');
      writeFileSync(path.join(dir, 'half'), '');
      throw new Error('no network');
    }),
  ).toThrow('no network');
  expect(readdirSync(tools).filter((f) => !f.endsWith('.log'))).toEqual([]);
  expect(readdirSync(tools).filter((f) => f.endsWith('.log'))).toHaveLength(1);
  const home = provisionOnce('tool-1', (dir) => writeFileSync(path.join(dir, 'tool'), 'v2'));
  expect(readFileSync(path.join(home, 'tool'), 'utf8')).toBe('v2');
});

test('a folder a killed run left without its .complete is made again', () => {
  mkdirSync(path.join(tools, 'tool-1'));
  writeFileSync(path.join(tools, 'tool-1', 'half'), '');
  const home = provisionOnce('tool-1', (dir) => writeFileSync(path.join(dir, 'tool'), 'v1'));
  expect(readdirSync(home).sort()).toEqual(['.complete', 'tool']);
});

test('a name with a folder in it is made inside that folder', () => {
  const home = provisionOnce('image/standin-1', (dir) => writeFileSync(path.join(dir, 'rootfs.tar'), ''));
  expect(home).toBe(path.join(tools, 'image', 'standin-1'));
  expect(existsSync(path.join(home, 'rootfs.tar'))).toBe(true);
});

test("the build folders and logs of runs killed hours ago are removed; a live run's and other tools' are not", () => {
  const hoursAgo = (file: string, hours: number): void => {
    const t = new Date(Date.now() - hours * 3600_000);
    utimesSync(file, t, t);
  };
  for (const f of ['tool-1.111.1700000000000', 'tool-1.222.1700000000001', 'tool-2.333.1700000000002']) mkdirSync(path.join(tools, f));
  writeFileSync(path.join(tools, 'tool-1.111.1700000000000.log'), '');
  hoursAgo(path.join(tools, 'tool-1.111.1700000000000'), 7);
  hoursAgo(path.join(tools, 'tool-1.111.1700000000000.log'), 7);
  hoursAgo(path.join(tools, 'tool-2.333.1700000000002'), 7);
  provisionOnce('tool-1', () => undefined);
  expect(readdirSync(tools).sort()).toEqual(['tool-1', 'tool-1.222.1700000000001', 'tool-2.333.1700000000002']);
});

test("an ensure script's command line prints what it provides, or the error and exits 1", () => {
  const run = (body: string) => spawnSync(process.execPath, ['-e', `require(${JSON.stringify(require.resolve('../../scripts/tool-cache.js'))}).printOrExit(${body})`], { encoding: 'utf8' });
  expect(run("() => '/cache/tool'")).toMatchObject({ status: 0, stdout: '/cache/tool\n', stderr: '' });
  expect(run("() => { throw new Error('no network'); }")).toMatchObject({ status: 1, stdout: '', stderr: 'pushbase: no network\n' });
});

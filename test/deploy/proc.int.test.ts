import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { running, stopPid, withLock } from '../../deploy/proc';

/*
 * deploy/proc.ts, which deploy/local and deploy/cluster share: stopping a pid (SIGTERM, SIGKILL past the
 * grace) and the lock folder a killed holder leaves behind. The cluster's users of it cannot run beside
 * CI's cluster, so these are their tests.
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'deploy-proc-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A node process that prints "ready" once its SIGTERM handler is in place. */
async function child(onTerm: 'exit' | 'ignore'): Promise<number> {
  const script = onTerm === 'exit' ? "process.on('SIGTERM', () => process.exit(0))" : "process.on('SIGTERM', () => undefined)";
  const proc = spawn(process.execPath, ['-e', `${script}; setInterval(() => undefined, 1000); console.log('ready')`], { stdio: ['ignore', 'pipe', 'ignore'] });
  await new Promise((resolve) => proc.stdout.once('data', resolve));
  return proc.pid!;
}

test('stopPid stops a process with SIGTERM and returns once it has stopped', async () => {
  const lines: string[] = [];
  const pid = await child('exit');
  await stopPid(pid, 'redis', (l) => lines.push(l), { graceMs: 10_000 });
  expect(running(pid)).toBe(false);
  expect(lines).toEqual([`redis: stopping pid ${pid}`]);
});

test('stopPid kills a process that ignores SIGTERM once the grace is over', async () => {
  const lines: string[] = [];
  const pid = await child('ignore');
  await stopPid(pid, 'kafka', (l) => lines.push(l), { graceMs: 300 });
  expect(running(pid)).toBe(false);
  expect(lines).toEqual([`kafka: stopping pid ${pid}`, `kafka: pid ${pid} still running after 0.3 s; SIGKILL`]);
});

test('stopPid returns at once for a pid that is gone', async () => {
  const pid = await child('exit');
  process.kill(pid, 'SIGKILL');
  while (running(pid)) await new Promise((r) => setTimeout(r, 20));
  await expect(stopPid(pid, 'x', () => undefined, { graceMs: 60_000 })).resolves.toBeUndefined();
});

test('withLock takes over a lock whose holder is dead, and frees it after', async () => {
  const lock = path.join(dir, 'lock');
  mkdirSync(lock);
  // A pid that cannot be alive: above the kernel's pid_max.
  writeFileSync(path.join(lock, 'pid'), '4194305');
  await expect(withLock(lock, { what: 'x', say: () => undefined, deadlineMs: 5000 }, () => Promise.resolve(42))).resolves.toBe(42);
  await expect(withLock(lock, { what: 'x', say: () => undefined, deadlineMs: 5000 }, () => Promise.resolve(43))).resolves.toBe(43);
});

test('withLock waits for a live holder, saying so once, and fails after its deadline', async () => {
  const lock = path.join(dir, 'lock');
  mkdirSync(lock);
  writeFileSync(path.join(lock, 'pid'), String(process.pid));
  const lines: string[] = [];
  await expect(withLock(lock, { what: 'another build', say: (l) => lines.push(l), deadlineMs: 1200 }, () => Promise.resolve(1))).rejects.toThrow(`${lock} is held by pid ${process.pid}`);
  expect(lines).toEqual([`waiting for another build (pid ${process.pid})`]);
});

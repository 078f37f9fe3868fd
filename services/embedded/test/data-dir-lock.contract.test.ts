import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { DataDirInUseError, lockDataDir } from '../src/data-dir-lock';

describe('the data directory lock', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pushbase-lock-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const lockFile = (): string => path.join(dir, 'LOCK');
  const holder = (pid: number, host = hostname()): string => JSON.stringify({ pid, host, started: '2026-01-01T00:00:00.000Z' });

  it('is held by one owner at a time and can be taken again after release', async () => {
    const lock = await lockDataDir(dir);
    expect(JSON.parse(await readFile(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    await writeFile(lockFile(), holder(process.ppid)); // as if our parent (alive) held it
    await expect(lockDataDir(dir)).rejects.toThrow(DataDirInUseError);
    await expect(lockDataDir(dir)).rejects.toThrow(new RegExp(`in use by process ${process.ppid}`));
    await lock.release();
    expect(existsSync(lockFile())).toBe(false);
    const again = await lockDataDir(dir);
    await again.release();
  });

  it('takes over at once from a process that is gone (kill -9, power loss)', async () => {
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const deadPid = Number(child.stdout.toString());
    await writeFile(lockFile(), holder(deadPid));
    const lock = await lockDataDir(dir);
    expect(JSON.parse(await readFile(lockFile(), 'utf8')).pid).toBe(process.pid);
    await lock.release();
  });

  it('takes over a lock naming its own pid (a restarted container is pid 1 again) or a half-written one', async () => {
    await writeFile(lockFile(), holder(process.pid));
    await (await lockDataDir(dir)).release();
    await writeFile(lockFile(), '{"pid":');
    await (await lockDataDir(dir)).release();
  });

  it('refuses a lock held from another host (a shared volume)', async () => {
    await writeFile(lockFile(), holder(12345, `not-${hostname()}`));
    await expect(lockDataDir(dir)).rejects.toThrow(/locked by process 12345 on host not-/);
    expect(existsSync(lockFile())).toBe(true);
  });
});

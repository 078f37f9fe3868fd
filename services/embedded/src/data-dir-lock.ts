import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { callback, closeFd, openFile } from '@pushbase/data-dir';
import { errorText } from './frames';

/*
 * One process per data directory: `pushbase serve` and `pushbase compact` hold a flock(2) lock on
 * `<dir>/LOCK`, taken by the `flock` command on our descriptor (Node has no flock), which the kernel drops
 * however the holder dies; the file's contents are for people only. Why flock and not a pid file, a native
 * module or fcntl locks: docs/embedded-storage.md → The data-directory lock.
 */

export interface DataDirLock {
  readonly file: string;
  release(): Promise<void>;
}

export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

export interface LockOptions {
  /**
   * How long to keep trying while another process holds the lock. A process killed a moment ago may not
   * have been torn down yet: the kernel frees a dying process's memory before it closes its files, which
   * for a server holding gigabytes can take seconds; a live server holds it for good. Default 10000 ms.
   */
  readonly waitMs?: number;
  /** The flock(1) program. Default `flock` (from PATH). */
  readonly flockCommand?: string;
}

const RETRY_MS = 100;

/** Takes an exclusive flock on `fd` without waiting: true when taken, false when another open file holds it. */
function tryFlock(fd: number, command: string): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const child = spawn(command, ['-n', '-x', '3'], { stdio: ['ignore', 'ignore', 'pipe', fd] });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'ENOENT'
          ? new Error(
              `pushbase locks its data directory with the flock command, which was not found (${command}). Install util-linux ` +
                '(Debian, Ubuntu, Fedora: the util-linux package; Alpine: busybox or util-linux; macOS: `brew install flock`).',
            )
          : err,
      );
    });
    child.on('close', (code, signal) => {
      if (code === 0) resolve(true);
      // Both util-linux and BusyBox exit 1 in silence when -n finds the lock taken, and print why otherwise.
      else if (code === 1 && stderr.trim() === '') resolve(false);
      else reject(new Error(`${command} -n -x failed (${signal ?? `exit ${String(code)}`}): ${stderr.trim() || 'no message'}`));
    });
  });
}

/** What LOCK says about its holder, for the error message; undefined when it says nothing usable. */
async function describeHolder(file: string): Promise<string | undefined> {
  try {
    const h = JSON.parse(await readFile(file, 'utf8')) as { pid?: unknown; host?: unknown; started?: unknown };
    if (typeof h.pid !== 'number') return undefined;
    const host = typeof h.host === 'string' && h.host !== hostname() ? ` on host ${h.host} (a shared volume?)` : '';
    return `process ${h.pid}${host}${typeof h.started === 'string' ? ` since ${h.started}` : ''}`;
  } catch {
    return undefined; // empty, or being written by the holder right now
  }
}

const sameFile = (a: fs.Stats, b: fs.Stats | undefined): boolean => b !== undefined && a.ino === b.ino && a.dev === b.dev;

/** Takes the data directory's lock; throws DataDirInUseError when another live process holds it. */
export async function lockDataDir(dir: string, opts: LockOptions = {}): Promise<DataDirLock> {
  const file = path.join(dir, 'LOCK');
  const command = opts.flockCommand ?? 'flock';
  const deadline = Date.now() + Math.max(0, opts.waitMs ?? 10_000);
  for (;;) {
    // Never O_TRUNC: until we hold the lock, what the file says belongs to its holder.
    const fd = await openFile(file, fs.constants.O_RDWR | fs.constants.O_CREAT);
    let locked = false;
    try {
      if (await tryFlock(fd, command)) {
        const [ours, atPath] = await Promise.all([
          callback<fs.Stats>((done) => fs.fstat(fd, done)),
          stat(file).catch(() => undefined),
        ]);
        if (sameFile(ours, atPath)) {
          const me = { pid: process.pid, host: hostname(), started: new Date().toISOString() };
          const text = Buffer.from(`${JSON.stringify(me)}\n`);
          await callback<void>((done) => fs.ftruncate(fd, 0, done));
          await callback<number>((done) => fs.write(fd, text, 0, text.length, 0, done));
          locked = true;
          let released: Promise<void> | undefined;
          // Once only: a second close could hit another file that reused the descriptor number.
          return { file, release: () => (released ??= release(fd)) };
        }
        // LOCK was removed or replaced while we took it: lock whatever is at the path now.
        continue;
      }
    } catch (err) {
      throw new Error(`Could not lock the data directory ${dir} (${file}): ${errorText(err)}`);
    } finally {
      if (!locked) await closeFd(fd);
    }
    if (Date.now() >= deadline) {
      const holder = (await describeHolder(file)) ?? 'another process';
      throw new DataDirInUseError(
        `The data directory ${dir} is in use by ${holder} (${file} is locked). Two servers must never share a data directory: ` +
          'stop that one first. The lock goes away by itself when its holder exits, however it exits; do not delete the file.',
      );
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_MS, Math.max(1, deadline - Date.now()))));
  }
}

/** Says in the file that nobody holds it, then closes it, which drops the lock. */
async function release(fd: number): Promise<void> {
  try {
    await callback<void>((done) => fs.ftruncate(fd, 0, done));
  } finally {
    await closeFd(fd);
  }
}

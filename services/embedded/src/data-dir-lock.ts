import { open, readFile, rm } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';

/*
 * One process per data directory: two servers appending to the same segments would interleave frames and
 * destroy the log. The lock is `<dir>/LOCK` holding the owner's pid and host, like PostgreSQL's
 * postmaster.pid. A lock whose process is gone (kill -9, power loss) is taken over at once, so a restart
 * after a crash never waits. (proper-lockfile, the usual library, judges staleness by an mtime it refreshes
 * on a timer, so every restart after a crash would wait out its stale period, and a long event-loop pause
 * could let a second process take a live lock.)
 * Not covered: two processes taking over the same stale lock in the same instant; start them one at a time.
 */

interface Holder {
  readonly pid: number;
  readonly host: string;
  readonly started: string;
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e: unknown) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
};

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    const h = JSON.parse(await readFile(file, 'utf8')) as Partial<Holder>;
    return typeof h.pid === 'number' && typeof h.host === 'string' ? { pid: h.pid, host: h.host, started: String(h.started) } : undefined;
  } catch {
    return undefined; // unreadable or half-written by a process that crashed while taking it: stale
  }
}

export interface DataDirLock {
  readonly file: string;
  release(): Promise<void>;
}

export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

/** Takes the data directory's lock, taking over a stale one; throws DataDirInUseError when it is held. */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const file = path.join(dir, 'LOCK');
  const me: Holder = { pid: process.pid, host: hostname(), started: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fh = await open(file, 'wx', 0o600);
      try {
        await fh.writeFile(`${JSON.stringify(me)}\n`);
        await fh.sync();
      } finally {
        await fh.close();
      }
      return { file, release: () => rm(file, { force: true }) };
    } catch (e: unknown) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const holder = await readHolder(file);
    if (holder !== undefined && holder.host !== me.host) {
      throw new DataDirInUseError(`The data directory ${dir} is locked by process ${holder.pid} on host ${holder.host} (${file}); a shared volume? Stop that server first.`);
    }
    // Our own pid in the file is a previous life of this very container/process slot (pid 1 after a restart).
    if (holder !== undefined && holder.pid !== me.pid && isAlive(holder.pid)) {
      throw new DataDirInUseError(
        `The data directory ${dir} is in use by process ${holder.pid} since ${holder.started} (${file}). Stop that server first; remove the file only if that process is not pushbase.`,
      );
    }
    await rm(file, { force: true }); // stale: its owner is gone
  }
  throw new DataDirInUseError(`Could not lock the data directory ${dir}: ${file} keeps reappearing; is another pushbase starting right now?`);
}

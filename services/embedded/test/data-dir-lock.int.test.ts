import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { DataDirInUseError, lockDataDir } from '../src/data-dir-lock';
import { procState } from '../../../test/helpers/proc';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The data directory lock is a kernel lock on the open LOCK file: it is held exactly while its holder lives.
 * What the file says (pid, host) never decides anything: a zombie, a recycled pid or a half-written file
 * must not block a start, and a live holder must always be refused.
 */

const REPO_ROOT = path.join(__dirname, '..', '..', '..');
const LOCK_SRC = path.join(__dirname, '..', 'src', 'data-dir-lock.ts');

/** A child that takes the lock, prints `locked`, and waits to be killed. */
const HOLDER = `
const { lockDataDir } = require(process.env.LOCK_SRC);
lockDataDir(process.env.LOCK_DIR, { waitMs: 0 }).then(
  () => { process.stdout.write('locked\\n'); setInterval(() => undefined, 1000); },
  (err) => { process.stdout.write('refused ' + err.message + '\\n'); process.exit(3); },
);
`;

interface Holder {
  /** The node process that holds the lock. */
  readonly pid: number;
  /** Its parent: a shell turned into `sleep`, which never reaps it, so once killed it stays a zombie. */
  readonly parent: ChildProcess;
  readonly firstLine: string;
}

/** Starts a lock holder under a parent that never reaps it (as a busy supervisor may not, for a while). */
function startHolder(dir: string): Promise<Holder> {
  const parent = spawn('sh', ['-c', '"$0" --import tsx -e "$HOLDER" & echo "pid $!"; exec sleep 120', process.execPath], {
    cwd: REPO_ROOT,
    env: { ...process.env, HOLDER, LOCK_SRC, LOCK_DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let pid = 0;
    const guard = setTimeout(() => reject(new Error('the lock holder did not start in 20 s')), 20_000);
    createInterface({ input: parent.stdout }).on('line', (line) => {
      if (line.startsWith('pid ')) pid = Number(line.slice(4));
      else {
        clearTimeout(guard);
        resolve({ pid, parent, firstLine: line });
      }
    });
    parent.on('error', reject);
  });
}

describe('the data directory lock', () => {
  let dir: string;
  const holders: Holder[] = [];
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pushbase-lock-'));
  });
  afterEach(async () => {
    for (const h of holders.splice(0)) {
      // Each by its own pid: the holder (if still alive), then its sleeping parent, whose exit lets init reap it.
      try {
        process.kill(h.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
      h.parent.kill('SIGKILL');
    }
    await rm(dir, { recursive: true, force: true });
  });
  const lockFile = (): string => path.join(dir, 'LOCK');
  const info = (pid: number, host = hostname()): string => JSON.stringify({ pid, host, started: '2026-01-01T00:00:00.000Z' });

  it('is held by one owner at a time, names it to whoever is refused, and can be taken again after release', async () => {
    const lock = await lockDataDir(dir);
    expect(JSON.parse(await readFile(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid, host: hostname() });
    // A second lock from this very process is refused too: the lock belongs to the open file, not the pid.
    await expect(lockDataDir(dir, { waitMs: 0 })).rejects.toThrow(DataDirInUseError);
    await expect(lockDataDir(dir, { waitMs: 0 })).rejects.toThrow(new RegExp(`is in use by process ${process.pid} since .*Two servers must never share`));
    await lock.release();
    await lock.release(); // harmless
    expect(await readFile(lockFile(), 'utf8')).toBe(''); // nobody holds it, and the file says so
    const again = await lockDataDir(dir, { waitMs: 0 });
    await again.release();
  });

  it('lets exactly one of many simultaneous takers win (no create-then-write window)', async () => {
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => lockDataDir(dir, { waitMs: 0 })));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DataDirInUseError);
    await (won[0] as PromiseFulfilledResult<{ release(): Promise<void> }>).value.release();
  });

  it('is not blocked by a LOCK file naming a live unrelated process, another host, or nothing readable', async () => {
    for (const text of [info(process.pid), info(process.ppid), info(1), info(12345, `not-${hostname()}`), '{"pid":', '']) {
      await writeFile(lockFile(), text);
      const lock = await lockDataDir(dir, { waitMs: 0 });
      expect(JSON.parse(await readFile(lockFile(), 'utf8')).pid).toBe(process.pid);
      await lock.release();
    }
  });

  it('refuses while another live process holds it, naming that process', async () => {
    const holder = await startHolder(dir);
    holders.push(holder);
    expect(holder.firstLine).toBe('locked');
    const t0 = Date.now();
    await expect(lockDataDir(dir, { waitMs: 300 })).rejects.toThrow(new RegExp(`in use by process ${holder.pid} `));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300); // it did wait for a dying holder, in vain
    expect(existsSync(lockFile())).toBe(true);
  });

  it('is free at once when its holder is killed -9, even while the dead holder is a zombie nobody reaped', async () => {
    for (let round = 0; round < 3; round++) {
      const holder = await startHolder(dir);
      holders.push(holder);
      expect(holder.firstLine).toBe('locked');
      process.kill(holder.pid, 'SIGKILL');
      await eventually(() => procState(holder.pid) === 'Z', { what: `process ${holder.pid} becoming a zombie`, timeoutMs: 10_000 });
      // The zombie still answers kill(pid, 0), and LOCK still names it; neither matters.
      expect(() => process.kill(holder.pid, 0)).not.toThrow();
      expect(JSON.parse(await readFile(lockFile(), 'utf8')).pid).toBe(holder.pid);
      const lock = await lockDataDir(dir, { waitMs: 0 });
      await lock.release();
    }
  });

  it('says what to install when the flock command is missing', async () => {
    await expect(lockDataDir(dir, { flockCommand: '/nonexistent/flock' })).rejects.toThrow(/flock command, which was not found.*util-linux/);
  });
});

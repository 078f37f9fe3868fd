import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fold } from '@pushbase/domain';
import { EmbeddedStore } from '../src/embedded-store';
import { snapshotDir, snapshotFile, writeSnapshot, type SnapshotIo } from '../src/snapshot';
import { bulkFrames } from './store-fixtures';
import { eventually } from '../../../test/helpers/eventually';

/*
 * A snapshot on a disk that cannot hold it must not make things worse: a failed write removes its `.tmp`
 * at once (left behind, a snapshot-sized file on a full disk fails every append until a person deletes it),
 * a run does not start while statfs says the snapshot cannot fit, and failed runs back off instead of
 * filling the disk again every minute. Faults are injected at the snapshot writer's write (ENOSPC after a
 * partial write, as a full disk does) and at the free-space probe.
 */

let dir: string;
const stores: EmbeddedStore[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-diskfull-'));
});
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  await rm(dir, { recursive: true, force: true });
});

const enospc = (): NodeJS.ErrnoException => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28 });

/** Writes part of the first chunk it is given, then fails like a full disk; counts every call. */
function fullDisk(): Pick<SnapshotIo, 'write'> & { calls: number; full: boolean } {
  const io = {
    calls: 0,
    full: true,
    async write(fh: import('node:fs').promises.FileHandle, data: Buffer): Promise<number> {
      io.calls += 1;
      if (!io.full) return (await fh.write(data, 0, data.length)).bytesWritten;
      if (io.calls % 2 === 1) return (await fh.write(data, 0, Math.ceil(data.length / 2))).bytesWritten;
      throw enospc();
    },
  };
  return io;
}

const tempsIn = async (d: string): Promise<string[]> => (await readdir(snapshotDir(d)).catch(() => [] as string[])).filter((n) => n.endsWith('.tmp'));

describe('a snapshot on a full disk', () => {
  it('removes its temporary file when a write fails half-way', async () => {
    const io = fullDisk();
    const state = fold(bulkFrames(3, 4, 50).flat());
    await expect(writeSnapshot(dir, 7, state, undefined, undefined, io)).rejects.toThrow(/ENOSPC/);
    expect(io.calls).toBe(2); // it did write half of the data before the disk was "full"
    expect(await tempsIn(dir)).toEqual([]);
    expect(existsSync(snapshotFile(dir, 7))).toBe(false);
  });

  it('removes its temporary file when aborted by a shutdown', async () => {
    const stop = new AbortController();
    stop.abort();
    await expect(writeSnapshot(dir, 7, fold(bulkFrames(3, 1, 10).flat()), undefined, stop.signal)).rejects.toThrow();
    expect(await tempsIn(dir)).toEqual([]);
  });

  it('does not retry into a disk that cannot hold it, backs off, and succeeds once there is room', async () => {
    const io = fullDisk();
    let free = Number.MAX_SAFE_INTEGER;
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    const { store } = await EmbeddedStore.open({
      dir,
      segmentBytes: 4096,
      compactAfterBytes: 1, // due at every roll
      retryMs: 40,
      maxRetryMs: 320,
      log: (msg, fields = {}) => lines.push({ msg, fields }),
      snapshotIo: { write: (fh, data) => io.write(fh, data), freeBytes: () => Promise.resolve(free) },
    });
    stores.push(store);
    const failed = (): { msg: string; fields: Record<string, unknown> }[] => lines.filter((l) => l.msg === 'compaction failed; will retry');

    // The first run passes the free-space check and fails half-way with ENOSPC: no .tmp is left behind.
    for (const frame of bulkFrames(2, 6, 20)) await store.eventLog.append(frame);
    await eventually(() => failed().length >= 1, { what: 'a failed compaction' });
    expect(failed()[0]!.fields.error).toMatch(/ENOSPC/);
    expect(await tempsIn(dir)).toEqual([]);
    const writesAfterEnospc = io.calls;

    // Now statfs says the snapshot cannot fit: the retries neither write nor leave files, and they back off.
    free = store.expectedSnapshotBytes(); // less than the snapshot plus a segment of headroom
    await eventually(() => failed().length >= 6, { what: 'five more failed compactions', timeoutMs: 30_000 });
    for (const l of failed().slice(1)) expect(l.fields.error).toMatch(/not enough free disk space for a snapshot/);
    expect(io.calls).toBe(writesAfterEnospc);
    expect(failed().slice(0, 6).map((l) => l.fields.retry_ms)).toEqual([40, 80, 160, 320, 320, 320]);
    // Appends go on meanwhile; the segment rolls they cause do not cut the wait short.
    for (const frame of bulkFrames(1, 4, 20)) await store.eventLog.append(frame);
    expect(await tempsIn(dir)).toEqual([]);

    // Room again: the next retry writes the snapshot.
    free = Number.MAX_SAFE_INTEGER;
    io.full = false;
    await eventually(() => lines.some((l) => l.msg === 'compaction finished'), { what: 'a finished compaction', timeoutMs: 30_000 });
    expect(store.stats().snapshotPosition).toBeGreaterThan(0);
    expect(await tempsIn(dir)).toEqual([]);
  });

  it('a .tmp left by a crash mid-snapshot is removed at the next start', async () => {
    await mkdir(snapshotDir(dir), { recursive: true });
    const leftover = `${snapshotFile(dir, 5)}.tmp`;
    await writeFile(leftover, Buffer.alloc(64 * 1024));
    const lines: string[] = [];
    const { store } = await EmbeddedStore.open({ dir, log: (msg) => lines.push(msg) });
    stores.push(store);
    expect(existsSync(leftover)).toBe(false);
    expect(lines).toContain('removed an unfinished snapshot');
  });
});

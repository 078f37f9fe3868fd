import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { EVENT_SCHEMA_VERSION, fold, type DatasetDefinition, type DatasetEvent, type State } from '@pushbase/domain';
import { compact, type CompactionJob } from '../src/compaction';
import { EmbeddedStore, type EmbeddedStoreOptions } from '../src/embedded-store';
import { FileEventLog, listSegments } from '../src/file-event-log';
import { listSnapshots, snapshotFile } from '../src/snapshot';
import { bulkFrames, dumpState, framesArb } from './store-fixtures';

/*
 * Compaction and the store's start: snapshot + tail ≡ full history; only covered segments are deleted; a
 * crash at any step of a compaction leaves a directory that starts with every acknowledged event; damaged
 * snapshots fall back; the live snapshot runs automatically past the threshold, one run at a time,
 * and a failed run is retried without harming anything.
 */

let dir: string;
const stores: EmbeddedStore[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-compaction-'));
});
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

const stateOf = (store: EmbeddedStore): State => store.projection.currentState();
const SEGMENT_BYTES = 2000;

/** A store with in-process compaction that never runs by itself (tests call compactNow). */
async function openStore(opts: Partial<EmbeddedStoreOptions> = {}): Promise<{ store: EmbeddedStore; lines: { msg: string; fields: Record<string, unknown> }[] }> {
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const { store } = await EmbeddedStore.open({
    dir,
    segmentBytes: SEGMENT_BYTES,
    compactAfterBytes: Number.MAX_SAFE_INTEGER,
    runCompaction: (job) => compact(job),
    log: (msg, fields = {}) => lines.push({ msg, fields }),
    ...opts,
  });
  stores.push(store);
  return { store, lines };
}

async function closeStore(store: EmbeddedStore): Promise<void> {
  await store.close();
  stores.splice(stores.indexOf(store), 1);
}

/** Writes frames through a plain log with small segments (no store, no compaction). */
async function writeFrames(frames: DatasetEvent[][], segmentBytes = SEGMENT_BYTES): Promise<number> {
  const log = new FileEventLog({ dir, segmentBytes, warn: () => undefined });
  // Starting at the first segment still there: this helper only appends, it needs no state.
  await log.start(() => undefined, { from: (await listSegments(dir))[0]?.base ?? 0 });
  for (const f of frames) await log.append(f);
  const activeBase = log.stats().activeBase;
  await log.close();
  return activeBase;
}

const job = (sealedEnd: number, extra: Partial<CompactionJob> = {}): CompactionJob => ({ dir, sealedEnd, ...extra });
const bases = async (): Promise<number[]> => (await listSegments(dir)).map((s) => s.base);
const snaps = async (): Promise<number[]> => (await listSnapshots(dir)).map((s) => s.position);

describe('EmbeddedStore with compaction', () => {
  it('restarts to the full fold whenever compactions ran in between (property)', async () => {
    await fc.assert(
      fc.asyncProperty(framesArb(50), fc.array(fc.nat(), { maxLength: 4 }), fc.constantFrom(1, 2), async (frames, cuts, retain) => {
        await rm(dir, { recursive: true, force: true });
        let { store } = await openStore({ retainSnapshots: retain, segmentBytes: 400 });
        const points = new Set(cuts.map((c) => (frames.length === 0 ? 0 : c % frames.length)));
        for (const [i, f] of frames.entries()) {
          await store.eventLog.append(f);
          if (points.has(i)) await store.compactNow();
          if (i === Math.floor(frames.length / 2)) {
            await closeStore(store);
            ({ store } = await openStore({ retainSnapshots: retain, segmentBytes: 400 }));
          }
        }
        const expected = dumpState(fold(frames.flat()));
        expect(dumpState(stateOf(store))).toEqual(expected);
        await closeStore(store);
        const reopened = (await openStore({ retainSnapshots: retain, segmentBytes: 400 })).store;
        expect(dumpState(stateOf(reopened))).toEqual(expected);
        await closeStore(reopened);
      }),
      { numRuns: 40 },
    );
  });

  it('restarts to the full fold whenever live snapshots were taken in between, mid-segment too (property)', async () => {
    await fc.assert(
      fc.asyncProperty(framesArb(50), fc.array(fc.nat(), { maxLength: 4 }), fc.constantFrom(1, 2), async (frames, cuts, retain) => {
        await rm(dir, { recursive: true, force: true });
        const live = { retainSnapshots: retain, segmentBytes: 400, runCompaction: undefined as never };
        let { store } = await openStore(live);
        const points = new Set(cuts.map((c) => (frames.length === 0 ? 0 : c % frames.length)));
        for (const [i, f] of frames.entries()) {
          await store.eventLog.append(f);
          if (points.has(i)) await store.compactNow();
          if (i === Math.floor(frames.length / 2)) {
            await closeStore(store);
            ({ store } = await openStore(live));
          }
        }
        const expected = dumpState(fold(frames.flat()));
        expect(dumpState(stateOf(store))).toEqual(expected);
        await closeStore(store);
        const reopened = (await openStore(live)).store;
        expect(dumpState(stateOf(reopened))).toEqual(expected);
        // Whatever was pruned, the log still continues the newest snapshot.
        const newest = (await snaps()).at(-1) ?? 0;
        expect((await bases())[0] ?? 0).toBeLessThanOrEqual(newest);
        await closeStore(reopened);
      }),
      { numRuns: 40 },
    );
  });

  it('takes a live snapshot exactly as of the log position: no frame lost, none applied twice', async () => {
    const env = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'plain', incarnation: 'i1', at: 0 } as const;
    const definition = { fields: { v: { type: 'number', name: 'V', optional: false } }, unique_by: [] } as unknown as DatasetDefinition;
    const append = (v: number): DatasetEvent[] => [{ ...env, type: 'RecordsAppended', records: [{ v }], delete_by: null }];
    const live = { runCompaction: undefined as never, segmentBytes: 1_000_000 };
    let { store, lines } = await openStore(live);
    await store.eventLog.append([{ ...env, type: 'DatasetDefined', definition }]);
    await store.eventLog.append(append(1));
    await store.compactNow(); // mid-segment: position 2
    await store.eventLog.append(append(2));
    expect(lines.find((l) => l.msg === 'compaction finished')?.fields).toMatchObject({ position: 2, records: 1 });
    await closeStore(store);
    ({ store, lines } = await openStore(live));
    expect(lines.find((l) => l.msg === 'snapshot skipped')).toBeUndefined();
    expect(store.eventLog.stats().replayed).toBe(1);
    await expect(store.projection.listRecords('acme', 'plain')).resolves.toEqual([{ v: 1 }, { v: 2 }]);
  });

  it('deletes only the segments a durable snapshot covers (retain 1: the new one; retain 2: the one before it)', async () => {
    const frames = bulkFrames(2, 8, 20);
    const sealedEnd = await writeFrames(frames);
    const all = await bases();
    expect(all.length).toBeGreaterThan(3);
    const mid = all[2]!;

    // retain 2: a first run keeps every segment (no older snapshot to fall back to)...
    let r = await compact(job(mid));
    expect(r).toMatchObject({ from: 0, segmentsDeleted: [] });
    expect(await snaps()).toEqual([mid]);
    // ...the second deletes what the first snapshot covers, and keeps both snapshots.
    r = await compact(job(sealedEnd));
    expect(r!.segmentsDeleted).toEqual(all.filter((b) => b < mid));
    expect(await bases()).toEqual(all.filter((b) => b >= mid));
    expect(await snaps()).toEqual([mid, sealedEnd]);
    expect(await compact(job(sealedEnd))).toBeUndefined(); // nothing new sealed

    // retain 1 deletes everything the new snapshot covers, and the older snapshot.
    const more = await writeFrames(bulkFrames(2, 12, 20).slice(frames.length));
    r = await compact(job(more, { retainSnapshots: 1 }));
    expect(await bases()).toEqual([more]);
    expect(await snaps()).toEqual([more]);
    expect(r!.snapshotsDeleted).toEqual([mid, sealedEnd]);

    const { store } = await openStore();
    expect(dumpState(stateOf(store))).toEqual(dumpState(fold(bulkFrames(2, 12, 20).flat())));
    expect(store.eventLog.stats().replayed).toBe(bulkFrames(2, 12, 20).length - more); // only the active segment
  });

  const STEPS = ['load', 'fold', 'write-temp', 'fsync-temp', 'rename', 'sync-dir', 'delete-segment', 'delete-snapshot'];
  it.each(STEPS)('a crash at step "%s" (every occurrence) leaves a startable directory with every event', async (name) => {
    const history = bulkFrames(3, 8, 15);
    const firstHalf = history.slice(0, 12);
    for (let occurrence = 1; ; occurrence++) {
      await rm(dir, { recursive: true, force: true });
      // Two earlier compactions, so the crashing one has segments and a snapshot to delete.
      const e1 = await writeFrames(firstHalf);
      await compact(job(e1));
      const e2 = await writeFrames(history.slice(12, 20));
      await compact(job(e2));
      const e3 = await writeFrames(history.slice(20));
      let seen = 0;
      const crash = new Error('simulated crash');
      const outcome = await compact(job(e3), (step) => {
        if (step === name && ++seen === occurrence) throw crash;
      }).catch((err: unknown) => err);
      const crashed = outcome === crash;
      // The directory starts, holds every event, and a later compaction completes and still agrees.
      const expected = dumpState(fold(history.flat()));
      const { store } = await openStore();
      expect(dumpState(stateOf(store))).toEqual(expected);
      await closeStore(store);
      await compact(job(e3, { retainSnapshots: 1 }));
      const { store: after } = await openStore();
      expect(dumpState(stateOf(after))).toEqual(expected);
      await closeStore(after);
      if (!crashed) {
        expect(occurrence).toBeGreaterThan(1); // the step was reached at least once
        break;
      }
    }
  });

  it('falls back to the older snapshot when the newest is damaged, to a full replay when segment 0 remains, else refuses', async () => {
    const history = bulkFrames(2, 6, 20);
    const e1 = await writeFrames(history.slice(0, 6));
    await compact(job(e1));
    const e2 = await writeFrames(history.slice(6));
    await compact(job(e2));
    expect(await snaps()).toEqual([e1, e2]);
    const expected = dumpState(fold(history.flat()));
    const newest = snapshotFile(dir, e2);
    const bytes = await readFile(newest);
    await writeFile(newest, bytes.subarray(0, bytes.length - 1));

    let { store, lines } = await openStore();
    expect(dumpState(stateOf(store))).toEqual(expected);
    expect(lines.some((l) => l.msg === 'snapshot skipped' && String(l.fields.detail).includes('unusable'))).toBe(true);
    expect(store.eventLog.stats().replayed).toBeGreaterThan(0); // replayed the segments after e1
    await closeStore(store);

    // Both snapshots damaged, the log no longer starting at frame 0: refuse, and say why.
    await writeFile(snapshotFile(dir, e1), 'nope');
    await expect(openStore()).rejects.toThrow(/starts at frame \d+ .*no snapshot covering them could be loaded/);

    // With segment 0 still there (a fresh history compacted once), a damaged snapshot means a full replay.
    await rm(dir, { recursive: true, force: true });
    const only = await writeFrames(history);
    await compact(job(only));
    await writeFile(snapshotFile(dir, only), 'nope');
    ({ store, lines } = await openStore());
    expect(dumpState(stateOf(store))).toEqual(expected);
    expect(store.eventLog.stats().replayed).toBe(history.length);
  });

  it('snapshots the live projection past the threshold, one run at a time, and answers appends meanwhile', async () => {
    const { store, lines } = await openStore({ runCompaction: undefined as never, compactAfterBytes: 4000 });
    const frames = bulkFrames(4, 10, 10);
    for (const f of frames) await store.eventLog.append(f);
    // Wait for the runs to finish (bounded).
    for (let i = 0; i < 200 && (store.stats().compacting || store.stats().uncompactedBytes >= 4000); i++) await new Promise((r) => setTimeout(r, 50));
    const started = lines.filter((l) => l.msg === 'compaction started').length;
    const finished = lines.filter((l) => l.msg === 'compaction finished').length;
    expect(finished).toBeGreaterThan(0);
    expect(started).toBe(finished);
    expect(lines.filter((l) => l.msg === 'compaction failed; will retry')).toEqual([]);
    expect(store.stats().snapshotPosition).toBeGreaterThan(0);
    await closeStore(store);
    const { store: again, lines: startLines } = await openStore();
    expect(dumpState(stateOf(again))).toEqual(dumpState(fold(frames.flat())));
    expect(again.eventLog.stats().replayed).toBeLessThan(frames.length);
    expect(startLines.filter((l) => l.msg === 'snapshot skipped')).toEqual([]);
  }, 30_000);

  it('logs a failed run and retries it later, without deleting anything or stopping appends', async () => {
    let calls = 0;
    const { store, lines } = await openStore({
      compactAfterBytes: 1,
      retryMs: 20,
      runCompaction: async (j) => {
        calls += 1;
        if (calls <= 2) throw new Error(`disk says no (${calls})`);
        return compact(j);
      },
    });
    const frames = bulkFrames(2, 4, 10);
    for (const f of frames) await store.eventLog.append(f);
    for (let i = 0; i < 100 && lines.filter((l) => l.msg === 'compaction finished').length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(lines.filter((l) => l.msg === 'compaction failed; will retry').map((l) => l.fields.error)).toEqual(['disk says no (1)', 'disk says no (2)']);
    expect(lines.some((l) => l.msg === 'compaction finished')).toBe(true);
    expect(store.stats().failures).toBe(2);
    await closeStore(store);
    const { store: again } = await openStore();
    expect(dumpState(stateOf(again))).toEqual(dumpState(fold(frames.flat())));
  });

  it('removes a leftover temporary snapshot and never loads one', async () => {
    const e = await writeFrames(bulkFrames(2, 3, 20));
    await compact(job(e));
    const tmp = `${snapshotFile(dir, e + 100)}.tmp`;
    await writeFile(tmp, 'half a snapshot');
    const { store } = await openStore();
    expect(dumpState(stateOf(store))).toEqual(dumpState(fold(bulkFrames(2, 3, 20).flat())));
    await closeStore(store);
    const more = await writeFrames(bulkFrames(2, 5, 20).slice(bulkFrames(2, 3, 20).length));
    await compact(job(more));
    expect(existsSync(tmp)).toBe(false);
    expect((await readdir(path.join(dir, 'snapshots'))).every((n) => n.endsWith('.snap'))).toBe(true);
  });
});

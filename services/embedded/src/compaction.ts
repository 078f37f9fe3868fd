import * as fs from 'node:fs';
import { DEFAULT_IDEMPOTENCY_TTL_HOURS, hoursToMs } from '@pushbase/config';
import { MemoryIdempotencyLedger } from '@pushbase/app';
import { evolve, initialState, type AppliedKey, type State } from '@pushbase/domain';
import { listSegments, readSealedSegment, segmentDir } from './file-event-log';
import { syncDirectory } from '@pushbase/data-dir';
import { errorText } from './frames';
import { captureState, listSnapshots, readSnapshot, snapshotDir, verifySnapshot, writeSnapshot, type SnapshotInfo, type StepHook } from './snapshot';

/*
 * One compaction run as pure file work: the newest valid snapshot plus the sealed segments after it, folded
 * into a new snapshot; then the files it makes redundant are deleted — by default only what the older of the
 * two kept snapshots covers, so a damaged newest one still has a fallback. Nothing is deleted before the new
 * snapshot is durable and read back whole, and segments go oldest first, so a crash leaves a contiguous run.
 * Used offline (`pushbase compact`) and as the live snapshot's reference in tests. Why: docs/embedded-storage.md
 * → One compaction run.
 */

export interface CompactionJob {
  readonly dir: string;
  /** Global index where the sealed segments end (the active segment's base): the new snapshot's position. */
  readonly sealedEnd: number;
  /** 1 or 2 (default 2): see above. */
  readonly retainSnapshots?: number;
  /** How long an applied Idempotency-Key is retained (default 24 h): the snapshot carries the keys still retained. */
  readonly idempotencyTtlMs?: number;
}

export interface CompactionResult {
  /** The new snapshot. */
  readonly snapshot: SnapshotInfo;
  /** Position of the snapshot it started from (0 and no file when there was none). */
  readonly from: number;
  readonly segmentsFolded: number;
  readonly framesFolded: number;
  /** Bases of the deleted segments; every frame before `deletedBefore` is gone from the log. */
  readonly segmentsDeleted: number[];
  readonly deletedBefore: number;
  readonly snapshotsDeleted: number[];
  readonly warnings: string[];
  readonly ms: number;
}

/**
 * Runs one compaction. Resolves undefined when there is nothing to do (the newest snapshot is already at
 * `sealedEnd`). `step` is a test seam called before each durable step ('load', 'fold', 'write-temp',
 * 'fsync-temp', 'rename', 'sync-dir', 'delete-segment', 'delete-snapshot'); throwing there simulates a crash.
 */
export async function compact(job: CompactionJob, step: StepHook = () => undefined): Promise<CompactionResult | undefined> {
  const t0 = performance.now();
  const retain = job.retainSnapshots === 1 ? 1 : 2;
  const warnings: string[] = [];
  const segments = await listSegments(job.dir);
  const snapshots = await listSnapshots(job.dir);
  const firstBase = segments[0]?.base;
  if (firstBase === undefined) throw new Error(`no segments in ${segmentDir(job.dir)}`);
  const ends = new Map<number, number>(); // base → next segment's base
  segments.forEach((s, i) => {
    const next = segments[i + 1];
    if (next !== undefined) ends.set(s.base, next.base);
  });
  if (job.sealedEnd !== firstBase && ![...ends.values()].includes(job.sealedEnd)) {
    throw new Error(`no segment boundary at frame ${job.sealedEnd} in ${segmentDir(job.dir)}`);
  }

  // 1. The newest snapshot that verifies and that the remaining segments continue.
  await step('load');
  let from = 0;
  let state: State | undefined;
  let keys: readonly AppliedKey[] = [];
  let loaded: number | undefined;
  // The loaded snapshot's file stays open while its datasets are still encoded in it: closed once written.
  let closeLoaded = (): void => undefined;
  for (const snap of [...snapshots].reverse()) {
    if (snap.position < firstBase || snap.position > job.sealedEnd) continue;
    try {
      const read = await readSnapshot(snap.file);
      state = read.state;
      keys = read.idempotency;
      closeLoaded = read.close;
      from = read.info.position;
      loaded = from;
      break;
    } catch (err) {
      warnings.push(`ignoring snapshot ${snap.file}: ${errorText(err)}`);
    }
  }
  if (state === undefined) {
    if (firstBase !== 0) throw new Error(`no usable snapshot, and the log starts at frame ${firstBase}, not 0: cannot rebuild the state`);
    state = initialState();
  }
  if (from >= job.sealedEnd) {
    closeLoaded();
    return undefined;
  }
  let snapshot: SnapshotInfo;
  let segmentsFolded = 0;
  let framesFolded = 0;
  try {
    const ledger = new MemoryIdempotencyLedger(job.idempotencyTtlMs ?? hoursToMs(DEFAULT_IDEMPOTENCY_TTL_HOURS), { now: () => Date.now() }, keys);
    ({ snapshot, segmentsFolded, framesFolded } = await foldAndWrite(job, step, state, ledger, from, segments, ends));
  } finally {
    closeLoaded();
  }

  // 4. Delete what is now redundant, oldest first.
  const pruned = await pruneCovered(job.dir, snapshot.position, loaded, retain, step);
  return {
    snapshot,
    from,
    segmentsFolded,
    framesFolded,
    segmentsDeleted: pruned.segmentsDeleted,
    deletedBefore: pruned.segmentsDeleted.length > 0 ? pruned.deletedBefore : firstBase,
    snapshotsDeleted: pruned.snapshotsDeleted,
    warnings,
    ms: performance.now() - t0,
  };
}

/** Steps 2 and 3 of compact: the sealed segments after `from` folded onto `state`, written as the new snapshot. */
async function foldAndWrite(
  job: CompactionJob,
  step: StepHook,
  state: State,
  ledger: MemoryIdempotencyLedger,
  from: number,
  segments: readonly { base: number; file: string }[],
  ends: ReadonlyMap<number, number>,
): Promise<{ snapshot: SnapshotInfo; segmentsFolded: number; framesFolded: number }> {
  // 2. Fold the sealed segments after it, with the same pure evolve the projection uses.
  await step('fold');
  let segmentsFolded = 0;
  let framesFolded = 0;
  let s: State = state;
  for (const seg of segments) {
    const next = ends.get(seg.base);
    if (next === undefined || seg.base >= job.sealedEnd) break; // the active segment, or beyond the job
    if (next <= from) continue;
    const frames = await readSealedSegment(seg.file, seg.base, from, (events) => {
      for (const e of events) s = evolve(s, e);
      ledger.apply(events);
      framesFolded += 1;
    });
    if (seg.base + frames !== next) {
      throw new Error(`segment ${seg.file} holds ${frames} frames but the next segment starts at frame ${next}`);
    }
    segmentsFolded += 1;
  }

  // 3. The new snapshot, durable before anything is deleted.
  const snapshot = await writeSnapshot(job.dir, job.sealedEnd, captureState(s, ledger.entries()), step);
  await verifySnapshot(snapshot);
  return { snapshot, segmentsFolded, framesFolded };
}

export interface PruneResult {
  readonly segmentsDeleted: number[];
  /** Every frame before this is gone from the log (when any segment was deleted). */
  readonly deletedBefore: number;
  readonly snapshotsDeleted: number[];
}

/**
 * After a snapshot at `snapshotPosition` is durable: deletes the segments that lie wholly below what the
 * retained snapshots cover (retain 1: the new one; retain 2: `previous`, the one before it), oldest first,
 * the snapshots not retained, and leftover `.tmp` files. Never touches the active (last) segment.
 */
export async function pruneCovered(dir: string, snapshotPosition: number, previous: number | undefined, retain: 1 | 2, step: StepHook = () => undefined): Promise<PruneResult> {
  const segments = await listSegments(dir);
  const deletedBefore = retain === 1 ? snapshotPosition : (previous ?? 0);
  const segmentsDeleted: number[] = [];
  for (const [i, seg] of segments.entries()) {
    const next = segments[i + 1]?.base;
    if (next === undefined || next > deletedBefore) break;
    await step('delete-segment');
    await fs.promises.rm(seg.file, { force: true });
    segmentsDeleted.push(seg.base);
  }
  if (segmentsDeleted.length > 0) await syncDirectory(segmentDir(dir));
  const keep = new Set([snapshotPosition, ...(retain === 2 && previous !== undefined ? [previous] : [])]);
  const snapshotsDeleted: number[] = [];
  for (const snap of await listSnapshots(dir)) {
    if (keep.has(snap.position)) continue;
    await step('delete-snapshot');
    await fs.promises.rm(snap.file, { force: true });
    snapshotsDeleted.push(snap.position);
  }
  for (const name of await fs.promises.readdir(snapshotDir(dir))) {
    if (name.endsWith('.tmp')) await fs.promises.rm(`${snapshotDir(dir)}/${name}`, { force: true });
  }
  await syncDirectory(snapshotDir(dir));
  return { segmentsDeleted, deletedBefore, snapshotsDeleted };
}

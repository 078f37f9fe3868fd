import { DEFAULT_IDEMPOTENCY_TTL_HOURS, hoursToMs } from '@pushbase/config';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { MemoryIdempotencyLedger, MemoryProjection, type Clock } from '@pushbase/app';
import { initialState } from '@pushbase/domain';
import type { EventLogMetrics } from '@pushbase/metrics';
import { pruneCovered, type CompactionJob, type CompactionResult } from './compaction';
import { DEFAULT_SEGMENT_BYTES, FileEventLog, hasLegacyLog, listSegments, type SegmentInfo } from './file-event-log';
import { errorText } from './frames';
import { encodeDataset, type CapturedDataset } from './snapshot-codec';
import type { SnapshotPool } from './snapshot-pool';
import { captureState, estimateKeyBytes, estimateSnapshotBytes, listSnapshots, readSnapshot, removeLeftoverTemps, snapshotDir, verifySnapshot, writeSnapshot, type LoadedSnapshot, type SnapshotInfo, type SnapshotIo } from './snapshot';

/*
 * The embedded mode's storage: the segmented event log, the snapshots, the in-memory projection, and the
 * background compaction that keeps restart time and disk bounded by the state rather than the history.
 * Start, compaction, disk space, and why the snapshot is taken from the live projection:
 * docs/embedded-storage.md → Start and compaction.
 */

export const DEFAULT_COMPACT_AFTER_BYTES = 256 * 1024 * 1024;
const DEFAULT_RETRY_MS = 60_000;
const DEFAULT_MAX_RETRY_MS = 30 * 60_000;

/** Bytes the file system holding `dir` has free for this process (statfs: blocks available × block size). */
async function freeBytes(dir: string): Promise<number> {
  const st = await fsp.statfs(dir);
  return st.bavail * st.bsize;
}

export type StoreLogger = (msg: string, fields?: Record<string, unknown>) => void;
/** Runs one compaction job from files (tests, offline tools); by default the store snapshots its live projection instead. */
export type CompactionRunner = (job: CompactionJob) => Promise<CompactionResult | undefined>;

export interface EmbeddedStoreOptions {
  readonly dir: string;
  readonly segmentBytes?: number;
  readonly compactAfterBytes?: number;
  /** 1 or 2 snapshots kept (default 2; see compaction.ts). */
  readonly retainSnapshots?: number;
  /** Wait after a failed compaction; doubles per failure in a row, up to maxRetryMs. Default 1 min, 30 min. */
  readonly retryMs?: number;
  readonly maxRetryMs?: number;
  readonly log?: StoreLogger;
  /** Where the log's own warnings go (torn tail dropped, migration). Default: through `log`. */
  readonly warn?: (message: string) => void;
  /** Replaces the live snapshot, e.g. with the file-based `compact` in tests. */
  readonly runCompaction?: CompactionRunner;
  /** Test seam: passed to the log. */
  readonly maxBatchBytes?: number;
  /** How long an applied Idempotency-Key is retained (default 24 h), and the clock that ages keys. */
  readonly idempotencyTtlMs?: number;
  readonly clock?: Clock;
  /** The log's group-commit and append durations; passed to it. */
  readonly metrics?: EventLogMetrics;
  /** Where the live snapshot's datasets are encoded when that pays (snapshot-pool.ts); else on the event loop. */
  readonly snapshotPool?: SnapshotPool;
  /** Test seam: the snapshot writer's writes, and the free space of the data directory's file system. */
  readonly snapshotIo?: Partial<SnapshotIo> & { readonly freeBytes?: (dir: string) => Promise<number> };
}

export interface StartReport {
  readonly snapshot: SnapshotInfo | undefined;
  readonly snapshotMs: number;
  readonly replayMs: number;
  readonly framesReplayed: number;
  readonly skipped: string[];
}

/**
 * Picks and loads the snapshot to start from: the newest that verifies and that the log can continue
 * (its position at or after the first segment's base). Undefined means a full replay from frame 0.
 */
async function loadStartSnapshot(dir: string, skipped: string[]): Promise<LoadedSnapshot | undefined> {
  const segments = await listSegments(dir);
  const legacy = segments.length === 0 && hasLegacyLog(dir);
  const firstBase = segments[0]?.base ?? (legacy ? 0 : undefined);
  const snapshots = await listSnapshots(dir);
  for (const snap of [...snapshots].reverse()) {
    if (firstBase !== undefined && snap.position < firstBase) {
      skipped.push(`snapshot ${snap.file} is older than the log's first frame ${firstBase}`);
      continue;
    }
    try {
      return await readSnapshot(snap.file);
    } catch (err) {
      skipped.push(`snapshot ${snap.file} is unusable: ${errorText(err)}`);
    }
  }
  if (firstBase === undefined || firstBase === 0) return undefined;
  throw new Error(
    `Cannot start: the event log in ${path.join(dir, 'log')} starts at frame ${firstBase} (older frames were compacted away), ` +
      `and no snapshot covering them could be loaded${skipped.length > 0 ? ` (${skipped.join('; ')})` : ''}. ` +
      'Restore the data directory (or at least its snapshots/) from a backup.',
  );
}

export class EmbeddedStore {
  readonly projection: MemoryProjection;
  /** The applied Idempotency-Keys: fed with the projection, carried by the snapshots. */
  readonly ledger: MemoryIdempotencyLedger;
  readonly eventLog: FileEventLog;
  private readonly opts: EmbeddedStoreOptions;
  private readonly log: StoreLogger;
  private readonly compactAfterBytes: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  /** Failed runs in a row: the retry waits retryMs × 2^(n−1). */
  private failuresInARow = 0;
  /** Undefined: snapshot the live projection (the default). */
  private readonly runner: CompactionRunner | undefined;
  private readonly stopping = new AbortController();
  /** Position of the newest durable snapshot (0: none). */
  private snapshotPosition = 0;
  private running: Promise<void> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private runs = 0;
  private failures = 0;
  /** The start snapshot's file stays open while datasets are still encoded in it (snapshot.ts): closed at close(). */
  private closeLoadedSnapshot = (): void => undefined;

  private constructor(opts: EmbeddedStoreOptions, projection: MemoryProjection, ledger: MemoryIdempotencyLedger, snapshot: SnapshotInfo | undefined) {
    this.opts = opts;
    this.ledger = ledger;
    this.log = opts.log ?? (() => undefined);
    this.compactAfterBytes = Math.max(1, opts.compactAfterBytes ?? DEFAULT_COMPACT_AFTER_BYTES);
    this.retryMs = opts.retryMs ?? DEFAULT_RETRY_MS;
    this.maxRetryMs = Math.max(this.retryMs, opts.maxRetryMs ?? DEFAULT_MAX_RETRY_MS);
    const snapshotPosition = snapshot?.position ?? 0;
    this.runner = opts.runCompaction;
    this.projection = projection;
    this.snapshotPosition = snapshotPosition;
    const log = this.log;
    this.eventLog = new FileEventLog({
      dir: opts.dir,
      segmentBytes: opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
      onSealed: (segment: SegmentInfo) => {
        log('event log segment sealed', { base: segment.base, frames: segment.frames, bytes: segment.bytes });
        this.maybeCompact();
      },
      warn: opts.warn ?? ((message) => log('event log warning', { detail: message })),
      ...(opts.maxBatchBytes === undefined ? {} : { maxBatchBytes: opts.maxBatchBytes }),
      ...(opts.metrics === undefined ? {} : { metrics: opts.metrics }),
    });
  }

  /** Loads the newest usable snapshot, replays the log after it, and schedules compaction if due. */
  static async open(opts: EmbeddedStoreOptions): Promise<{ store: EmbeddedStore; report: StartReport }> {
    const skipped: string[] = [];
    // Left by a crash mid-snapshot; we hold the data directory's lock, so nobody is writing them.
    const removed = await removeLeftoverTemps(opts.dir);
    const t0 = performance.now();
    const loaded = await loadStartSnapshot(opts.dir, skipped);
    const snapshotMs = performance.now() - t0;
    const projection = new MemoryProjection(loaded?.state ?? initialState());
    const ledger = new MemoryIdempotencyLedger(opts.idempotencyTtlMs ?? hoursToMs(DEFAULT_IDEMPOTENCY_TTL_HOURS), opts.clock ?? { now: () => Date.now() }, loaded?.idempotency);
    const store = new EmbeddedStore(opts, projection, ledger, loaded?.info);
    if (loaded !== undefined) store.closeLoadedSnapshot = loaded.close;
    for (const file of removed) store.log('removed an unfinished snapshot', { file });
    for (const why of skipped) store.log('snapshot skipped', { detail: why });
    const t1 = performance.now();
    try {
      await store.eventLog.start(
        (events) => {
          projection.apply(events);
          ledger.apply(events);
        },
        { from: loaded?.info.position ?? 0 },
      );
    } catch (err) {
      loaded?.close();
      throw err;
    }
    const report: StartReport = {
      snapshot: loaded?.info,
      snapshotMs,
      replayMs: performance.now() - t1,
      framesReplayed: store.eventLog.stats().replayed,
      skipped,
    };
    store.maybeCompact();
    return { store, report };
  }

  /** Bytes in sealed segments that no snapshot covers yet. */
  uncompactedBytes(): number {
    let bytes = 0;
    for (const s of this.eventLog.sealedSegments()) if (s.base >= this.snapshotPosition) bytes += s.bytes;
    return bytes;
  }

  stats(): { snapshotPosition: number; uncompactedBytes: number; compacting: boolean; runs: number; failures: number } {
    return { snapshotPosition: this.snapshotPosition, uncompactedBytes: this.uncompactedBytes(), compacting: this.running !== undefined, runs: this.runs, failures: this.failures };
  }

  /** Starts a compaction run if one is due and none is running. */
  maybeCompact(): void {
    // A pending retry timer means the last run failed: wait it out rather than fail again at every roll.
    if (this.closed || this.running !== undefined || this.retryTimer !== undefined) return;
    if (this.uncompactedBytes() < this.compactAfterBytes) return;
    void this.compactNow(); // never rejects: failures are logged and retried inside
  }

  /** Starts a run now (if none is running) over every sealed segment; resolves when it has finished. */
  compactNow(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running !== undefined) return this.running;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // A live snapshot is as of every frame so far; a file-based run covers the sealed segments only.
    const stats = this.eventLog.stats();
    const target = this.runner === undefined ? stats.position : stats.activeBase;
    if (target <= this.snapshotPosition) return Promise.resolve();
    const job: CompactionJob = {
      dir: this.opts.dir,
      sealedEnd: target,
      ...(this.opts.retainSnapshots === undefined ? {} : { retainSnapshots: this.opts.retainSnapshots }),
      ...(this.opts.idempotencyTtlMs === undefined ? {} : { idempotencyTtlMs: this.opts.idempotencyTtlMs }),
    };
    this.log('compaction started', { from: this.snapshotPosition, to: target, uncompacted_bytes: this.uncompactedBytes() });
    const run = (async () => {
      let failed = false;
      try {
        await this.checkFreeSpace();
        // Appends went on while the free space was checked: a live snapshot is as of the log's position now.
        const result = await (this.runner === undefined ? this.snapshotLive({ ...job, sealedEnd: this.eventLog.stats().position }) : this.runner(job));
        this.runs += 1;
        this.failuresInARow = 0;
        if (result !== undefined) {
          this.snapshotPosition = Math.max(this.snapshotPosition, result.snapshot.position);
          this.eventLog.forgetSealedBefore(result.deletedBefore);
          for (const w of result.warnings) this.log('compaction warning', { detail: w });
          this.log('compaction finished', {
            position: result.snapshot.position,
            from: result.from,
            ms: Math.round(result.ms),
            datasets: result.snapshot.datasets,
            records: result.snapshot.records,
            snapshot_bytes: result.snapshot.bytes,
            segments_folded: result.segmentsFolded,
            frames_folded: result.framesFolded,
            segments_deleted: result.segmentsDeleted.length,
            snapshots_deleted: result.snapshotsDeleted.length,
          });
        }
      } catch (err) {
        this.failures += 1;
        this.failuresInARow += 1;
        failed = true;
        if (!this.closed) {
          const retryMs = Math.min(this.maxRetryMs, this.retryMs * 2 ** Math.min(30, this.failuresInARow - 1));
          this.log('compaction failed; will retry', { error: errorText(err), retry_ms: retryMs, failures_in_a_row: this.failuresInARow });
          this.retryTimer = setTimeout(() => {
            this.retryTimer = undefined;
            this.maybeCompact();
          }, retryMs);
          this.retryTimer.unref();
        }
      } finally {
        this.running = undefined;
      }
      // More may have been sealed meanwhile. After a failure, wait for the retry timer or the next roll.
      if (!failed) this.maybeCompact();
    })();
    this.running = run;
    return run;
  }

  /** Bytes a snapshot of the live state is expected to take (an estimate, see estimateSnapshotBytes). */
  expectedSnapshotBytes(): number {
    return estimateSnapshotBytes(this.projection.currentState()) + estimateKeyBytes(this.ledger.entries());
  }

  /** Throws, without writing anything, when the snapshot would not fit with a quarter to spare. */
  private async checkFreeSpace(): Promise<void> {
    const expected = this.expectedSnapshotBytes();
    const needed = Math.ceil(expected * 1.25) + 64 * 1024;
    const dir = snapshotDir(this.opts.dir);
    await fsp.mkdir(dir, { recursive: true });
    const free = await (this.opts.snapshotIo?.freeBytes ?? freeBytes)(dir);
    if (free < needed) {
      throw new Error(
        `not enough free disk space for a snapshot in ${dir}: ${free} bytes free, the snapshot is expected to take about ${expected} ` +
          `bytes (${needed} wanted, with margin); free some space, the next retry checks again`,
      );
    }
  }

  /**
   * The default compaction: capture the projection now (synchronously, so it is exactly the fold of the
   * frames before `job.sealedEnd`, the log's position), write it durably, prune what it covers.
   */
  private async snapshotLive(job: CompactionJob): Promise<CompactionResult | undefined> {
    const t0 = performance.now();
    const from = this.snapshotPosition;
    if (this.eventLog.stats().position !== job.sealedEnd) throw new Error('the log moved on before the snapshot was captured');
    const captured = captureState(this.projection.currentState(), this.ledger.entries());
    const pool = this.opts.snapshotPool;
    const io = pool === undefined ? this.opts.snapshotIo : { ...this.opts.snapshotIo, encodeDataset: (d: CapturedDataset) => pool.encode(d, encodeDataset) };
    const snapshot = await writeSnapshot(job.dir, job.sealedEnd, captured, undefined, this.stopping.signal, io);
    await verifySnapshot(snapshot);
    const pruned = await pruneCovered(job.dir, snapshot.position, from > 0 ? from : undefined, job.retainSnapshots === 1 ? 1 : 2);
    return {
      snapshot,
      from,
      segmentsFolded: 0,
      framesFolded: job.sealedEnd - from,
      segmentsDeleted: pruned.segmentsDeleted,
      deletedBefore: pruned.segmentsDeleted.length > 0 ? pruned.deletedBefore : 0,
      snapshotsDeleted: pruned.snapshotsDeleted,
      warnings: [],
      ms: performance.now() - t0,
    };
  }

  /** Stops compaction (a snapshot being written is abandoned: safe at any step) and closes the log. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.stopping.abort();
    await this.running?.catch(() => undefined);
    await this.eventLog.close();
    this.closeLoadedSnapshot();
  }
}

import * as fs from 'node:fs';
import type { EventListener } from '@pushbase/contracts';
import { DomainError } from '@pushbase/domain';
import type { EventLogMetrics } from '@pushbase/metrics';
import { callback, closeFd, openFile, syncDirectory } from '@pushbase/data-dir';
import { errorText } from './frames';
import { batchHeader, FRAME_PREFIX_BYTES } from './log-records';
import { segmentDir, segmentFile, type ActiveSegment, type SegmentInfo } from './log-segments';

/*
 * The event log's write path: group commit (one writev and one fdatasync per batch of queued appends),
 * rolling to a new segment, and what a failed write leaves behind. The log (file-event-log.ts) queues the
 * appends; this writes them. Why it works this way: docs/embedded-storage.md → The event log.
 */

/** The file operations of the append path. Injectable so tests can count syncs and inject faults. */
export interface EventLogIo {
  /** Positional write of the buffers; may write fewer bytes than asked (the caller continues). */
  writev(fd: number, buffers: readonly Buffer[], position: number): Promise<number>;
  fdatasync(fd: number): Promise<void>;
  ftruncate(fd: number, length: number): Promise<void>;
  fsync(fd: number): Promise<void>;
}

export const nodeIo: EventLogIo = {
  writev: (fd, buffers, position) => callback<number>((done) => fs.writev(fd, buffers, position, done)),
  fdatasync: (fd) => callback<void>((done) => fs.fdatasync(fd, done)),
  ftruncate: (fd, length) => callback<void>((done) => fs.ftruncate(fd, length, done)),
  fsync: (fd) => callback<void>((done) => fs.fsync(fd, done)),
};

export const unavailable = (message: string): DomainError => new DomainError('unavailable', message);

/** One append() waiting for its group commit. */
export interface Pending<E> {
  readonly events: readonly E[];
  /** The frame's length prefix inside its batch. */
  readonly prefix: Buffer;
  readonly payload: Buffer;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  /** performance.now() when append() queued it. */
  readonly queuedAt: number;
}

export interface LogWriterOptions {
  readonly dir: string;
  readonly maxBatchBytes: number;
  readonly segmentBytes: number;
  readonly onSealed: ((segment: SegmentInfo) => void) | undefined;
  readonly warn: (message: string) => void;
  readonly onFatal: (message: string) => void;
  readonly io: EventLogIo;
  readonly metrics: EventLogMetrics | undefined;
}

/** Skips the first `n` bytes of a buffer list (after a short write). */
function dropBytes(buffers: readonly Buffer[], n: number): Buffer[] {
  let rest = n;
  let i = 0;
  while (i < buffers.length && rest >= buffers[i]!.length) rest -= buffers[i++]!.length;
  const out = buffers.slice(i);
  if (rest > 0 && out.length > 0) out[0] = out[0]!.subarray(rest);
  return out;
}

export class LogWriter<E> {
  /** The segment appends go to; set once recovery opened it. */
  active: ActiveSegment | undefined;
  /** Sealed segments still on disk (as far as this log knows), oldest first. */
  sealed: SegmentInfo[] = [];
  /** Called for every committed frame, in log order, before its append resolves. */
  listener: EventListener<E> | undefined;
  /** Why the log refuses appends until restart; set when a failed batch could not be rolled back. */
  broken: string | undefined;
  /** fdatasync calls made by group commits. */
  syncs = 0;
  private queue: Pending<E>[] = [];
  /** The running writer loop, if any. At most one exists, so at most one write/fsync is in flight. */
  private draining: Promise<void> | undefined;

  constructor(private readonly opts: LogWriterOptions) {}

  get queued(): number {
    return this.queue.length;
  }

  /** Queues an append; `write` starts the writer (false while start() still replays). */
  enqueue(pending: Pending<E>, write: boolean): void {
    this.queue.push(pending);
    if (write) this.kick();
  }

  kick(): void {
    this.draining ??= this.drain();
  }

  failQueued(error: DomainError): void {
    for (const p of this.queue.splice(0)) p.reject(error);
  }

  /** Resolves once the writer loop has stopped (nothing queued, or the log broke). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /** Closes the active segment; the last fsync covers nothing new but costs little. */
  async closeActive(): Promise<void> {
    const fd = this.active?.fd;
    if (fd === undefined) return;
    try {
      if (this.broken === undefined) await this.opts.io.fsync(fd);
    } finally {
      await closeFd(fd);
    }
  }

  private async drain(): Promise<void> {
    // Let every append issued in this turn of the event loop join the first batch; later ones gather while
    // the write+fsync below is in flight and form the next batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queue.length > 0 && this.broken === undefined) {
      await this.commit(this.takeBatch());
    }
    this.draining = undefined; // synchronously after seeing the queue empty: no append can slip in between
  }

  private takeBatch(): Pending<E>[] {
    let bytes = 0;
    let n = 0;
    for (const p of this.queue) {
      const frameBytes = FRAME_PREFIX_BYTES + p.payload.length;
      if (n > 0 && bytes + frameBytes > this.opts.maxBatchBytes) break;
      bytes += frameBytes;
      n += 1;
    }
    return this.queue.splice(0, n);
  }

  /**
   * Seals the active segment and opens a new one at the next frame index, its directory entry fsync'd
   * before anything is written to it. On failure the new file is removed again and the old segment stays
   * active; if even that fails the log is broken (docs/embedded-storage.md → A failed write).
   */
  private async roll(): Promise<void> {
    const { dir, warn, onSealed } = this.opts;
    const old = this.active!;
    const base = old.base + old.frames;
    const file = segmentFile(dir, base);
    let fd: number | undefined;
    try {
      fd = await openFile(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC);
      await syncDirectory(segmentDir(dir));
    } catch (err) {
      if (fd !== undefined) await closeFd(fd).catch(() => undefined);
      try {
        await fs.promises.rm(file, { force: true });
        await syncDirectory(segmentDir(dir));
      } catch (rmErr) {
        this.broken = `The event log is broken until restart: a new segment ${file} could not be created (${errorText(err)}) nor removed (${errorText(rmErr)})`;
        warn(`pushbase: event log: ${this.broken}`);
      }
      throw err;
    }
    this.active = { base, file, fd, size: 0, frames: 0 };
    const sealed: SegmentInfo = { base: old.base, frames: old.frames, bytes: old.size, file: old.file };
    this.sealed.push(sealed);
    await closeFd(old.fd).catch(() => undefined); // its data were fdatasync'd batch by batch
    onSealed?.(sealed);
  }

  /** Writes and fsyncs one batch, then delivers and resolves it; on failure rolls back. Never throws. */
  private async commit(batch: Pending<E>[]): Promise<void> {
    const { io, metrics } = this.opts;
    if (this.active!.size >= this.opts.segmentBytes && this.active!.frames > 0) {
      try {
        await this.roll();
      } catch (err) {
        const error = unavailable(`The event log could not start a new segment: ${errorText(err)}`);
        for (const p of batch) p.reject(error);
        if (this.broken !== undefined) this.failQueued(unavailable(this.broken));
        return;
      }
    }
    const active = this.active!;
    const fd = active.fd;
    const position = active.size;
    const body: Buffer[] = [];
    for (const p of batch) body.push(p.prefix, p.payload);
    // One record for the whole commit, its crc over all of it: see log-records.ts.
    let buffers: Buffer[] = [batchHeader(active.base + active.frames, batch.length, body), ...body];
    const bytes = buffers.reduce((n, b) => n + b.length, 0);
    const started = performance.now();
    let synced: number;
    try {
      let written = 0;
      while (written < bytes) {
        const n = await io.writev(fd, buffers, position + written);
        if (n <= 0) throw new Error('write made no progress');
        written += n;
        if (written < bytes) buffers = dropBytes(buffers, n);
      }
      // fdatasync is enough: it also flushes the file size, which reading the new bytes back depends on.
      await io.fdatasync(fd);
      synced = performance.now();
      this.syncs += 1;
    } catch (err) {
      await this.rollback(batch, position, err);
      return;
    }
    active.size = position + bytes;
    active.frames += batch.length;
    // Durable: the listener sees every frame, in log order, before any of the appends resolves.
    const failures: unknown[] = [];
    for (const p of batch) {
      try {
        this.listener?.(p.events);
        failures.push(undefined);
      } catch (err) {
        // The events are durable (and will be replayed at the next start); the caller still learns that
        // applying them failed. Not `unavailable`: a retry would append them twice.
        failures.push(err);
      }
    }
    batch.forEach((p, i) => (failures[i] === undefined ? p.resolve() : p.reject(failures[i])));
    if (metrics !== undefined) {
      metrics.commit(synced - started, batch.length);
      for (const p of batch) metrics.append(synced - p.queuedAt);
    }
  }

  /**
   * A failed write or fsync: the batch is never retried nor acknowledged, its bytes are cut back to the last
   * committed size, and if even that fails the log is broken and the process stops without answering.
   * Why: docs/embedded-storage.md → A failed write.
   */
  private async rollback(batch: Pending<E>[], position: number, cause: unknown): Promise<void> {
    const { io, warn, onFatal } = this.opts;
    const active = this.active!;
    try {
      await io.ftruncate(active.fd, position);
      await io.fsync(active.fd);
    } catch (err) {
      this.broken =
        `The event log is broken until restart: a failed write (${errorText(cause)}) could not be rolled back ` +
        `(${errorText(err)})`;
      warn(`pushbase: event log ${active.file}: ${this.broken}`);
      // Appends queued behind it were never written, so their refusal is true; the batch's own fate is
      // unknown, so it gets no answer at all.
      this.failQueued(unavailable(this.broken));
      onFatal(this.broken);
      return;
    }
    const error = unavailable(`The event log could not store the events: ${errorText(cause)}`);
    for (const p of batch) p.reject(error);
  }
}

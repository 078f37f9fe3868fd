import * as fs from 'node:fs';
import * as path from 'node:path';
import { decodeEventValue, encodeEventBatch, EventDecodeError, type EventListener, type EventLog } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import type { EventLogMetrics } from '@pushbase/metrics';
import { failSpan, pushbaseTracer, SpanKind } from '@pushbase/telemetry';
import { callback, closeFd, openFile, syncDirectory } from '@pushbase/data-dir';
import { errorText, FRAME_HEADER_BYTES, fstatSize, listPositioned, MAX_FRAME_BYTES, plausibleLength, positionName, READ_CHUNK_BYTES, readFully } from './frames';
import { batchHeader, findValidBatch, FRAME_PREFIX_BYTES, framePrefix, scanLog, type Decode, type LogScan } from './log-records';
import { crc32 } from 'node:zlib';

export { FRAME_HEADER_BYTES, MAX_FRAME_BYTES } from './frames';

/*
 * The embedded mode's durable event log: numbered segment files, one record per group commit (one crc over
 * it), one frame per append() so a multi-event append is atomic. Only the last segment may have a torn
 * tail; anything else damaged stops the start. Layout, positions, rolling and group commit:
 * docs/embedded-storage.md → The event log.
 */

export const SEGMENT_DIR = 'log';
export const SEGMENT_SUFFIX = '.seg';
export const LEGACY_LOG_FILE = 'events.log';
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024;

/** A legacy single-file log to migrate: a file. A directory of that name is the guard of data-dir-format.ts. */
export const hasLegacyLog = (dir: string): boolean => fs.statSync(path.join(dir, LEGACY_LOG_FILE), { throwIfNoEntry: false })?.isFile() === true;

export const segmentDir = (dir: string): string => path.join(dir, SEGMENT_DIR);
export const segmentFile = (dir: string, base: number): string => path.join(segmentDir(dir), positionName(base, SEGMENT_SUFFIX));

/** The segment files of a data directory, by ascending base (the global index of their first frame). */
export async function listSegments(dir: string): Promise<{ base: number; file: string }[]> {
  return (await listPositioned(segmentDir(dir), SEGMENT_SUFFIX)).map((s) => ({ base: s.position, file: s.file }));
}

/** The file operations of the append path. Injectable so tests can count syncs and inject faults. */
export interface EventLogIo {
  /** Positional write of the buffers; may write fewer bytes than asked (the caller continues). */
  writev(fd: number, buffers: readonly Buffer[], position: number): Promise<number>;
  fdatasync(fd: number): Promise<void>;
  ftruncate(fd: number, length: number): Promise<void>;
  fsync(fd: number): Promise<void>;
}

export interface SegmentInfo {
  /** Global index of the segment's first frame (its name). */
  readonly base: number;
  readonly frames: number;
  readonly bytes: number;
  readonly file: string;
}

export interface FileEventLogOptions {
  /** The data directory; created when missing. Segments live in `<dir>/log/`. */
  readonly dir: string;
  /** Upper bound on the bytes of one group-commit write. A single larger frame is still written, alone. */
  readonly maxBatchBytes?: number;
  /** A segment holding at least this many bytes is sealed before the next batch. Default 64 MiB. */
  readonly segmentBytes?: number;
  /** Called after a segment was sealed (the new one exists and is durable). Must not throw. */
  readonly onSealed?: (segment: SegmentInfo) => void;
  /** Where start() reports a dropped torn tail and where a broken log says so. Default: stderr. */
  readonly warn?: (message: string) => void;
  /** Test seam: replaces some of the append path's file operations. */
  readonly io?: Partial<EventLogIo>;
  /**
   * Called when the log can no longer tell which appends are stored (a failed write could not be rolled
   * back). Default: print the reason and exit the process at once (exit code 74), so that no client is
   * told "refused" about a write a restart might replay. Tests replace it.
   */
  readonly onFatal?: (message: string) => void;
  /** Group commits' and appends' durations (docs/metrics.md); none when not given. */
  readonly metrics?: EventLogMetrics;
}

/**
 * How a log's events become a frame's payload (a JSON array) and back. Dataset events by default; the
 * account log (account-log.ts) is this same log, same format and recovery, over account events.
 * `decode` throws EventDecodeError for a value that is no event this reader knows.
 */
export interface LogCodec<E> {
  encode(events: readonly E[]): Buffer;
  decode(value: unknown): E;
}

export const DATASET_EVENT_CODEC: LogCodec<DatasetEvent> = { encode: encodeEventBatch, decode: (value) => decodeEventValue(value) };

export interface FileEventLogCodecOptions<E> extends FileEventLogOptions {
  readonly codec: LogCodec<E>;
}

export interface FileEventLogStartOptions {
  /**
   * Global index of the first frame to deliver: the position of the snapshot the caller loaded. Frames
   * below it are not delivered, and segments wholly below it are not even read. Default 0.
   */
  readonly from?: number;
}

export interface FileEventLogStats {
  /** Committed (fsync'd) bytes of the live segments. */
  readonly bytes: number;
  /** Committed frames held by the live segments, i.e. append() calls, including those replayed at start. */
  readonly frames: number;
  /** Global index the next frame will get: every frame ever committed, deleted segments included. */
  readonly position: number;
  /** Global index of the first frame still held (the base of the oldest live segment). */
  readonly firstPosition: number;
  /** Base of the segment appends go to; every frame before it is in a sealed segment. */
  readonly activeBase: number;
  /** Live segment files, the active one included. */
  readonly segments: number;
  /** Frames delivered by start()'s replay. */
  readonly replayed: number;
  /** fdatasync calls made by group commits since start. */
  readonly syncs: number;
}

/** start() found a bad frame followed by a valid one, or segments that do not line up. */
export class EventLogCorruptError extends Error {
  override readonly name = 'EventLogCorruptError';
}

const nodeIo: EventLogIo = {
  writev: (fd, buffers, position) => callback<number>((done) => fs.writev(fd, buffers, position, done)),
  fdatasync: (fd) => callback<void>((done) => fs.fdatasync(fd, done)),
  ftruncate: (fd, length) => callback<void>((done) => fs.ftruncate(fd, length, done)),
  fsync: (fd) => callback<void>((done) => fs.fsync(fd, done)),
};

const unavailable = (message: string): DomainError => new DomainError('unavailable', message);

/** Parses a log frame's payload as far as the frame format goes: a JSON array. */
function parseFrame(payload: Buffer): { array?: unknown[]; why?: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch {
    return { why: 'payload is not JSON' };
  }
  if (!Array.isArray(parsed)) return { why: 'payload is not an array' };
  return { array: parsed };
}

/**
 * A frame's events, read by the envelope codec every log shares (@pushbase/contracts event-codec). A frame
 * that is a JSON array but holds an event this reader cannot read (a newer schema_version, an unknown type)
 * passed its crc, so it is no torn write: it throws, and start() stops with nothing cut, instead of
 * returning a `why` that would let a last frame be dropped as a torn tail, or handing the fold an event it
 * does not know.
 */
function decodeEvents<E>(codec: LogCodec<E>, payload: Buffer, where: () => string): { events?: E[]; why?: string } {
  const { array, why } = parseFrame(payload);
  if (array === undefined) return { why: why ?? 'payload is not an array' };
  try {
    return { events: array.map((value) => codec.decode(value)) };
  } catch (err) {
    if (err instanceof EventDecodeError) {
      throw new EventLogCorruptError(`${where()} holds an event this pushbase cannot read: ${err.message}. Refusing to start; nothing was cut.`);
    }
    throw err;
  }
}

/** Decodes the frames of one segment; `where` names it in the error an unreadable event raises. */
const decodeFrameOf =
  <E>(where: string, codec: LogCodec<E>): Decode<E[]> =>
  (payload, index) => {
    const decoded = decodeEvents(codec, payload, () => `Frame ${index} of ${where}`);
    return decoded.events === undefined ? { why: decoded.why ?? 'not events' } : { value: decoded.events };
  };

/**
 * Reads a sealed segment whole and strictly: every frame must be good. Delivers the frames whose global
 * index is ≥ `from`. Used by the file-based compaction (compaction.ts); returns the frame count.
 */
export async function readSealedSegment(file: string, base: number, from: number, deliver: (events: DatasetEvent[]) => void): Promise<number> {
  const fd = await openFile(file, fs.constants.O_RDONLY);
  try {
    const size = await fstatSize(fd);
    const scan = await scanLog(fd, size, base, decodeFrameOf(`sealed segment ${file}`, DATASET_EVENT_CODEC), (events, index) => {
      if (index >= from) deliver(events);
    });
    if (scan.end !== size) {
      throw new EventLogCorruptError(`Sealed segment ${file} is corrupt: ${scan.why ?? 'bad frame'} at byte ${scan.end} of ${size}`);
    }
    return scan.frames;
  } finally {
    await closeFd(fd);
  }
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

/**
 * The first offset in [from, size) where a whole valid v1 frame (good crc, JSON array) starts, if any: in a
 * segment written before the batch format, tells a torn tail (nothing valid after the bad frame) from
 * corruption inside acknowledged data, even when the bad frame's own length field is what got damaged. Cheap in practice: almost every offset fails the length
 * test at once.
 */
async function findValidFrame(fd: number, from: number, size: number): Promise<number | undefined> {
  for (let chunkPos = from; chunkPos + FRAME_HEADER_BYTES <= size; chunkPos += READ_CHUNK_BYTES) {
    // 7 bytes of overlap so a header straddling two chunks is seen.
    const chunk = await readFully(fd, chunkPos, Math.min(READ_CHUNK_BYTES + FRAME_HEADER_BYTES - 1, size - chunkPos));
    const last = Math.min(READ_CHUNK_BYTES - 1, chunk.length - FRAME_HEADER_BYTES);
    for (let i = 0; i <= last; i++) {
      const at = chunkPos + i;
      const length = chunk.readUInt32LE(i);
      if (!plausibleLength(length) || at + FRAME_HEADER_BYTES + length > size) continue;
      const start = i + FRAME_HEADER_BYTES;
      const payload =
        start + length <= chunk.length ? chunk.subarray(start, start + length) : await readFully(fd, at + FRAME_HEADER_BYTES, length);
      if (crc32(payload) === chunk.readUInt32LE(i + 4) && parseFrame(payload).array !== undefined) return at;
    }
  }
  return undefined;
}

interface Pending<E> {
  readonly events: readonly E[];
  /** The frame's length prefix inside its batch. */
  readonly prefix: Buffer;
  readonly payload: Buffer;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  /** performance.now() when append() queued it. */
  readonly queuedAt: number;
}

interface Active {
  readonly base: number;
  readonly file: string;
  readonly fd: number;
  size: number;
  frames: number;
}

type State = 'new' | 'starting' | 'open' | 'closing' | 'closed';

export class FileEventLog<E = DatasetEvent> implements EventLog<E> {
  readonly dir: string;
  private readonly codec: LogCodec<E>;
  private readonly maxBatchBytes: number;
  private readonly tracer = pushbaseTracer();
  private readonly segmentBytes: number;
  private readonly onSealed: ((segment: SegmentInfo) => void) | undefined;
  private readonly warn: (message: string) => void;
  private readonly onFatal: (message: string) => void;
  private readonly io: EventLogIo;
  private readonly metrics: EventLogMetrics | undefined;

  private state: State = 'new';
  private active: Active | undefined;
  /** Sealed segments still on disk (as far as this log knows), oldest first. */
  private sealed: SegmentInfo[] = [];
  private listener: EventListener<E> | undefined;
  /** Why the log refuses appends until restart; set when a failed batch could not be rolled back. */
  private broken: string | undefined;
  private queue: Pending<E>[] = [];
  /** The running writer loop, if any. At most one exists, so at most one write/fsync is in flight. */
  private draining: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  /** Set synchronously by close(): from then on append() rejects. */
  private stopping = false;
  private replayed = 0;
  private syncs = 0;

  /** Dataset events unless `codec` says otherwise (then E is the codec's event type). */
  constructor(opts: FileEventLogOptions | FileEventLogCodecOptions<E>) {
    this.dir = opts.dir;
    // Without a codec the log is a log of dataset events: E is DatasetEvent (the default type argument).
    this.codec = 'codec' in opts ? opts.codec : (DATASET_EVENT_CODEC as unknown as LogCodec<E>);
    // Capped so that a batch's body always fits what the start-up scan accepts (log-records.ts).
    this.maxBatchBytes = Math.min(MAX_FRAME_BYTES, Math.max(1, opts.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES));
    this.segmentBytes = Math.max(1, opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES);
    this.onSealed = opts.onSealed;
    this.metrics = opts.metrics;
    this.warn = opts.warn ?? ((message) => void process.stderr.write(`${message}\n`));
    this.onFatal =
      opts.onFatal ??
      ((message) => {
        process.stderr.write(`pushbase: fatal: ${message}\n`);
        process.exit(74); // EX_IOERR
      });
    this.io = { ...nodeIo, ...opts.io };
  }

  /** The segment appends go to (after start). */
  get file(): string {
    return this.active?.file ?? segmentFile(this.dir, 0);
  }

  stats(): FileEventLogStats {
    const active = this.active;
    const sealedBytes = this.sealed.reduce((n, s) => n + s.bytes, 0);
    const sealedFrames = this.sealed.reduce((n, s) => n + s.frames, 0);
    const activeBase = active?.base ?? 0;
    return {
      bytes: sealedBytes + (active?.size ?? 0),
      frames: sealedFrames + (active?.frames ?? 0),
      position: activeBase + (active?.frames ?? 0),
      firstPosition: this.sealed[0]?.base ?? activeBase,
      activeBase,
      segments: this.sealed.length + (active === undefined ? 0 : 1),
      replayed: this.replayed,
      syncs: this.syncs,
    };
  }

  /** The sealed segments this log knows of, oldest first. */
  sealedSegments(): readonly SegmentInfo[] {
    return this.sealed;
  }

  /** Compaction deleted the sealed segments that end at or before `position`: forget them. */
  forgetSealedBefore(position: number): void {
    this.sealed = this.sealed.filter((s) => s.base + s.frames > position);
  }

  start(listener: EventListener<E>, opts: FileEventLogStartOptions = {}): Promise<void> {
    if (this.state !== 'new') return Promise.reject(new Error(`FileEventLog.start: the log is ${this.state}`));
    this.state = 'starting';
    this.listener = listener;
    this.starting = this.open(listener, opts.from ?? 0);
    return this.starting;
  }

  append(events: readonly E[], encoded?: Uint8Array): Promise<void> {
    if (this.broken !== undefined) return Promise.reject(unavailable(this.broken));
    if (this.stopping) return Promise.reject(unavailable('The event log is closed'));
    // Appends made while start() replays wait for it; they are written after the replayed frames.
    if (this.state !== 'open' && this.state !== 'starting') {
      return Promise.reject(unavailable(`The event log is ${this.state === 'new' ? 'not started' : 'closed'}`));
    }
    let payload: Buffer;
    try {
      payload =
        encoded === undefined ? this.codec.encode(events) : Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    if (payload.length > MAX_FRAME_BYTES) {
      // No retry could succeed, so this is the request's fault, not an outage (the body limit prevents it).
      return Promise.reject(
        new DomainError('invalid', `The batch is ${payload.length} bytes, over the event log's limit of ${MAX_FRAME_BYTES}`),
      );
    }
    const prefix = framePrefix(payload);
    // From the queue to the group commit's fsync and the listener: a child of the request's span.
    const span = this.tracer.startSpan('event log append', { kind: SpanKind.INTERNAL, attributes: { 'pushbase.events': events.length, 'pushbase.bytes': payload.length } });
    return new Promise<void>((resolve, reject) => {
      const traced = span.isRecording();
      this.queue.push({
        events,
        prefix,
        payload,
        resolve: traced
          ? () => {
              span.end();
              resolve();
            }
          : resolve,
        reject: traced
          ? (err: unknown) => {
              failSpan(span, err);
              reject(err instanceof Error ? err : new Error(String(err)));
            }
          : reject,
        queuedAt: performance.now(),
      });
      if (this.state === 'open') this.kick();
    });
  }

  close(): Promise<void> {
    this.stopping = true;
    this.closing ??= this.shutdown();
    return this.closing;
  }

  // ── start: migrate, replay, repair a torn tail, open for append ──

  private async open(listener: EventListener<E>, from: number): Promise<void> {
    let fd: number | undefined;
    try {
      await fs.promises.mkdir(this.dir, { recursive: true });
      await this.migrateLegacy();
      await fs.promises.mkdir(segmentDir(this.dir), { recursive: true });
      const segments = await listSegments(this.dir);
      if (segments.length === 0) {
        if (from > 0) {
          throw new EventLogCorruptError(
            `Event log ${segmentDir(this.dir)} holds no segment, yet the snapshot loaded is as of frame ${from}: the log's tail is missing`,
          );
        }
        const file = segmentFile(this.dir, 0);
        fd = await openFile(file, fs.constants.O_RDWR | fs.constants.O_CREAT);
        await syncDirectory(segmentDir(this.dir));
        await syncDirectory(this.dir);
        this.active = { base: 0, file, fd, size: 0, frames: 0 };
      } else {
        const first = segments[0]!.base;
        if (from < first) {
          throw new EventLogCorruptError(
            `Event log ${segmentDir(this.dir)} starts at frame ${first}, but replay must start at frame ${from}: the frames in ` +
              'between were compacted away and no snapshot covering them was loaded',
          );
        }
        for (let i = 0; i < segments.length - 1; i++) {
          const seg = segments[i]!;
          const nextBase = segments[i + 1]!.base;
          if (nextBase <= from) {
            // Wholly covered by the snapshot: not read at all (compaction deletes it in time).
            const bytes = (await fs.promises.stat(seg.file)).size;
            this.sealed.push({ base: seg.base, frames: nextBase - seg.base, bytes, file: seg.file });
            continue;
          }
          this.sealed.push(await this.replaySealed(seg.base, seg.file, nextBase, from, listener));
        }
        const last = segments[segments.length - 1]!;
        fd = await openFile(last.file, fs.constants.O_RDWR);
        this.active = await this.replayLast(fd, last.base, last.file, from, listener);
      }
    } catch (err) {
      if (fd !== undefined) await closeFd(fd).catch(() => undefined);
      this.active = undefined;
      this.sealed = [];
      this.state = 'closed';
      this.failQueued(unavailable(`The event log could not start: ${errorText(err)}`));
      throw err;
    }
    this.state = 'open';
    if (this.queue.length > 0) this.kick();
  }

  /** A legacy single-file log becomes segment 0: renamed into place, both directories fsync'd. */
  private async migrateLegacy(): Promise<void> {
    const legacy = path.join(this.dir, LEGACY_LOG_FILE);
    if (!hasLegacyLog(this.dir)) return;
    const segments = await listSegments(this.dir);
    if (segments.length > 0) {
      throw new EventLogCorruptError(
        `Both a legacy event log ${legacy} and segments in ${segmentDir(this.dir)} exist; refusing to guess which holds the ` +
          'history. Move one of them away.',
      );
    }
    await fs.promises.mkdir(segmentDir(this.dir), { recursive: true });
    await syncDirectory(this.dir); // the new log/ entry
    const target = segmentFile(this.dir, 0);
    await fs.promises.rename(legacy, target);
    await syncDirectory(segmentDir(this.dir));
    await syncDirectory(this.dir);
    this.warn(`pushbase: event log: moved the legacy ${legacy} to ${target} (segment 0 of the segmented log)`);
  }

  private async replaySealed(base: number, file: string, nextBase: number, from: number, listener: EventListener<E>): Promise<SegmentInfo> {
    const fd = await openFile(file, fs.constants.O_RDONLY);
    try {
      const size = await fstatSize(fd);
      const scan = await this.replayFrames(fd, size, base, from, listener);
      if (scan.end < size) {
        throw new EventLogCorruptError(
          `Event log segment ${file} is corrupt: ${scan.why ?? 'bad frame'} at byte ${scan.end} of ${size}, in a sealed segment ` +
            '(later segments follow, so this is acknowledged data, not a torn tail). Refusing to start rather than drop acknowledged ' +
            'events; restore the data directory from a backup.',
        );
      }
      if (base + scan.frames !== nextBase) {
        throw new EventLogCorruptError(
          `Event log segment ${file} holds ${scan.frames} frames (${base}..${base + scan.frames - 1}), but the next segment starts at ` +
            `frame ${nextBase}: frames are missing or duplicated. Refusing to start; restore the data directory from a backup.`,
        );
      }
      return { base, frames: scan.frames, bytes: size, file };
    } finally {
      await closeFd(fd);
    }
  }

  private async replayLast(fd: number, base: number, file: string, from: number, listener: EventListener<E>): Promise<Active> {
    const size = await fstatSize(fd);
    const replayed = await this.replayFrames(fd, size, base, from, listener);
    // Checked before any tail is cut: a snapshot beyond the log's last good frame proves that what follows
    // it was acknowledged, so it is not a torn write to drop, and the bytes stay for whoever repairs it.
    if (base + replayed.frames < from) {
      throw new EventLogCorruptError(
        `Event log ${segmentDir(this.dir)} ends at frame ${base + replayed.frames}` +
          `${replayed.end < size ? ` (${replayed.why ?? 'bad frame'} at byte ${replayed.end} of ${file})` : ''}, but the snapshot loaded ` +
          `is as of frame ${from}: acknowledged frames are missing from the log. Refusing to start, nothing was changed; restore the ` +
          'data directory from a backup.',
      );
    }
    if (replayed.end < size) {
      const bad = `${replayed.why ?? 'bad frame'} at byte ${replayed.end}`;
      const later = (await findValidBatch(fd, replayed.end + 1, size, base + replayed.frames + 1)) ?? (await findValidFrame(fd, replayed.end + 1, size));
      if (later !== undefined) {
        throw new EventLogCorruptError(
          `Event log ${file} is corrupt: ${bad}, yet a valid frame follows at byte ${later} (file is ` +
            `${size} bytes). Refusing to start rather than drop acknowledged events; restore it from a backup ` +
            `or cut it at byte ${replayed.end} by hand once you accept losing what follows.`,
        );
      }
      // A torn last write (crash mid-write, or bytes written but never fsync'd): nothing in it was ever
      // acknowledged, so it is dropped, never misread. Cut it off durably before anything is appended.
      await this.io.ftruncate(fd, replayed.end);
      await this.io.fsync(fd);
      this.warn(
        `pushbase: event log ${file}: dropped a torn tail of ${size - replayed.end} bytes (${bad}); ` +
          `truncated from ${size} to ${replayed.end} bytes, keeping ${replayed.frames} frames`,
      );
    }
    return { base, file, fd, size: replayed.end, frames: replayed.frames };
  }

  /**
   * Streams one segment, delivering each good frame at or after `from`; stops at the end or the first bad
   * record. Frames before `from` are not delivered, nor decoded, but their crc is still checked (a torn tail
   * must not hide behind them).
   */
  private replayFrames(fd: number, size: number, base: number, from: number, listener: EventListener<E>): Promise<LogScan> {
    const decode = decodeFrameOf(`the event log in ${segmentDir(this.dir)}`, this.codec);
    // A frame the snapshot covers is checked (its crc, its place) but not decoded: after a compaction the
    // active segment is mostly such frames, and parsing them cost a restart as much as the snapshot itself.
    const skipCovered: Decode<E[]> = (payload, index) => (index < from ? { value: [] } : decode(payload, index));
    return scanLog(fd, size, base, skipCovered, (events, index) => {
      if (index < from) return;
      listener(events);
      this.replayed += 1;
    });
  }

  // ── the writer: group commit ──

  private kick(): void {
    this.draining ??= this.drain();
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
      if (n > 0 && bytes + frameBytes > this.maxBatchBytes) break;
      bytes += frameBytes;
      n += 1;
    }
    return this.queue.splice(0, n);
  }

  /**
   * Seals the active segment and opens a new one at the next frame index. The old segment's frames were all
   * fdatasync'd by their commits; the new file's directory entry is fsync'd before anything is written to it,
   * so after a crash the segments always line up (at worst the last one is empty). If anything fails, the new
   * file is removed again and the old segment stays active; if even that fails the log is broken (an empty
   * stray segment after a still-growing one would make the next start refuse).
   */
  private async roll(): Promise<void> {
    const old = this.active!;
    const base = old.base + old.frames;
    const file = segmentFile(this.dir, base);
    let fd: number | undefined;
    try {
      fd = await openFile(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC);
      await syncDirectory(segmentDir(this.dir));
    } catch (err) {
      if (fd !== undefined) await closeFd(fd).catch(() => undefined);
      try {
        await fs.promises.rm(file, { force: true });
        await syncDirectory(segmentDir(this.dir));
      } catch (rmErr) {
        this.broken = `The event log is broken until restart: a new segment ${file} could not be created (${errorText(err)}) nor removed (${errorText(rmErr)})`;
        this.warn(`pushbase: event log: ${this.broken}`);
      }
      throw err;
    }
    this.active = { base, file, fd, size: 0, frames: 0 };
    const sealed: SegmentInfo = { base: old.base, frames: old.frames, bytes: old.size, file: old.file };
    this.sealed.push(sealed);
    await closeFd(old.fd).catch(() => undefined); // its data were fdatasync'd batch by batch
    this.onSealed?.(sealed);
  }

  /** Writes and fsyncs one batch, then delivers and resolves it; on failure rolls back. Never throws. */
  private async commit(batch: Pending<E>[]): Promise<void> {
    if (this.active!.size >= this.segmentBytes && this.active!.frames > 0) {
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
        const n = await this.io.writev(fd, buffers, position + written);
        if (n <= 0) throw new Error('write made no progress');
        written += n;
        if (written < bytes) buffers = dropBytes(buffers, n);
      }
      // fdatasync is enough: it also flushes the file size, which reading the new bytes back depends on.
      await this.io.fdatasync(fd);
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
    if (this.metrics !== undefined) {
      this.metrics.commit(synced - started, batch.length);
      for (const p of batch) this.metrics.append(synced - p.queuedAt);
    }
  }

  /*
   * A failed write or fsync leaves the batch's bytes in an unknown state: any prefix of them may be on disk,
   * or in the page cache and reach the disk later. Worse, after a failed fsync Linux may already have dropped
   * the dirty pages and marked them clean (errors are reported once per file, the 2018 "fsyncgate"), so
   * retrying the fsync can report success for bytes that were never stored. So we never retry and never
   * acknowledge: the batch is rejected as `unavailable`, and its bytes are cut off (ftruncate + fsync back to
   * the last committed size) so they cannot be replayed later as events the client was told failed, and the
   * next batch starts at a clean frame boundary. Everything before that size was fsync'd successfully earlier,
   * so it stays durable. If even the truncate fails, the file may hold half a batch that a later frame would
   * seal into the middle of the log, so the log declares itself broken and refuses every append (503) until
   * a restart, whose start() drops that torn tail.
   */
  private async rollback(batch: Pending<E>[], position: number, cause: unknown): Promise<void> {
    const active = this.active!;
    try {
      await this.io.ftruncate(active.fd, position);
      await this.io.fsync(active.fd);
    } catch (err) {
      this.broken =
        `The event log is broken until restart: a failed write (${errorText(cause)}) could not be rolled back ` +
        `(${errorText(err)})`;
      this.warn(`pushbase: event log ${active.file}: ${this.broken}`);
      // The batch's frames may sit whole in the file, and the next start would replay them: answering 503
      // would tell clients "refused" about writes that may yet be applied. So stop without an answer (they
      // see the connection drop: an honest "unknown"), as databases stop on a failed fsync; the restart
      // repairs the tail. Appends queued behind it were never written, so their refusal is true.
      this.failQueued(unavailable(this.broken));
      this.onFatal(this.broken);
      return;
    }
    const error = unavailable(`The event log could not store the events: ${errorText(cause)}`);
    for (const p of batch) p.reject(error);
  }

  private failQueued(error: DomainError): void {
    for (const p of this.queue.splice(0)) p.reject(error);
  }

  // ── close ──

  private async shutdown(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined);
    if (this.state === 'open') this.state = 'closing';
    while (this.draining) await this.draining;
    const fd = this.active?.fd;
    this.state = 'closed';
    if (fd === undefined) return;
    try {
      // Every acknowledged batch was already fsync'd; this one covers nothing new but costs little.
      if (this.broken === undefined) await this.io.fsync(fd);
    } finally {
      await closeFd(fd);
    }
  }
}

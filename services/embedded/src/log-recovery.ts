import * as fs from 'node:fs';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { decodeEventValue, encodeEventBatch, EventDecodeError, type EventListener } from '@pushbase/contracts';
import type { DatasetEvent } from '@pushbase/domain';
import { closeFd, openFile, syncDirectory } from '@pushbase/data-dir';
import { FRAME_HEADER_BYTES, fstatSize, plausibleLength, READ_CHUNK_BYTES, readFully } from './frames';
import { findValidBatch, scanLog, type Decode, type LogScan } from './log-records';
import { hasLegacyLog, LEGACY_LOG_FILE, listSegments, segmentDir, segmentFile, type ActiveSegment, type SegmentInfo } from './log-segments';
import type { EventLogIo } from './log-writer';

/*
 * The event log's recovery at start: migrate a legacy single-file log, read and check every segment,
 * deliver the frames the loaded snapshot does not cover, cut a torn tail off the last segment, and refuse
 * to start on anything else damaged. Why a damaged record is a torn tail in one place and corruption in
 * another: docs/embedded-storage.md → The event log.
 */

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

/** start() found a bad frame followed by a valid one, or segments that do not line up. */
export class EventLogCorruptError extends Error {
  override readonly name = 'EventLogCorruptError';
}

/** What recovery reads the log with and reports to. */
export interface Recovery<E> {
  readonly dir: string;
  readonly codec: LogCodec<E>;
  /** Cuts a torn tail (the log's injectable file operations). */
  readonly io: Pick<EventLogIo, 'ftruncate' | 'fsync'>;
  readonly warn: (message: string) => void;
  /** Receives each frame at or after `from`, in log order. */
  readonly listener: EventListener<E>;
  /** Told of each sealed segment once it checked out, oldest first. */
  readonly sealed: (segment: SegmentInfo) => void;
}

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
 * that is a JSON array but holds an event this reader cannot read passed its crc, so it is no torn write:
 * it throws, and start() stops with nothing cut (docs/embedded-storage.md → Recovery at start).
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

/**
 * The first offset in [from, size) where a whole valid v1 frame (good crc, JSON array) starts, if any: tells
 * a torn tail from damage inside acknowledged data in a segment written before the batch format
 * (docs/embedded-storage.md → Recovery at start). Almost every offset fails the length test at once.
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

/**
 * Opens the log in `r.dir` for appending: migrates a legacy log, replays every segment from frame `from`
 * on, cuts a torn tail off the last one, and returns that last segment, open read-write (a new, empty
 * segment 0 when there is none). Throws EventLogCorruptError for anything it will not repair.
 */
export async function recoverLog<E>(r: Recovery<E>, from: number): Promise<ActiveSegment> {
  let fd: number | undefined;
  try {
    await fs.promises.mkdir(r.dir, { recursive: true });
    await migrateLegacy(r);
    await fs.promises.mkdir(segmentDir(r.dir), { recursive: true });
    const segments = await listSegments(r.dir);
    if (segments.length === 0) {
      if (from > 0) {
        throw new EventLogCorruptError(
          `Event log ${segmentDir(r.dir)} holds no segment, yet the snapshot loaded is as of frame ${from}: the log's tail is missing`,
        );
      }
      const file = segmentFile(r.dir, 0);
      fd = await openFile(file, fs.constants.O_RDWR | fs.constants.O_CREAT);
      await syncDirectory(segmentDir(r.dir));
      await syncDirectory(r.dir);
      return { base: 0, file, fd, size: 0, frames: 0 };
    }
    const first = segments[0]!.base;
    if (from < first) {
      throw new EventLogCorruptError(
        `Event log ${segmentDir(r.dir)} starts at frame ${first}, but replay must start at frame ${from}: the frames in ` +
          'between were compacted away and no snapshot covering them was loaded',
      );
    }
    for (let i = 0; i < segments.length - 1; i++) {
      const seg = segments[i]!;
      const nextBase = segments[i + 1]!.base;
      if (nextBase <= from) {
        // Wholly covered by the snapshot: not read at all (compaction deletes it in time).
        const bytes = (await fs.promises.stat(seg.file)).size;
        r.sealed({ base: seg.base, frames: nextBase - seg.base, bytes, file: seg.file });
        continue;
      }
      r.sealed(await replaySealed(r, seg.base, seg.file, nextBase, from));
    }
    const last = segments[segments.length - 1]!;
    fd = await openFile(last.file, fs.constants.O_RDWR);
    return await replayLast(r, fd, last.base, last.file, from);
  } catch (err) {
    if (fd !== undefined) await closeFd(fd).catch(() => undefined);
    throw err;
  }
}

/** A legacy single-file log becomes segment 0: renamed into place, both directories fsync'd. */
async function migrateLegacy<E>(r: Recovery<E>): Promise<void> {
  const legacy = path.join(r.dir, LEGACY_LOG_FILE);
  if (!hasLegacyLog(r.dir)) return;
  const segments = await listSegments(r.dir);
  if (segments.length > 0) {
    throw new EventLogCorruptError(
      `Both a legacy event log ${legacy} and segments in ${segmentDir(r.dir)} exist; refusing to guess which holds the ` +
        'history. Move one of them away.',
    );
  }
  await fs.promises.mkdir(segmentDir(r.dir), { recursive: true });
  await syncDirectory(r.dir); // the new log/ entry
  const target = segmentFile(r.dir, 0);
  await fs.promises.rename(legacy, target);
  await syncDirectory(segmentDir(r.dir));
  await syncDirectory(r.dir);
  r.warn(`pushbase: event log: moved the legacy ${legacy} to ${target} (segment 0 of the segmented log)`);
}

async function replaySealed<E>(r: Recovery<E>, base: number, file: string, nextBase: number, from: number): Promise<SegmentInfo> {
  const fd = await openFile(file, fs.constants.O_RDONLY);
  try {
    const size = await fstatSize(fd);
    const scan = await replayFrames(r, fd, size, base, from);
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

async function replayLast<E>(r: Recovery<E>, fd: number, base: number, file: string, from: number): Promise<ActiveSegment> {
  const size = await fstatSize(fd);
  const replayed = await replayFrames(r, fd, size, base, from);
  // Checked before any tail is cut: a snapshot beyond the log's last good frame proves that what follows
  // it was acknowledged, so it is not a torn write to drop, and the bytes stay for whoever repairs it.
  if (base + replayed.frames < from) {
    throw new EventLogCorruptError(
      `Event log ${segmentDir(r.dir)} ends at frame ${base + replayed.frames}` +
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
    await r.io.ftruncate(fd, replayed.end);
    await r.io.fsync(fd);
    r.warn(
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
function replayFrames<E>(r: Recovery<E>, fd: number, size: number, base: number, from: number): Promise<LogScan> {
  const decode = decodeFrameOf(`the event log in ${segmentDir(r.dir)}`, r.codec);
  // A frame the snapshot covers is checked (its crc, its place) but not decoded: after a compaction the
  // active segment is mostly such frames, so decoding them would cost a restart as much as the snapshot.
  const skipCovered: Decode<E[]> = (payload, index) => (index < from ? { value: [] } : decode(payload, index));
  return scanLog(fd, size, base, skipCovered, (events, index) => {
    if (index < from) return;
    r.listener(events);
  });
}

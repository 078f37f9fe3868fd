import * as fs from 'node:fs';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { callback } from '@pushbase/data-dir';

/*
 * The frame format of snapshots (and of event log segments written before the batch format, which
 * log-records.ts still reads), and the small file helpers both use:
 *
 *   [u32 LE payload length][u32 LE crc32 of the payload][payload = UTF-8 JSON]
 */

/** 8 bytes: payload length, then crc32 of the payload, both u32 little-endian. */
export const FRAME_HEADER_BYTES = 8;
/**
 * The largest payload a frame may claim. Far above any real batch (request bodies are capped at 4 MiB), and
 * below 0x20202020: JSON text never holds a byte under 0x20, so four payload bytes can never read as a
 * plausible length. That keeps the "is there a valid frame after this bad one?" scan free of false hits.
 */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024;
/** `[]` or `{}`, the shortest JSON container. */
const MIN_PAYLOAD_BYTES = 2;
export const READ_CHUNK_BYTES = 1024 * 1024;

export const plausibleLength = (length: number): boolean => length >= MIN_PAYLOAD_BYTES && length <= MAX_FRAME_BYTES;

export const fstatSize = (fd: number): Promise<number> =>
  callback<fs.Stats>((done) => fs.fstat(fd, done)).then((stats) => stats.size);
export const readAt = (fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> =>
  callback<number>((done) => fs.read(fd, buffer, offset, length, position, done));

/** Reads exactly `length` bytes at `position`, or fewer at end of file. */
export async function readFully(fd: number, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let filled = 0;
  while (filled < length) {
    const n = await readAt(fd, buffer, filled, length - filled, position + filled);
    if (n === 0) break;
    filled += n;
  }
  return buffer.subarray(0, filled);
}

/** A frame's header for `payload`. */
export function frameHeader(payload: Buffer): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt32LE(payload.length, 0);
  header.writeUInt32LE(crc32(payload), 4);
  return header;
}

export interface ScanResult {
  /** Offset just after the last good frame. */
  readonly end: number;
  /** Good frames read. */
  readonly frames: number;
  /** Why the scan stopped before `size`, when it did. */
  readonly why?: string;
}

/** Where a frame's payload is in its file, and its (verified) crc32. */
export interface FrameAt {
  readonly offset: number;
  readonly crc: number;
}

/**
 * Streams `size` bytes of a file frame by frame, checking each frame's crc and handing its payload to
 * `onFrame` (a view into a reused buffer: decode it before returning). `onFrame` returns a reason when the
 * payload is not what it should be, which stops the scan like a bad crc does. Stops at the end or the first
 * bad frame; throws only what `onFrame` throws, or an I/O error.
 */
export async function scanFrames(fd: number, size: number, onFrame: (payload: Buffer, frame: FrameAt) => string | undefined): Promise<ScanResult> {
  let buf = Buffer.alloc(0);
  let off = 0; // index in buf of the frame at `pos`
  let pos = 0; // file offset of the next frame
  let readPos = 0; // file offset up to which buf has been filled
  let frames = 0;
  /** Ensures `need` bytes at `off` are buffered (reading ≥ 1 MiB at a time); false when the file ends first. */
  const fill = async (need: number): Promise<boolean> => {
    const have = buf.length - off;
    if (have >= need) return true;
    if (pos + need > size) return false;
    const want = Math.min(Math.max(need, READ_CHUNK_BYTES), size - pos);
    const next = Buffer.allocUnsafe(want);
    buf.copy(next, 0, off);
    let filled = have;
    while (filled < want) {
      const n = await readAt(fd, next, filled, want - filled, readPos);
      if (n === 0) break; // the file shrank under us; treated like a short frame
      filled += n;
      readPos += n;
    }
    buf = next.subarray(0, filled);
    off = 0;
    return filled >= need;
  };
  for (;;) {
    if (pos === size) return { end: pos, frames };
    if (!(await fill(FRAME_HEADER_BYTES))) return { end: pos, frames, why: 'short header' };
    const length = buf.readUInt32LE(off);
    const crc = buf.readUInt32LE(off + 4);
    if (!plausibleLength(length)) return { end: pos, frames, why: `implausible length ${length}` };
    if (!(await fill(FRAME_HEADER_BYTES + length))) return { end: pos, frames, why: 'short payload' };
    const payload = buf.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + length);
    if (crc32(payload) !== crc) return { end: pos, frames, why: 'crc mismatch' };
    const bad = onFrame(payload, { offset: pos + FRAME_HEADER_BYTES, crc });
    if (bad !== undefined) return { end: pos, frames, why: bad };
    frames += 1;
    off += FRAME_HEADER_BYTES + length;
    pos += FRAME_HEADER_BYTES + length;
  }
}

/** Positions are written as 20 zero-padded digits, so names sort like the numbers they hold. */
export const positionName = (position: number, suffix: string): string => `${String(position).padStart(20, '0')}${suffix}`;

/** The files `<dir>/<20 digits><suffix>`, by ascending position; other names are ignored; a missing dir is empty. */
export async function listPositioned(dir: string, suffix: string): Promise<{ position: number; file: string }[]> {
  let names: string[];
  try {
    names = await fs.promises.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: { position: number; file: string }[] = [];
  for (const name of names) {
    if (name.length !== 20 + suffix.length || !name.endsWith(suffix)) continue;
    const digits = name.slice(0, 20);
    if (!/^\d{20}$/.test(digits)) continue;
    const position = Number(digits);
    if (!Number.isSafeInteger(position)) continue;
    out.push({ position, file: path.join(dir, name) });
  }
  return out.sort((a, b) => a.position - b.position);
}

export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

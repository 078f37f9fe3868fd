import { crc32 } from 'node:zlib';
import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES, plausibleLength, READ_CHUNK_BYTES, readAt, readFully } from './frames';

/*
 * The records of the event log's segments: one batch record per group commit, with ONE crc32 over the whole
 * commit, so a torn commit is invalid as a whole and a valid record after a bad one means damage inside
 * acknowledged data; v1 frames (one per append, each with its own crc) are still read. The layout and why:
 * docs/embedded-storage.md → The record layout.
 */

export const BATCH_MAGIC = 0xf2004250;
export const BATCH_HEADER_BYTES = 24;
/** The length prefix of a frame inside a batch. */
export const FRAME_PREFIX_BYTES = 4;
/** A batch holds at most maxBatchBytes of frames, or one frame of up to MAX_FRAME_BYTES. */
export const MAX_BATCH_BODY_BYTES = 2 * (MAX_FRAME_BYTES + FRAME_PREFIX_BYTES);

const MAGIC_BYTES = Buffer.from([0x50, 0x42, 0x00, 0xf2]);

/** The length prefix of one frame in a batch. */
export function framePrefix(payload: Buffer): Buffer {
  const prefix = Buffer.allocUnsafe(FRAME_PREFIX_BYTES);
  prefix.writeUInt32LE(payload.length, 0);
  return prefix;
}

/** The header of a batch whose body is `body` (the frames' prefixes and payloads, in order). */
export function batchHeader(firstIndex: number, frames: number, body: readonly Buffer[]): Buffer {
  const header = Buffer.allocUnsafe(BATCH_HEADER_BYTES);
  header.writeUInt32LE(BATCH_MAGIC, 0);
  header.writeUInt32LE(body.reduce((n, b) => n + b.length, 0), 4);
  header.writeUInt32LE(frames, 8);
  header.writeUInt32LE(firstIndex % 2 ** 32, 12);
  header.writeUInt32LE(Math.floor(firstIndex / 2 ** 32), 16);
  let crc = crc32(header.subarray(0, 20));
  for (const b of body) crc = crc32(b, crc);
  header.writeUInt32LE(crc, 20);
  return header;
}

/** Forward-only buffered reads of one file: `view(pos, n)` is valid until the next call. */
class Reader {
  private buf = Buffer.alloc(0);
  private bufPos = 0;
  constructor(
    private readonly fd: number,
    private readonly size: number,
  ) {}

  /** The `n` bytes at `pos`, or undefined when the file ends first. */
  async view(pos: number, n: number): Promise<Buffer | undefined> {
    if (pos + n > this.size) return undefined;
    if (pos >= this.bufPos && pos + n <= this.bufPos + this.buf.length) return this.buf.subarray(pos - this.bufPos, pos - this.bufPos + n);
    const want = Math.min(Math.max(n, READ_CHUNK_BYTES), this.size - pos);
    const next = Buffer.allocUnsafe(want);
    let filled = 0;
    if (pos >= this.bufPos && pos < this.bufPos + this.buf.length) filled = this.buf.copy(next, 0, pos - this.bufPos);
    while (filled < want) {
      const got = await readAt(this.fd, next, filled, want - filled, pos + filled);
      if (got === 0) break; // the file shrank under us: treated like a short record
      filled += got;
    }
    this.buf = next.subarray(0, filled);
    this.bufPos = pos;
    return filled >= n ? this.buf.subarray(0, n) : undefined;
  }
}

export interface LogScan {
  /** Offset just after the last good record. */
  readonly end: number;
  /** Frames in the good records. */
  readonly frames: number;
  /** Why the scan stopped before the end of the file, when it did. */
  readonly why?: string;
}

/** What a frame's payload (global frame number `index`) decodes to, or why it is not a frame of events. */
export type Decode<T> = (payload: Buffer, index: number) => { value: T; why?: undefined } | { value?: undefined; why: string };

/**
 * Reads the records of a segment whose first frame has global index `base`, from the start to the first bad
 * record or the end. Every frame of a record is decoded before any of them is delivered, so a record is
 * delivered whole or not at all. Throws only I/O errors.
 */
export async function scanLog<T>(fd: number, size: number, base: number, decode: Decode<T>, deliver: (value: T, index: number) => void): Promise<LogScan> {
  const reader = new Reader(fd, size);
  let pos = 0;
  let frames = 0;
  let batches = false;
  const stop = (why: string): LogScan => ({ end: pos, frames, why });
  while (pos < size) {
    const head = await reader.view(pos, 4);
    if (head === undefined) return stop('short header');
    const first = head.readUInt32LE(0);
    if (first === BATCH_MAGIC) {
      const header = await reader.view(pos, BATCH_HEADER_BYTES);
      if (header === undefined) return stop('short batch header');
      const bodyBytes = header.readUInt32LE(4);
      const count = header.readUInt32LE(8);
      const firstIndex = header.readUInt32LE(12) + header.readUInt32LE(16) * 2 ** 32;
      const crc = header.readUInt32LE(20);
      if (bodyBytes > MAX_BATCH_BODY_BYTES || count === 0 || count * FRAME_PREFIX_BYTES > bodyBytes) return stop(`implausible batch header (${bodyBytes} bytes, ${count} frames)`);
      const record = await reader.view(pos, BATCH_HEADER_BYTES + bodyBytes);
      if (record === undefined) return stop('short batch');
      const body = record.subarray(BATCH_HEADER_BYTES);
      if (crc32(body, crc32(record.subarray(0, 20))) !== crc) return stop('batch crc mismatch');
      if (firstIndex !== base + frames) return stop(`batch of frame ${firstIndex} where frame ${base + frames} belongs`);
      const values: T[] = [];
      let at = 0;
      for (let i = 0; i < count; i++) {
        if (at + FRAME_PREFIX_BYTES > body.length) return stop(`batch frame ${i} overruns the batch`);
        const length = body.readUInt32LE(at);
        if (at + FRAME_PREFIX_BYTES + length > body.length) return stop(`batch frame ${i} overruns the batch`);
        const decoded = decode(body.subarray(at + FRAME_PREFIX_BYTES, at + FRAME_PREFIX_BYTES + length), base + frames + i);
        if (decoded.why !== undefined) return stop(`batch frame ${i}: ${decoded.why}`);
        values.push(decoded.value);
        at += FRAME_PREFIX_BYTES + length;
      }
      if (at !== body.length) return stop('batch body longer than its frames');
      values.forEach((v, i) => deliver(v, base + frames + i));
      frames += count;
      pos += BATCH_HEADER_BYTES + bodyBytes;
      batches = true;
      continue;
    }
    // A v1 frame, written before the batch format; never after a batch.
    if (batches || !plausibleLength(first)) return stop(`implausible length ${first}`);
    const frame = await reader.view(pos, FRAME_HEADER_BYTES + first);
    if (frame === undefined) return stop('short payload');
    const payload = frame.subarray(FRAME_HEADER_BYTES);
    if (crc32(payload) !== frame.readUInt32LE(4)) return stop('crc mismatch');
    const decoded = decode(payload, base + frames);
    if (decoded.why !== undefined) return stop(decoded.why);
    deliver(decoded.value, base + frames);
    frames += 1;
    pos += FRAME_HEADER_BYTES + first;
  }
  return { end: pos, frames };
}

/**
 * The first offset in [from, size) where a whole batch with a good crc starts whose first frame index is at
 * least `minFirstIndex`, if any: evidence that a bad record before it was acknowledged (it was committed
 * before that batch was written). A commit after the bad record holds frames after it, so the caller passes
 * the bad record's first index + 1: a good batch numbered lower is an old copy, not a later commit — e.g.
 * the bytes of a batch that was rolled back (truncated after a failed fsync) reappearing in the blocks of
 * the torn commit that reused its offset — and must not turn a torn tail into a refusal to start.
 */
export async function findValidBatch(fd: number, from: number, size: number, minFirstIndex = 0): Promise<number | undefined> {
  for (let chunkPos = from; chunkPos + BATCH_HEADER_BYTES <= size; chunkPos += READ_CHUNK_BYTES) {
    // 3 bytes of overlap so a magic straddling two chunks is seen.
    const chunk = await readFully(fd, chunkPos, Math.min(READ_CHUNK_BYTES + MAGIC_BYTES.length - 1, size - chunkPos));
    for (let i = chunk.indexOf(MAGIC_BYTES); i !== -1 && i < READ_CHUNK_BYTES; i = chunk.indexOf(MAGIC_BYTES, i + 1)) {
      const at = chunkPos + i;
      const header = await readFully(fd, at, BATCH_HEADER_BYTES);
      if (header.length < BATCH_HEADER_BYTES) continue;
      const bodyBytes = header.readUInt32LE(4);
      if (bodyBytes > MAX_BATCH_BODY_BYTES || at + BATCH_HEADER_BYTES + bodyBytes > size) continue;
      if (header.readUInt32LE(12) + header.readUInt32LE(16) * 2 ** 32 < minFirstIndex) continue;
      const body = await readFully(fd, at + BATCH_HEADER_BYTES, bodyBytes);
      if (crc32(body, crc32(header.subarray(0, 20))) === header.readUInt32LE(20)) return at;
    }
  }
  return undefined;
}

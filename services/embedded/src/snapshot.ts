import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AppliedKey, DatasetRecord, DatasetState, RowKey, State } from '@pushbase/domain';
import { captureDataset, decodeDataset, encodeDataset, estimateDatasetBytes, releaseCaptured, rowsOf, SnapshotSource, SnapshotDecodeError, type CapturedDataset, type DatasetRows } from './snapshot-codec';
import { datasetOf, hasDatasetFields, isInt, isString } from './snapshot-columns';
import { openFile, syncDirectory } from '@pushbase/data-dir';
import { errorText, FRAME_HEADER_BYTES, frameHeader, fstatSize, listPositioned, MAX_FRAME_BYTES, positionName, scanFrames } from './frames';

/*
 * Snapshots: the folded state as of a log position P, in <dir>/snapshots/<P>.snap, framed like the log: a
 * JSON header, the retained Idempotency-Keys in bounded chunks, then one frame per dataset in the state's
 * iteration order (so the row map is rebuilt in the same order). Written to .tmp, fsync'd and renamed, so
 * a file under its final name is whole; every frame is verified on load, and any fault discards the whole
 * snapshot. The layout: docs/embedded-storage.md → Snapshot files.
 */

export const SNAPSHOT_DIR = 'snapshots';
export const SNAPSHOT_SUFFIX = '.snap';
export const SNAPSHOT_FORMAT = 'pushbase-snapshot';
/** The version written. */
export const SNAPSHOT_FORMAT_VERSION = 2;
/** The versions read. */
export type SnapshotVersion = 1 | 2;
const WRITE_BUFFER_BYTES = 8 * 1024 * 1024;
/** Idempotency-Keys per key frame at most. */
export const KEY_CHUNK_ENTRIES = 10_000;
/** A key frame is closed once it holds this many bytes (so it stays near this size: one key is small). */
export const KEY_CHUNK_BYTES = 4 * 1024 * 1024;

export class FrameTooLargeError extends Error {
  override readonly name = 'FrameTooLargeError';
}

export const snapshotDir = (dir: string): string => path.join(dir, SNAPSHOT_DIR);
export const snapshotFile = (dir: string, position: number): string => path.join(snapshotDir(dir), positionName(position, SNAPSHOT_SUFFIX));

/** The snapshot files of a data directory, by ascending position (not yet verified). */
export function listSnapshots(dir: string): Promise<{ position: number; file: string }[]> {
  return listPositioned(snapshotDir(dir), SNAPSHOT_SUFFIX);
}

export class SnapshotInvalidError extends Error {
  override readonly name = 'SnapshotInvalidError';
}

export interface SnapshotInfo {
  readonly position: number;
  readonly file: string;
  readonly bytes: number;
  readonly datasets: number;
  readonly records: number;
  /** The format version the file is in. */
  readonly version: SnapshotVersion;
}

interface Header {
  readonly format: string;
  readonly version: SnapshotVersion;
  readonly position: number;
  readonly datasets: number;
  /**
   * The Idempotency-Keys of the writes before `position` still retained (their events may be compacted
   * away). Optional, so a snapshot without it (an older one) loads as holding none, and an older release
   * loading a newer snapshot ignores it rather than refusing it.
   */
  readonly idempotency?: readonly AppliedKey[];
  /** How many key frames follow the header (absent: none). */
  readonly keyFrames?: number;
}

/** A version-1 dataset frame: the state with its row map as two index-aligned arrays, oldest insertion first. */
interface DatasetFrame extends DatasetRows {
  readonly keys: RowKey[];
  readonly records: DatasetRecord[];
}

/** Test seam: called before each durable step of writeSnapshot; throwing there simulates a crash. */
export type StepHook = (step: string) => void | Promise<void>;

/** The snapshot writer's file writes. Injectable so tests can fail one the way a full disk does. */
export interface SnapshotIo {
  /** Appends (part of) `data` to the file; resolves the bytes written. */
  write(fh: fs.promises.FileHandle, data: Buffer): Promise<number>;
  /** A dataset's format-2 frame payload: encodeDataset, here or on another thread (snapshot-pool.ts). */
  encodeDataset(d: CapturedDataset): Buffer | Promise<Buffer>;
  /** The largest frame payload written; a larger one fails the write (lowered by tests). */
  maxFrameBytes: number;
}

const nodeSnapshotIo: SnapshotIo = {
  write: async (fh, data) => (await fh.write(data, 0, data.length)).bytesWritten,
  encodeDataset,
  maxFrameBytes: MAX_FRAME_BYTES,
};

/** Datasets being encoded ahead of the one being written, so another thread has the next one ready. */
const ENCODE_AHEAD = 2;

async function writeAll(io: SnapshotIo, fh: fs.promises.FileHandle, buffers: Buffer[]): Promise<void> {
  let data = Buffer.concat(buffers);
  while (data.length > 0) {
    const bytesWritten = await io.write(fh, data);
    if (bytesWritten <= 0) throw new Error('snapshot write made no progress');
    data = data.subarray(bytesWritten);
  }
}

/** The datasets of a state as of one moment, ready to be written over many event-loop turns. */
export interface CapturedState {
  readonly datasets: readonly CapturedDataset[];
  readonly records: number;
  /** The retained Idempotency-Keys as of the same moment. */
  readonly idempotency?: readonly AppliedKey[];
}

/**
 * Captures the state synchronously (captureDataset): per dataset, a copy of its row keys and of its record
 * references, or its still-encoded columns. That costs two arrays of references per dataset — about 100 ms
 * for 5 million records — and the live state may move on while the snapshot is written: no second copy of
 * the data, no second fold.
 */
export function captureState(state: State, idempotency: readonly AppliedKey[] = []): CapturedState {
  const datasets: CapturedDataset[] = [];
  let records = 0;
  for (const account of state.values()) {
    for (const ds of account.values()) {
      records += ds.rows.size;
      datasets.push(captureDataset(ds));
    }
  }
  return { datasets, records, idempotency };
}

/**
 * Writes the state as of `position` durably and returns what it wrote. A live State is captured first;
 * a CapturedState is written as it is, yielding to the event loop between datasets. Safe to crash at any
 * point: a leftover `.tmp` is never loaded, and the next start or compaction removes it. A write that fails
 * (a full disk, above all) or is aborted removes its `.tmp` at once: left behind, a snapshot-sized file on
 * a full disk makes every append fail until a person deletes it.
 */
export async function writeSnapshot(
  dir: string,
  position: number,
  source: State | CapturedState,
  step: StepHook = () => undefined,
  signal?: AbortSignal,
  io: Partial<SnapshotIo> = {},
  version: SnapshotVersion = SNAPSHOT_FORMAT_VERSION,
): Promise<SnapshotInfo> {
  const captured = source instanceof Map ? captureState(source) : source;
  const target = snapshotFile(dir, position);
  const tmp = `${target}.tmp`;
  let bytes: number;
  try {
    await fs.promises.mkdir(snapshotDir(dir), { recursive: true });
    await step('write-temp');
    bytes = await writeTemp(tmp, position, captured, version, { ...nodeSnapshotIo, ...io }, step, signal);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  } finally {
    releaseCaptured(captured.datasets);
  }
  await step('rename');
  await fs.promises.rename(tmp, target);
  await step('sync-dir');
  await syncDirectory(snapshotDir(dir));
  await syncDirectory(dir);
  return { position, file: target, bytes, datasets: captured.datasets.length, records: captured.records, version };
}

/** Writes and fsyncs the temporary file; resolves its size. */
async function writeTemp(
  tmp: string,
  position: number,
  captured: CapturedState,
  version: SnapshotVersion,
  io: SnapshotIo,
  step: StepHook,
  signal: AbortSignal | undefined,
): Promise<number> {
  const fh = await fs.promises.open(tmp, 'w', 0o644);
  let bytes = 0;
  try {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const push = async (payload: Buffer): Promise<void> => {
      // A reader refuses a longer frame: such a snapshot could never be loaded, so it must not be written.
      if (payload.length > io.maxFrameBytes) throw new FrameTooLargeError(`snapshot frame of ${payload.length} bytes exceeds the ${io.maxFrameBytes}-byte frame limit; no snapshot written`);
      pending.push(frameHeader(payload), payload);
      pendingBytes += payload.length + 8;
      if (pendingBytes >= WRITE_BUFFER_BYTES) {
        await writeAll(io, fh, pending);
        bytes += pendingBytes;
        pending = [];
        pendingBytes = 0;
      } else {
        // Encoding one dataset takes a millisecond or two: let requests in between.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    };
    const keyFrames = keyChunks(captured.idempotency ?? []);
    const header: Header = { format: SNAPSHOT_FORMAT, version, position, datasets: captured.datasets.length, ...(keyFrames.length === 0 ? {} : { keyFrames: keyFrames.length }) };
    await push(Buffer.from(JSON.stringify(header), 'utf8'));
    for (const chunk of keyFrames) await push(Buffer.from(chunk, 'utf8'));
    const encode = async (frame: CapturedDataset): Promise<Buffer> => (version === 1 ? Buffer.from(JSON.stringify(rowsOf(frame)), 'utf8') : io.encodeDataset(frame));
    const ahead: Promise<Buffer>[] = [];
    let next = 0;
    const fill = (): void => {
      while (ahead.length < ENCODE_AHEAD && next < captured.datasets.length) {
        const p = encode(captured.datasets[next++]!);
        p.catch(() => undefined); // awaited in turn below; an abort may leave some unawaited
        ahead.push(p);
      }
    };
    for (let i = 0; i < captured.datasets.length; i++) {
      signal?.throwIfAborted(); // shutting down
      fill();
      await push(await ahead.shift()!);
    }
    await writeAll(io, fh, pending);
    bytes += pendingBytes;
    await step('fsync-temp');
    await fh.sync();
  } finally {
    await fh.close();
  }
  return bytes;
}

/** The keys as JSON arrays of at most KEY_CHUNK_ENTRIES entries, each closed once past KEY_CHUNK_BYTES. */
function keyChunks(keys: readonly AppliedKey[]): string[] {
  const chunks: string[] = [];
  let parts: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    const json = JSON.stringify(key);
    parts.push(json);
    bytes += Buffer.byteLength(json, 'utf8') + 1;
    if (parts.length >= KEY_CHUNK_ENTRIES || bytes >= KEY_CHUNK_BYTES) {
      chunks.push(`[${parts.join(',')}]`);
      parts = [];
      bytes = 0;
    }
  }
  if (parts.length > 0) chunks.push(`[${parts.join(',')}]`);
  return chunks;
}

/** Roughly the bytes the key frames of `keys` take: the JSON of the first keys scaled to their count. */
export function estimateKeyBytes(keys: readonly AppliedKey[]): number {
  const sample = keys.slice(0, SAMPLE_ROWS);
  if (sample.length === 0) return 0;
  const sampleBytes = sample.reduce((sum, k) => sum + Buffer.byteLength(JSON.stringify(k), 'utf8') + 1, 0);
  return Math.ceil((sampleBytes / sample.length) * keys.length) + Math.ceil(keys.length / KEY_CHUNK_ENTRIES + 1) * FRAME_HEADER_BYTES;
}

const SAMPLE_ROWS = 32;

/**
 * Roughly the bytes a snapshot of `state` takes in `version`, for the free-space check before writing one.
 * Version 2: estimateDatasetBytes. Version 1: per dataset, the JSON size of its first rows (up to 32, keys
 * included) scaled to its row count, plus its definition. Milliseconds even for millions of records, where
 * serialising everything would cost the write itself.
 */
export function estimateSnapshotBytes(state: State, version: SnapshotVersion = SNAPSHOT_FORMAT_VERSION): number {
  let bytes = 256;
  for (const account of state.values()) {
    for (const ds of account.values()) {
      bytes += FRAME_HEADER_BYTES;
      if (version === 2) {
        bytes += estimateDatasetBytes(ds);
        continue;
      }
      bytes += 256 + JSON.stringify(ds.definition).length + ds.account.length + ds.id.length + ds.incarnation.length;
      let sampled = 0;
      let sampleBytes = 0;
      for (const [key, record] of ds.rows) {
        if (sampled === SAMPLE_ROWS) break;
        sampleBytes += JSON.stringify(key).length + JSON.stringify(record).length + 2;
        sampled += 1;
      }
      if (sampled > 0) bytes += Math.ceil((sampleBytes / sampled) * ds.rows.size);
    }
  }
  return bytes;
}

/** Removes `.tmp` files a crash left in snapshots/ (never loaded; on a full disk they block every append). */
export async function removeLeftoverTemps(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await fs.promises.readdir(snapshotDir(dir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const removed = names.filter((n) => n.endsWith('.tmp')).map((n) => path.join(snapshotDir(dir), n));
  for (const file of removed) await fs.promises.rm(file, { force: true });
  if (removed.length > 0) await syncDirectory(snapshotDir(dir));
  return removed;
}

const isAppliedKey = (v: unknown): v is AppliedKey => {
  if (typeof v !== 'object' || v === null) return false;
  const a = v as Partial<AppliedKey>;
  return isString(a.account) && isString(a.key) && isString(a.fingerprint) && isInt(a.at) && (a.dataset === undefined || (typeof a.dataset === 'object' && a.dataset !== null));
};

/** A version-1 dataset frame (JSON), or why it is not one. */
function datasetFromJson(payload: Buffer, n: number): DatasetState | string {
  let d: Partial<DatasetFrame> | null;
  try {
    d = JSON.parse(payload.toString('utf8')) as Partial<DatasetFrame> | null;
  } catch {
    return 'payload is not JSON';
  }
  if (
    !hasDatasetFields(d) ||
    !Array.isArray(d.keys) ||
    !Array.isArray(d.records) ||
    d.keys.length !== d.records.length
  ) {
    return `bad dataset frame ${n}`;
  }
  const rows = new Map<RowKey, DatasetRecord>();
  const keys = d.keys;
  const recs = d.records;
  for (let i = 0; i < keys.length; i++) rows.set(keys[i]!, recs[i]!);
  if (rows.size !== keys.length) return `duplicate row keys in dataset ${d.account}/${d.id}`;
  return datasetOf(d, rows);
}

/** A loaded snapshot. */
export interface LoadedSnapshot {
  readonly info: SnapshotInfo;
  readonly state: State;
  /** The Idempotency-Keys it carries (none in a snapshot written before they existed). */
  readonly idempotency: readonly AppliedKey[];
  /**
   * Closes the snapshot file, which stays open while datasets of `state` are still encoded in it (see
   * SnapshotSource); call it when the state is no longer used. Such datasets cannot be decoded after.
   */
  readonly close: () => void;
}

/**
 * Reads a just-written snapshot back in full (every frame, its crc and the counts): what is pruned on the
 * strength of a snapshot must be a snapshot a restart can load. When it is not, deletes it and throws.
 */
export async function verifySnapshot(info: SnapshotInfo): Promise<void> {
  try {
    const read = await readSnapshot(info.file);
    read.close();
    if (read.info.position !== info.position || read.info.datasets !== info.datasets || read.info.records !== info.records) {
      throw new SnapshotInvalidError(`snapshot ${info.file} reads back as ${read.info.datasets} datasets, ${read.info.records} records, not the ${info.datasets}, ${info.records} written`);
    }
  } catch (err) {
    // Left in place, the next start would find it as the newest snapshot and refuse to start.
    await fs.promises.rm(info.file, { force: true });
    await syncDirectory(path.dirname(info.file));
    throw err;
  }
}

/**
 * Loads and verifies a snapshot file; throws SnapshotInvalidError when anything about it is wrong. Every
 * frame is read and checked, but the rows of a format-2 dataset stay in the file until first used.
 */
export async function readSnapshot(file: string): Promise<LoadedSnapshot> {
  let fd: number;
  try {
    fd = await openFile(file, fs.constants.O_RDONLY);
  } catch (err) {
    throw new SnapshotInvalidError(`cannot open snapshot ${file}: ${errorText(err)}`);
  }
  const source = new SnapshotSource(file, fd);
  source.retain(); // the load's own reference: the file stays open at least until the load ends
  let loaded = false;
  try {
    const size = await fstatSize(fd);
    const state: State = new Map();
    let header: Header | undefined;
    let datasets = 0;
    let records = 0;
    let keyFramesRead = 0;
    const idempotency: AppliedKey[] = [];
    const scan = await scanFrames(fd, size, (payload, at) => {
      if (header === undefined) {
        let h: Partial<Header> | null;
        try {
          h = JSON.parse(payload.toString('utf8')) as Partial<Header> | null;
        } catch {
          return 'header is not JSON';
        }
        if (h === null || typeof h !== 'object' || h.format !== SNAPSHOT_FORMAT) return 'not a pushbase snapshot header';
        if (h.version !== 1 && h.version !== 2) return `unsupported snapshot format version ${String(h.version)}`;
        if (!isInt(h.position) || h.position < 0 || !isInt(h.datasets) || h.datasets < 0) return 'bad header fields';
        if (h.idempotency !== undefined && !(Array.isArray(h.idempotency) && h.idempotency.every(isAppliedKey))) return 'bad idempotency keys in the header';
        if (h.keyFrames !== undefined && !(isInt(h.keyFrames) && h.keyFrames >= 0)) return 'bad header fields';
        header = h as Header;
        idempotency.push(...(header.idempotency ?? []));
        return undefined;
      }
      if (keyFramesRead < (header.keyFrames ?? 0)) {
        let chunk: unknown;
        try {
          chunk = JSON.parse(payload.toString('utf8'));
        } catch {
          return `key frame ${keyFramesRead + 1} is not JSON`;
        }
        if (!Array.isArray(chunk) || !chunk.every(isAppliedKey)) return `bad idempotency keys in key frame ${keyFramesRead + 1}`;
        for (const key of chunk) idempotency.push(key);
        keyFramesRead += 1;
        return undefined;
      }
      if (datasets >= header.datasets) return `more datasets than the header's ${header.datasets}`;
      let ds: DatasetState | string;
      if (header.version === 1) ds = datasetFromJson(payload, datasets + 1);
      else {
        try {
          ds = decodeDataset(payload, at, source);
        } catch (err) {
          if (!(err instanceof SnapshotDecodeError)) throw err;
          ds = `bad dataset frame ${datasets + 1}: ${err.message}`;
        }
      }
      if (typeof ds === 'string') return ds;
      let account = state.get(ds.account);
      if (account === undefined) state.set(ds.account, (account = new Map<string, DatasetState>()));
      if (account.has(ds.id)) return `dataset ${ds.account}/${ds.id} appears twice`;
      account.set(ds.id, ds);
      datasets += 1;
      records += ds.rows.size;
      return undefined;
    });
    if (scan.end !== size) throw new SnapshotInvalidError(`snapshot ${file} is damaged: ${scan.why ?? 'bad frame'} at byte ${scan.end} of ${size}`);
    if (header === undefined) throw new SnapshotInvalidError(`snapshot ${file} is empty`);
    if (keyFramesRead !== (header.keyFrames ?? 0)) throw new SnapshotInvalidError(`snapshot ${file} is incomplete: ${keyFramesRead} of ${header.keyFrames ?? 0} key frames`);
    const named = Number(path.basename(file).slice(0, 20));
    if (header.position !== named) throw new SnapshotInvalidError(`snapshot ${file} says it is as of frame ${header.position}, its name says ${named}`);
    if (datasets !== header.datasets) {
      throw new SnapshotInvalidError(`snapshot ${file} is incomplete: ${datasets} of ${header.datasets} datasets`);
    }
    loaded = true;
    return { info: { position: header.position, file, bytes: size, datasets, records, version: header.version }, state, idempotency, close: () => source.close() };
  } finally {
    // Closes the file unless datasets of the state still read from it; a failed load closes it whatever.
    if (loaded) source.release();
    else source.close();
  }
}

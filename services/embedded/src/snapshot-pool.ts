import { existsSync } from 'node:fs';
import path from 'node:path';
import { BatchRecords } from '@pushbase/contracts';
import Piscina from 'piscina';
import type { CapturedDataset, DatasetRows } from './snapshot-codec';

/*
 * Snapshot frames encoded off the event loop. A snapshot taken during ingest finds most rows still encoded
 * in their events (the domain's RowMap): turning them into columns costs about a microsecond per record,
 * seconds for millions, which on the event loop stalls every request behind it for as long
 * (docs/performance.md → Measurements behind the code).
 * Such a dataset travels to this pool as its encoded events' text (copied: about 86 bytes per record) and
 * comes back as its frame payload (moved). A dataset whose rows are mostly built records, or still encoded
 * in the snapshot file it was loaded from, is encoded on the event loop as before: cloning records costs
 * what encoding them does, and reading encoded columns back from the file is cheap.
 */

export const SNAPSHOT_WORKER_FILE = path.join(__dirname, 'snapshot-worker.js');

/** Built records a dataset may hold and still be encoded in the pool (they are cloned to it). */
const MAX_BUILT_RECORDS = 1000;

export interface SnapshotEncodeTask {
  readonly dataset: Omit<DatasetRows, 'deferred'> & {
    readonly deferred: readonly {
      readonly first: number;
      readonly start: number;
      readonly end: number;
      readonly encoded: string | Uint8Array;
      readonly index: number;
      readonly type: BatchRecords['type'];
      readonly count: number;
    }[];
  };
}

export interface SnapshotPool {
  /** The dataset's frame payload: from the pool when that pays, else encoded here by `fallback`. */
  encode(d: CapturedDataset, fallback: (d: CapturedDataset) => Buffer): Promise<Buffer>;
  close(): Promise<void>;
}

/** The task for `d`, or undefined when it is better encoded on the calling thread. */
export function encodeTask(d: CapturedDataset): SnapshotEncodeTask | undefined {
  if (!('keys' in d) || d.deferred === undefined || d.deferred.length === 0 || d.records.length > MAX_BUILT_RECORDS) return undefined;
  const deferred: SnapshotEncodeTask['dataset']['deferred'][number][] = [];
  for (const s of d.deferred) {
    if (!(s.source instanceof BatchRecords)) return undefined;
    deferred.push({ first: s.first, start: s.start, end: s.end, encoded: s.source.encoded, index: s.source.index, type: s.source.type, count: s.source.count });
  }
  return { dataset: { ...d, deferred } };
}

/**
 * One thread, started on the first snapshot and stopped after a minute without one; undefined when the
 * bundled worker is not there (running from sources): then everything is encoded on the calling thread.
 */
export function createSnapshotPool(filename: string = SNAPSHOT_WORKER_FILE): SnapshotPool | undefined {
  if (!existsSync(filename)) return undefined;
  const pool = new Piscina<SnapshotEncodeTask, Uint8Array>({ filename, minThreads: 0, maxThreads: 1, idleTimeout: 60_000 });
  return {
    encode: async (d, fallback) => {
      const task = encodeTask(d);
      if (task === undefined) return fallback(d);
      const payload = await pool.run(task);
      return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
    },
    close: () => pool.destroy(),
  };
}

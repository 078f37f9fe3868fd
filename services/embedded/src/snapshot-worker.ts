import { BatchRecords } from '@pushbase/contracts';
import Piscina from 'piscina';
import { encodeDataset, type DatasetRows } from './snapshot-codec';
import type { SnapshotEncodeTask } from './snapshot-pool';

/*
 * A snapshot-pool thread (bundled as dist/snapshot-worker.js): encodes one captured dataset into its
 * snapshot frame payload (snapshot-codec.ts encodeDataset, the same code the event loop would run) and
 * hands the bytes back without copying. Errors reject the task, and so fail the compaction run, as they
 * would on the event loop.
 */
export default function encode({ dataset }: SnapshotEncodeTask): unknown {
  const { deferred, ...rows } = dataset;
  const d: DatasetRows = {
    ...rows,
    deferred: deferred.map((s) => ({ first: s.first, start: s.start, end: s.end, source: new BatchRecords(s.encoded, s.index, s.type, s.count) })),
  };
  const payload = encodeDataset(d);
  // An exact copy: the encoder's buffer is larger than the payload, and a small one is Node's shared pool.
  const exact = new Uint8Array(payload);
  return Piscina.move(exact);
}

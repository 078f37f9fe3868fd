/*
 * The snapshot pool encodes datasets whose rows are still encoded in their events on its own thread, into
 * exactly the bytes the event loop would write, and leaves the rest to the event loop. It runs the bundled
 * worker, which jest's global setup builds (scripts/build.js).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { encodeEventBatch, eventHeads, eventsFromEncodedBatch } from '@pushbase/contracts';
import { EVENT_SCHEMA_VERSION, fold, type DatasetDefinition, type DatasetEvent } from '@pushbase/domain';
import { captureState, writeSnapshot } from '../src/snapshot';
import { encodeDataset, type CapturedDataset } from '../src/snapshot-codec';
import { createSnapshotPool, encodeTask, SNAPSHOT_WORKER_FILE, type SnapshotPool } from '../src/snapshot-pool';
import { framesArb } from './store-fixtures';

let dir: string;
let pool: SnapshotPool;
beforeAll(() => {
  const created = createSnapshotPool(SNAPSHOT_WORKER_FILE.replace(/services\/embedded\/src/, 'dist'));
  if (created === undefined) throw new Error('dist/snapshot-worker.js is missing: the global setup should have built it');
  pool = created;
});
afterAll(async () => {
  await pool.close();
});
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-snapshot-pool-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** What the embedded server folds: each frame's events as a write worker hands them back (text and heads). */
const asDecidedElsewhere = (frame: DatasetEvent[]): DatasetEvent[] => eventsFromEncodedBatch(encodeEventBatch(frame).toString('utf8'), eventHeads(frame));

describe('the snapshot pool', () => {
  it('writes the snapshot the event loop writes, byte for byte (property)', async () => {
    let pooled = 0;
    await fc.assert(
      fc.asyncProperty(framesArb(40), async (frames) => {
        const state = fold(frames.flatMap(asDecidedElsewhere));
        const captured = captureState(state);
        pooled += captured.datasets.filter((d) => encodeTask(d) !== undefined).length;
        let fallbacks = 0;
        const viaPool = (d: CapturedDataset): Promise<Buffer> =>
          pool.encode(d, (x) => {
            fallbacks += 1;
            return encodeDataset(x);
          });
        const a = await writeSnapshot(path.join(dir, 'loop'), frames.length, captureState(state));
        const b = await writeSnapshot(path.join(dir, 'pool'), frames.length, captured, undefined, undefined, { encodeDataset: viaPool });
        expect(fallbacks).toBe(captured.datasets.filter((d) => encodeTask(d) === undefined).length);
        expect(await readFile(b.file)).toEqual(await readFile(a.file));
      }),
      { numRuns: 60 },
    );
    expect(pooled).toBeGreaterThan(0);
  });

  it('leaves datasets of built records to the event loop', () => {
    fc.assert(
      fc.property(framesArb(20), (frames) => {
        for (const d of captureState(fold(frames.flat())).datasets) expect(encodeTask(d)).toBeUndefined();
      }),
      { numRuns: 30 },
    );
  });

  it('fails the snapshot as the event loop would when a record lacks a field of its dataset', async () => {
    const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'sales', incarnation: 'i1', at: 1 } as const;
    const definition = { fields: { a: { type: 'string', name: 'A', optional: false }, b: { type: 'string', name: 'B', optional: false } }, unique_by: [] } as DatasetDefinition;
    const state = fold([
      { ...base, type: 'DatasetDefined', definition },
      ...asDecidedElsewhere([{ ...base, type: 'RecordsAppended', records: [{ a: 'x' }], delete_by: null }]),
    ]);
    const viaPool = (d: CapturedDataset): Promise<Buffer> => pool.encode(d, () => Promise.reject(new Error('not on the event loop')) as never);
    await expect(writeSnapshot(dir, 2, state, undefined, undefined, { encodeDataset: viaPool })).rejects.toThrow('dataset acme/sales: record 0 has no field "b"');
  });
});

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { fold, initialState } from '@pushbase/domain';
import { readSnapshot, snapshotFile, SnapshotInvalidError, writeSnapshot } from '../src/snapshot';
import { bulkFrames, dumpState, framesArb } from './store-fixtures';

/*
 * Snapshot files: a written snapshot loads back as the same state (rows in the same order, nextRow, every
 * field), so folding the rest of the history on top of it equals folding the whole history; any damage
 * makes the file rejected as a whole.
 */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-snapshot-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('snapshots', () => {
  it('snapshot at any split point + the rest of the events ≡ the fold of all events (property)', async () => {
    await fc.assert(
      fc.asyncProperty(framesArb(40), fc.nat(), async (frames, splitSeed) => {
        const events = frames.flat();
        const split = events.length === 0 ? 0 : splitSeed % (events.length + 1);
        const head = fold(events.slice(0, split));
        const expectedHead = dumpState(head);
        await writeSnapshot(dir, split, head);
        expect(dumpState(head)).toEqual(expectedHead); // writing only reads the state
        const { info, state } = await readSnapshot(snapshotFile(dir, split));
        expect(info.position).toBe(split);
        expect(dumpState(state)).toEqual(expectedHead);
        const continued = fold(events.slice(split), state);
        expect(dumpState(continued)).toEqual(dumpState(fold(events)));
      }),
      { numRuns: 150 },
    );
  });

  it('keeps 5000-row windows, numeric row keys and nextRow exact, so later appends continue correctly', async () => {
    const frames = bulkFrames(3, 11); // 5500 rows each: the window has evicted the oldest 500
    const events = frames.flat();
    const state = fold(events);
    const info = await writeSnapshot(dir, frames.length, state);
    expect(info).toMatchObject({ datasets: 3, records: 15000 });
    const loaded = (await readSnapshot(info.file)).state;
    const ds = loaded.get('bulk')!.get('ds1')!;
    expect(ds.nextRow).toBe(5500);
    expect([...ds.rows.keys()].slice(0, 2)).toEqual([500, 501]);
    const more = bulkFrames(3, 12).slice(frames.length); // one more append per dataset
    expect(dumpState(fold(more.flat(), loaded))).toEqual(dumpState(fold([...events, ...more.flat()])));
  });

  it('writes an empty state and reads it back', async () => {
    const info = await writeSnapshot(dir, 0, initialState());
    expect(info).toMatchObject({ position: 0, datasets: 0, records: 0 });
    expect((await readSnapshot(info.file)).state.size).toBe(0);
  });

  it('rejects a snapshot with any damaged byte, a cut end, trailing bytes, a wrong name or a missing dataset', async () => {
    const state = fold(bulkFrames(2, 1).flat());
    const info = await writeSnapshot(dir, 7, state);
    const good = await readFile(info.file);
    const cases: [string, Buffer][] = [
      ['flipped byte', Buffer.from(good.map((b, i) => (i === good.length >> 1 ? b ^ 1 : b)))],
      ['cut end', good.subarray(0, good.length - 10)],
      ['trailing bytes', Buffer.concat([good, Buffer.from('xx')])],
      ['empty', Buffer.alloc(0)],
    ];
    for (const [, bytes] of cases) {
      await writeFile(info.file, bytes);
      await expect(readSnapshot(info.file)).rejects.toThrow(SnapshotInvalidError);
    }
    await writeFile(snapshotFile(dir, 8), good); // right content, wrong position in its name
    await expect(readSnapshot(snapshotFile(dir, 8))).rejects.toThrow(/its name says 8/);
    // A header promising more datasets than follow (a snapshot cut exactly at a frame boundary).
    const headerLen = good.readUInt32LE(0);
    await writeFile(info.file, good.subarray(0, 8 + headerLen));
    await expect(readSnapshot(info.file)).rejects.toThrow(/incomplete: 0 of 2 datasets/);
  });
});

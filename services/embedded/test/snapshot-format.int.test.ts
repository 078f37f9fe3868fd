import { cpSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { encodeEventBatch, eventHeads, eventsFromEncodedBatch } from '@pushbase/contracts';
import { EVENT_SCHEMA_VERSION, fold, RowMap, type DatasetDefinition, type DatasetEvent, type DatasetRecord, type DatasetState, type RowKey, type State } from '@pushbase/domain';
import { EmbeddedStore } from '../src/embedded-store';
import { captureState, estimateSnapshotBytes, listSnapshots, readSnapshot, snapshotFile, SnapshotInvalidError, writeSnapshot } from '../src/snapshot';
import { LazyRows } from '../src/snapshot-codec';
import { dumpState, framesArb } from './store-fixtures';

/*
 * Snapshot format 2 (records by position, typed columns, rows decoded on first use) next to format 1
 * (JSON): both load back the exact state, values of every kind survive, rows stay encoded until used and
 * pass through the next snapshot as they are, a frame whose crc matches but whose columns do not add up
 * is refused at load, the size estimate is close, and a data directory with a format-1 snapshot written
 * by an older release opens and is rewritten in format 2 by its next compaction.
 */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-snapshot-format-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const definition = (fields: string[], uniqueBy: string[] = []): DatasetDefinition =>
  ({ fields: Object.fromEntries(fields.map((f) => [f, { type: 'string', name: f, optional: true }])), unique_by: uniqueBy }) as unknown as DatasetDefinition;

/** A dataset state built directly (not through the fold), so any value can be put in it. */
function dataset(id: string, def: DatasetDefinition, rows: [RowKey, DatasetRecord][], nextRow = rows.length): DatasetState {
  return { account: 'acme', id, incarnation: `inc-${id}`, definition: def, created_at: 1, updated_at: 2, rows: new Map(rows), nextRow };
}
const stateOf = (...datasets: DatasetState[]): State => {
  const state: State = new Map();
  for (const d of datasets) {
    if (!state.has(d.account)) state.set(d.account, new Map());
    state.get(d.account)!.set(d.id, d);
  }
  return state;
};
/** The records as the API would serialise them: key order included. */
const asJson = (state: State): string => JSON.stringify(dumpState(state));

describe('snapshot format 2', () => {
  it('loads back the fold of any history exactly, as format 1 does (property)', async () => {
    await fc.assert(
      fc.asyncProperty(framesArb(40), fc.constantFrom<1 | 2>(1, 2), async (frames, version) => {
        const state = fold(frames.flat());
        const info = await writeSnapshot(dir, frames.length, state, undefined, undefined, {}, version);
        expect(info.version).toBe(version);
        const loaded = await readSnapshot(info.file);
        expect(loaded.info.version).toBe(version);
        expect(asJson(loaded.state)).toBe(asJson(state));
      }),
      { numRuns: 100 },
    );
  });

  it('captures rows still encoded in their events without building them, and writes them as built rows are written (property)', async () => {
    // What the embedded server folds: each frame's events as a write worker hands them back.
    const asDecidedElsewhere = (frame: DatasetEvent[]): DatasetEvent[] => eventsFromEncodedBatch(encodeEventBatch(frame), eventHeads(frame));
    const deferred = (state: State): number => [...state.values()].flatMap((a) => [...a.values()]).filter((d) => d.rows instanceof RowMap && d.rows.hasDeferred).length;
    let sawDeferred = false;
    await fc.assert(
      fc.asyncProperty(framesArb(40), fc.constantFrom<1 | 2>(1, 2), async (frames, version) => {
        const built = fold(frames.flat());
        const lazy = fold(frames.flatMap(asDecidedElsewhere));
        const held = deferred(lazy);
        sawDeferred ||= held > 0;
        estimateSnapshotBytes(lazy);
        const captured = captureState(lazy);
        expect(deferred(lazy)).toBe(held);
        const a = await writeSnapshot(path.join(dir, 'built'), frames.length, built, undefined, undefined, {}, version);
        const b = await writeSnapshot(path.join(dir, 'lazy'), frames.length, captured, undefined, undefined, {}, version);
        expect(await readFile(b.file)).toEqual(await readFile(a.file));
        expect(asJson(lazy)).toBe(asJson(built));
      }),
      { numRuns: 100 },
    );
    expect(sawDeferred).toBe(true);
  });

  it('refuses to write a record that lacks a field of its dataset, built or still encoded, naming it', async () => {
    const def = definition(['a', 'b']);
    const built = dataset('built', def, [
      [0, { a: '1', b: '2' }],
      [1, { a: '3' }],
    ]);
    await expect(writeSnapshot(dir, 1, stateOf(built))).rejects.toThrow('dataset acme/built: record 1 has no field "b"');
    const rows = new RowMap();
    rows.set(0, { a: '1', b: '2' });
    rows.appendEncoded(1, { count: 1, bytes: 10, decode: () => [{ a: '3' }] });
    await expect(writeSnapshot(dir, 1, stateOf({ ...built, id: 'encoded', rows }))).rejects.toThrow('dataset acme/encoded: record 1 has no field "b"');
  });

  it('keeps values of every kind exactly, whatever the column holds', async () => {
    const many = Array.from({ length: 70_000 }, (_, i): [RowKey, DatasetRecord] => [`k${i}`, { s: `v${i}`, r: ['x', 'y', 'z'][i % 3]!, n: i % 5 === 0 ? null : i * 1.5 }]);
    const odd: [RowKey, DatasetRecord][] = [
      [0, { a: -0, b: 2 ** 53, c: 'é 😀 中文', d: null, e: 1, f: '' }],
      [1, { a: 0.1, b: -(2 ** 53), c: '\ud800 lone', d: null, e: 'one', f: 'x'.repeat(100) }],
      [7, { a: -2147483648, b: 2147483648, c: '\udc00', d: null, e: null, f: '\u2028"\\' }],
      [2 ** 40, { a: Number.MAX_VALUE, b: Number.MIN_VALUE, c: 'é 😀 中文', d: null, e: 3, f: '' }],
    ];
    const state = stateOf(
      dataset('odd', definition(['a', 'b', 'c', 'd', 'e', 'f']), odd, 2 ** 40 + 1),
      dataset('many', definition(['s', 'r', 'n'], ['s']), many, 0),
      dataset('empty', definition(['a']), []),
    );
    const info = await writeSnapshot(dir, 3, state);
    const loaded = (await readSnapshot(info.file)).state;
    expect(asJson(loaded)).toBe(asJson(state));
    const rows = [...loaded.get('acme')!.get('odd')!.rows.values()];
    expect(Object.is(rows[0]!.a, -0)).toBe(true);
    expect(rows[1]!.c).toBe('\ud800 lone');
    expect(rows[2]!.c).toBe('\udc00');
    expect([...loaded.get('acme')!.get('odd')!.rows.keys()]).toEqual([0, 1, 7, 2 ** 40]);
    expect(loaded.get('acme')!.get('many')!.rows.get('k69999')).toEqual({ s: 'v69999', r: 'x', n: 69999 * 1.5 });
  });

  it('leaves rows encoded until used, and passes them through the next snapshot as they are', async () => {
    const rows = Array.from({ length: 1000 }, (_, i): [RowKey, DatasetRecord] => [i, { day: `2024-01-${String((i % 28) + 1).padStart(2, '0')}`, n: i }]);
    const state = stateOf(dataset('a', definition(['day', 'n']), rows), dataset('b', definition(['day', 'n']), rows.slice(0, 10)));
    const first = await writeSnapshot(dir, 1, state);
    const loaded = (await readSnapshot(first.file)).state;
    const a = loaded.get('acme')!.get('a')!.rows;
    const b = loaded.get('acme')!.get('b')!.rows;
    expect(a).toBeInstanceOf(LazyRows);
    expect(a.size).toBe(1000); // answered without decoding
    expect((a as LazyRows).pending).toBeDefined();

    expect(b.get(3)).toEqual({ day: '2024-01-04', n: 3 }); // the first use decodes
    expect((b as LazyRows).pending).toBeUndefined();

    // A snapshot of the loaded state writes a's columns as they were, without decoding them.
    const captured = captureState(loaded);
    expect((a as LazyRows).pending).toBeDefined();
    expect(estimateSnapshotBytes(loaded)).toBeGreaterThanOrEqual(first.bytes - 256);
    const second = await writeSnapshot(dir, 2, captured);
    expect(second.bytes).toBe(first.bytes);
    expect(asJson((await readSnapshot(second.file)).state)).toBe(asJson(state));

    // Every Map operation decodes first and then behaves as on a plain Map.
    const c = (await readSnapshot(second.file)).state.get('acme')!.get('a')!.rows;
    expect(c.delete(0)).toBe(true);
    c.set(0, { day: '2024-02-01', n: -1 });
    expect(c.size).toBe(1000);
    expect([...c.keys()].slice(0, 2)).toEqual([1, 2]);
    expect([...c.keys()].at(-1)).toBe(0);
    expect(c.has(999)).toBe(true);
  });

  it('once decoded, answers every RowMap operation from the rows it decoded: encoded appends, eviction, capture, clear', async () => {
    const record = (i: number): DatasetRecord => ({ day: `d${i % 3}`, n: i });
    const rows = Array.from({ length: 20 }, (_, i): [RowKey, DatasetRecord] => [i, record(i)]);
    const info = await writeSnapshot(dir, 1, stateOf(dataset('a', definition(['day', 'n']), rows), dataset('b', definition(['day', 'n']), rows)));
    const loaded = await readSnapshot(info.file);
    const a = loaded.state.get('acme')!.get('a')!.rows as LazyRows;
    expect(a.hasDeferred).toBe(false); // asked without decoding
    const source = a.pending!.source;

    const appended = [20, 21, 22].map(record);
    a.appendEncoded(20, { count: 3, bytes: 60, decode: () => appended.map((r) => ({ ...r })) });
    expect(a.pending).toBeUndefined();
    expect(a.size).toBe(23);
    expect(a.hasDeferred).toBe(true);
    a.deleteOldest(2);
    const captured = a.capture();
    expect(captured.keys).toEqual(Array.from({ length: 18 }, (_, i) => i + 2));
    expect(captured.deferred).toEqual([expect.objectContaining({ first: 20, start: 0, end: 3 })]);
    expect(a.get(22)).toEqual(record(22)); // builds the appended rows
    expect(a.hasDeferred).toBe(false);
    expect(a.set(23, record(23))).toBe(a);
    const seen: [RowKey, unknown][] = [];
    a.forEach(function (this: unknown, _value, key, map) {
      seen.push([key, map === a && this === seen]);
    }, seen);
    expect(seen.map(([key]) => key)).toEqual(Array.from({ length: 22 }, (_, i) => i + 2));
    expect(seen.every(([, same]) => same === true)).toBe(true);
    expect([...a].length).toBe(22);
    expect(new Map(a).get(23)).toEqual(record(23));

    // Cleared before it was ever decoded: empty, and the file is let go of.
    const b = loaded.state.get('acme')!.get('b')!.rows as LazyRows;
    b.clear();
    expect(b.size).toBe(0);
    expect(b.pending).toBeUndefined();
    expect(source.isOpen).toBe(false); // a released it when decoded, b when cleared
    expect([...b.entries()]).toEqual([]);
    b.set(5, record(5));
    expect([...b.keys()]).toEqual([5]);
  });

  it('reads encoded rows from the file, deleted or not, closes it after the last decode, and never serves changed bytes', async () => {
    const rows = (n: number): [RowKey, DatasetRecord][] => Array.from({ length: n }, (_, i) => [i, { day: `d${i % 3}`, n: i }]);
    const state = stateOf(dataset('a', definition(['day', 'n']), rows(50)), dataset('b', definition(['day', 'n']), rows(60)));
    const info = await writeSnapshot(dir, 1, state);

    const first = await readSnapshot(info.file);
    const a = first.state.get('acme')!.get('a')!.rows as LazyRows;
    const b = first.state.get('acme')!.get('b')!.rows as LazyRows;
    const source = a.pending!.source;
    expect(source.isOpen).toBe(true);
    await rm(info.file); // as a compaction deletes a covered snapshot
    expect([...a.values()]).toEqual(rows(50).map(([, r]) => r));
    expect(source.isOpen).toBe(true); // b still reads from it
    expect(b.size).toBe(60);
    expect(b.get(59)).toEqual({ day: 'd2', n: 59 });
    expect(source.isOpen).toBe(false); // nothing reads from it any more

    // Closed with datasets still encoded (the store stopping): they cannot be decoded after.
    await writeSnapshot(dir, 1, state);
    const second = await readSnapshot(info.file);
    second.close();
    expect(() => second.state.get('acme')!.get('a')!.rows.get(0)).toThrow(/closed/);

    // Bytes changed in place after the load: refused, never decoded into wrong records.
    const third = await readSnapshot(info.file);
    const good = await readFile(info.file);
    await writeFile(info.file, Buffer.from(good.map((x, i) => (i === good.length - 3 ? x ^ 1 : x))));
    expect(() => third.state.get('acme')!.get('b')!.rows.get(0)).toThrow(/changed since it was loaded/);
    expect(third.state.get('acme')!.get('b')!.rows.size).toBe(60); // still encoded, still counted
    third.close();
  });

  it('refuses at load a frame whose crc matches but whose columns do not add up', async () => {
    const state = stateOf(dataset('a', definition(['day']), [[0, { day: 'x' }], [1, { day: 'y' }]]));
    const info = await writeSnapshot(dir, 5, state);
    const good = await readFile(info.file);
    const headerEnd = 8 + good.readUInt32LE(0);
    const payload = good.subarray(headerEnd + 8);
    /** The file with the dataset frame's payload replaced (and a correct crc for it). */
    const withPayload = (p: Buffer): Buffer => {
      const frame = Buffer.alloc(8);
      frame.writeUInt32LE(p.length, 0);
      frame.writeUInt32LE(crc32(p), 4);
      return Buffer.concat([good.subarray(0, headerEnd), frame, p]);
    };
    const lastIndex = Buffer.from(payload);
    lastIndex[lastIndex.length - 1] = 9; // a value index past the distinct values
    const cases = [payload.subarray(0, payload.length - 1), Buffer.concat([payload, Buffer.from([0])]), lastIndex];
    for (const bad of cases) {
      await writeFile(info.file, withPayload(bad));
      await expect(readSnapshot(info.file)).rejects.toThrow(SnapshotInvalidError);
    }
    await writeFile(info.file, withPayload(payload)); // the rebuilt frame itself is fine
    expect(asJson((await readSnapshot(info.file)).state)).toBe(asJson(state));
  });

  it('estimates the size of a snapshot of live records within a third of what it takes, and of records still encoded on the safe side', async () => {
    const regions = ['emea-west', 'emea-east', 'apac-north', 'apac-south', 'amer-north', 'amer-south'];
    const records = (d: number): [RowKey, DatasetRecord][] =>
      Array.from({ length: 5000 }, (_, i) => [
        i,
        {
          day: `2024-01-${String((i % 28) + 1).padStart(2, '0')}`,
          at: new Date(Date.UTC(2024, 0, 1) + i * 7919 * 1000 + d).toISOString(),
          region: regions[i % 6]!,
          product: `widget-${String((i * 37) % 1000).padStart(3, '0')}`,
          units: i % 500,
          revenue: i * 1999,
          share: i % 7 === 0 ? null : (i % 1000) / 1000,
        },
      ]);
    const fields = ['day', 'at', 'region', 'product', 'units', 'revenue', 'share'];
    const state = stateOf(...Array.from({ length: 4 }, (_, d) => dataset(`ds${d}`, definition(fields), records(d))));
    const estimate = estimateSnapshotBytes(state);
    const info = await writeSnapshot(dir, 1, state);
    expect(estimate).toBeGreaterThan(info.bytes * 0.75);
    expect(estimate).toBeLessThan(info.bytes * 1.33);

    // The same records still encoded in their events are judged by their encoding, larger than the
    // columns: an estimate on the safe side for the free-space check, though not a wild one.
    const events: DatasetEvent[] = [];
    for (const [d, ds] of [...state.get('acme')!.values()].entries()) {
      events.push({ type: 'DatasetDefined', schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: ds.id, incarnation: ds.incarnation, at: 1, definition: ds.definition });
      const all = records(d).map(([, r]) => r);
      for (let i = 0; i < all.length; i += 500) {
        const e: DatasetEvent = { type: 'RecordsAppended', schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: ds.id, incarnation: ds.incarnation, at: 2, records: all.slice(i, i + 500), delete_by: null };
        events.push(...eventsFromEncodedBatch(encodeEventBatch([e]), eventHeads([e])));
      }
    }
    const lazy = fold(events);
    const lazyEstimate = estimateSnapshotBytes(lazy);
    const lazyInfo = await writeSnapshot(path.join(dir, 'lazy'), 1, lazy);
    expect(lazyEstimate).toBeGreaterThan(lazyInfo.bytes);
    expect(lazyEstimate).toBeLessThan(lazyInfo.bytes * 3);
  });
});

describe('a store started from a format-2 snapshot', () => {
  it('compacts, deletes the snapshot it loaded, and still serves the datasets it never decoded', async () => {
    const rows = (n: number, d: number): [RowKey, DatasetRecord][] => Array.from({ length: n }, (_, i) => [i, { day: `2024-01-0${(i % 9) + 1}`, n: i * d }]);
    const state = stateOf(...Array.from({ length: 5 }, (_, d) => dataset(`ds${d}`, definition(['day', 'n']), rows(100, d))));
    await writeSnapshot(dir, 0, state);
    const expected = asJson(state);
    const open = async (): Promise<EmbeddedStore> => (await EmbeddedStore.open({ dir, compactAfterBytes: Number.MAX_SAFE_INTEGER, retainSnapshots: 1, warn: () => undefined })).store;

    const store = await open();
    expect(store.projection.currentState().get('acme')!.get('ds0')!.rows).toBeInstanceOf(LazyRows);
    await store.eventLog.append([{ schema_version: EVENT_SCHEMA_VERSION, type: 'DatasetDeleted', account: 'acme', dataset: 'ds4', incarnation: 'inc-ds4', at: 3 }]);
    await store.compactNow();
    expect((await listSnapshots(dir)).map((s) => s.position)).toEqual([1]); // the loaded one is gone
    expect((store.projection.currentState().get('acme')!.get('ds0')!.rows as LazyRows).pending).toBeDefined(); // written without decoding
    state.get('acme')!.delete('ds4');
    expect(asJson(store.projection.currentState())).toBe(asJson(state));
    await store.close();

    const reopened = await open();
    expect(asJson(reopened.projection.currentState())).toBe(asJson(state));
    expect(asJson(reopened.projection.currentState())).not.toBe(expected);
    await reopened.close();
  });
});

describe('a data directory whose snapshot is in format 1', () => {
  const FIXTURE = path.join(__dirname, 'fixtures', 'v1-data-dir');

  it('opens from that snapshot, and its next compaction writes format 2 with the same state', async () => {
    cpSync(FIXTURE, dir, { recursive: true });
    const before = await listSnapshots(dir);
    expect(before.map((s) => s.position)).toEqual([16]);
    expect((await readSnapshot(snapshotFile(dir, 16))).info.version).toBe(1);

    const open = async (version: number): Promise<EmbeddedStore> => {
      const { store, report } = await EmbeddedStore.open({ dir, compactAfterBytes: Number.MAX_SAFE_INTEGER, warn: () => undefined });
      expect(report.skipped).toEqual([]);
      expect(report.snapshot?.version).toBe(version);
      return store;
    };
    const store = await open(1);
    const state = asJson(store.projection.currentState());
    await store.compactNow();
    await store.close();
    const after = await listSnapshots(dir);
    const newest = after.at(-1)!;
    expect(newest.position).toBeGreaterThan(16);
    expect((await readSnapshot(newest.file)).info.version).toBe(2);

    const reopened = await open(2);
    expect(asJson(reopened.projection.currentState())).toBe(state);
    await reopened.close();
  });
});

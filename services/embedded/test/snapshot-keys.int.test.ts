import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EVENT_SCHEMA_VERSION, type AppliedKey, type DatasetDefinition, type DatasetEvent } from '@pushbase/domain';
import { EmbeddedStore, type EmbeddedStoreOptions } from '../src/embedded-store';
import { listSegments } from '../src/file-event-log';
import { frameHeader, fstatSize, scanFrames } from '../src/frames';
import { listSnapshots, readSnapshot, snapshotDir, snapshotFile, SNAPSHOT_FORMAT } from '../src/snapshot';
import { openFile } from '@pushbase/data-dir';

/*
 * Retained Idempotency-Keys in snapshots. Every key used to go into the one JSON header frame: enough keyed
 * writes made a header longer than a reader accepts, the snapshot was written anyway, compaction pruned the
 * last good snapshot and its segments on the strength of it, and the server could not start again. Now the
 * keys are written in bounded frames, an over-long frame fails the write, and a new snapshot is read back
 * before anything it covers is deleted.
 */

let dir: string;
const stores: EmbeddedStore[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-snapkeys-'));
});
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  await rm(dir, { recursive: true, force: true });
});

const open = async (extra: Partial<EmbeddedStoreOptions> = {}): Promise<EmbeddedStore> => {
  const { store } = await EmbeddedStore.open({ dir, segmentBytes: 1024 * 1024, compactAfterBytes: Number.MAX_SAFE_INTEGER, log: () => undefined, ...extra });
  stores.push(store);
  return store;
};
const closeAll = async (): Promise<void> => {
  for (const s of stores.splice(0)) await s.close();
};

// A large but valid definition (10 fields with long non-ASCII names): each keyed create's key holds it.
const definition = {
  fields: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`f${'a'.repeat(47)}${String(i).padStart(2, '0')}`, { type: 'string', name: 'ñ'.repeat(250), optional: false }])),
  unique_by: [],
} as unknown as DatasetDefinition;

/** `count` keyed create + keyed delete pairs of one tenant, 500 pairs a frame. */
async function keyedCycles(store: EmbeddedStore, from: number, count: number): Promise<void> {
  const at = Date.now();
  for (let n = from; n < from + count; ) {
    const batch: DatasetEvent[] = [];
    for (let i = 0; i < 500 && n < from + count; i++, n++) {
      const env = { schema_version: EVENT_SCHEMA_VERSION, account: 'tenant', dataset: 'd', incarnation: `inc${n}`, at } as const;
      batch.push({ ...env, type: 'DatasetDefined', definition, idempotency: { key: `${'k'.repeat(200)}-c${n}`, fingerprint: 'x'.repeat(43) } });
      batch.push({ ...env, type: 'DatasetDeleted', idempotency: { key: `${'k'.repeat(200)}-d${n}`, fingerprint: 'y'.repeat(43) } });
    }
    await store.eventLog.append(batch);
  }
}

/** The payload lengths of a file's frames. */
async function frameLengths(file: string): Promise<number[]> {
  const fd = await openFile(file, fs.constants.O_RDONLY);
  try {
    const lengths: number[] = [];
    const scan = await scanFrames(fd, await fstatSize(fd), (payload) => void lengths.push(payload.length));
    expect(scan.why).toBeUndefined();
    return lengths;
  } finally {
    fs.closeSync(fd);
  }
}

/** `count` keyed appends (400-character keys) to the dataset `live`, 1000 a frame. */
async function keyedAppends(store: EmbeddedStore, from: number, count: number): Promise<void> {
  const at = Date.now();
  for (let n = from; n < from + count; ) {
    const batch: DatasetEvent[] = [];
    for (let i = 0; i < 1000 && n < from + count; i++, n++) {
      batch.push({ schema_version: EVENT_SCHEMA_VERSION, account: 'tenant', dataset: 'live', incarnation: 'live-i', at, type: 'RecordsAppended', records: [], delete_by: null, idempotency: { key: `${'a'.repeat(400)}-${n}`, fingerprint: 'z'.repeat(43) } });
    }
    await store.eventLog.append(batch);
  }
}

test('many retained keys are written in bounded frames, and every one of them survives compactions and a restart', async () => {
  let store = await open();
  await store.eventLog.append([{ schema_version: EVENT_SCHEMA_VERSION, account: 'tenant', dataset: 'live', incarnation: 'live-i', at: Date.now(), type: 'DatasetDefined', definition }]);
  await keyedCycles(store, 0, 200);
  await store.compactNow();
  await keyedAppends(store, 0, 40_000); // ~20 MB of keys: far more than one key frame holds
  await store.compactNow();
  await keyedCycles(store, 200, 200);
  await store.compactNow();
  expect(store.stats().failures).toBe(0);
  expect(store.ledger.size).toBe(40_800);

  const newest = (await listSnapshots(dir)).at(-1)!;
  const lengths = await frameLengths(newest.file);
  const keyBytes = lengths.reduce((a, b) => a + b, 0);
  expect(keyBytes).toBeGreaterThan(16 * 1024 * 1024); // the keys need several frames…
  expect(Math.max(...lengths)).toBeLessThan(5 * 1024 * 1024); // …and none is much over the 4 MiB a key frame is closed at

  await closeAll();
  store = await open();
  expect(store.ledger.size).toBe(40_800);
  expect(await store.ledger.applied('tenant', `${'a'.repeat(400)}-39999`)).toBeDefined();
  expect(await store.ledger.applied('tenant', `${'k'.repeat(200)}-d399`)).toBeDefined();
  // A keyed create's key holds where its dataset is, not its ~6 KB definition (a replay parses it again).
  const created = await store.ledger.applied('tenant', `${'k'.repeat(200)}-c0`);
  expect(created?.dataset).toMatchObject({ account: 'tenant', id: 'd', incarnation: 'inc0' });
  expect(JSON.stringify(created).length).toBeLessThan(1024);
}, 120_000);

test('a snapshot with a frame over the limit is not written: the run fails, the old snapshot and its log are kept', async () => {
  let store = await open();
  await keyedCycles(store, 0, 10);
  await store.compactNow();
  const before = await listSnapshots(dir);
  const segmentsBefore = await listSegments(dir);
  expect(before).toHaveLength(1);
  await closeAll();

  // Lower the frame limit so that one key frame exceeds it.
  store = await open({ retryMs: 60_000, snapshotIo: { maxFrameBytes: 4096 } });
  await keyedCycles(store, 10, 10);
  await store.compactNow();
  expect(store.stats().failures).toBe(1);
  expect(await listSnapshots(dir)).toEqual(before);
  expect((await listSegments(dir)).map((s) => s.base)).toEqual(segmentsBefore.map((s) => s.base));
  expect((await readdir(snapshotDir(dir))).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  await closeAll();

  store = await open();
  expect(store.ledger.size).toBe(40);
});

test('a snapshot that does not read back is deleted, and nothing is pruned on the strength of it', async () => {
  let store = await open({ retainSnapshots: 1 });
  await keyedCycles(store, 0, 10);
  await store.compactNow();
  const before = await listSnapshots(dir);
  await keyedCycles(store, 10, 10);
  const segmentsBefore = await listSegments(dir);
  await closeAll();

  // The disk hands back other bytes than were written: one byte flipped in every write.
  const flip = async (fh: fs.promises.FileHandle, data: Buffer): Promise<number> => {
    const copy = Buffer.from(data);
    copy[copy.length - 1] = copy[copy.length - 1]! ^ 0xff;
    return (await fh.write(copy, 0, copy.length)).bytesWritten;
  };
  store = await open({ retainSnapshots: 1, retryMs: 60_000, snapshotIo: { write: flip } });
  await keyedCycles(store, 20, 10);
  await store.compactNow();
  expect(store.stats().failures).toBe(1);
  expect(await listSnapshots(dir)).toEqual(before);
  expect((await listSegments(dir)).map((s) => s.base)).toEqual(segmentsBefore.map((s) => s.base));
  await closeAll();

  store = await open();
  expect(store.ledger.size).toBe(60);
});

test('a snapshot written with the keys in its header (before key frames) still loads them', async () => {
  const keys: AppliedKey[] = [
    { account: 'acme', key: 'K1', fingerprint: 'F1', at: Date.now() },
    { account: 'acme', key: 'K2', fingerprint: 'F2', at: Date.now(), dataset: { account: 'acme', id: 'd', incarnation: 'i', definition, created_at: 1, updated_at: 1 } },
  ];
  await mkdir(snapshotDir(dir), { recursive: true });
  const header = Buffer.from(JSON.stringify({ format: SNAPSHOT_FORMAT, version: 2, position: 0, datasets: 0, idempotency: keys }), 'utf8');
  await writeFile(snapshotFile(dir, 0), Buffer.concat([frameHeader(header), header]));
  const read = await readSnapshot(snapshotFile(dir, 0));
  read.close();
  expect(read.idempotency).toEqual(keys);
});

test('a restart forgets the keys older than the retention, whether replayed from the log or loaded from a snapshot', async () => {
  const hour = 3_600_000;
  let now = Date.now();
  const clock = { now: () => now };
  const keyed = (key: string): DatasetEvent => ({ schema_version: EVENT_SCHEMA_VERSION, account: 'tenant', dataset: 'live', incarnation: 'live-i', at: now, type: 'RecordsAppended', records: [], delete_by: null, idempotency: { key, fingerprint: 'f' } });
  let store = await open({ clock, idempotencyTtlMs: hour });
  await store.eventLog.append([{ schema_version: EVENT_SCHEMA_VERSION, account: 'tenant', dataset: 'live', incarnation: 'live-i', at: now, type: 'DatasetDefined', definition }]);
  await store.eventLog.append([keyed('in-snapshot')]);
  await store.compactNow();
  now += 30 * 60_000;
  await store.eventLog.append([keyed('in-log')]);
  await closeAll();

  now += 45 * 60_000; // the first key is 75 minutes old, the second 45
  store = await open({ clock, idempotencyTtlMs: hour });
  expect(store.stats().snapshotPosition).toBeGreaterThan(0);
  expect(await store.ledger.applied('tenant', 'in-snapshot')).toBeUndefined();
  expect(await store.ledger.applied('tenant', 'in-log')).toBeDefined();
  await closeAll();

  now += 20 * 60_000;
  store = await open({ clock, idempotencyTtlMs: hour });
  expect(await store.ledger.applied('tenant', 'in-log')).toBeUndefined();
  expect(store.ledger.size).toBe(0);
});

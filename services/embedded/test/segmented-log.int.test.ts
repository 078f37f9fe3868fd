import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runUntilKilled } from './crash-child';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { EventLogCorruptError, FileEventLog, listSegments, segmentFile, type FileEventLogOptions, type SegmentInfo } from '../src/file-event-log';

/*
 * The segmented layout of FileEventLog: rolling, global positions, replay across segments, torn tails only
 * in the last segment, corruption anywhere else refusing the start, the legacy events.log migration, and
 * starting from a snapshot position.
 */


function event(seq: number, pad = ''): DatasetEvent {
  return {
    type: 'RecordsAppended',
    schema_version: EVENT_SCHEMA_VERSION,
    account: 'acct',
    dataset: 'sales',
    incarnation: 'inc-1',
    at: seq,
    records: [{ seq, note: `n${seq}${pad}` }],
    delete_by: null,
  };
}
const seqsOf = (batches: (readonly DatasetEvent[])[]): number[] => batches.flatMap((b) => b.map((e) => e.at));
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

let dir: string;
const logs: FileEventLog[] = [];
const warnings: string[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-segments-'));
  warnings.length = 0;
});
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function open(opts: Partial<FileEventLogOptions> = {}, from = 0): Promise<{ log: FileEventLog; batches: (readonly DatasetEvent[])[] }> {
  const log = new FileEventLog({ dir, warn: (m) => warnings.push(m), ...opts });
  logs.push(log);
  const batches: (readonly DatasetEvent[])[] = [];
  await log.start((events) => batches.push(events), { from });
  return { log, batches };
}

/** ~110-byte frames into 300-byte segments: a roll every 3 frames. */
const SMALL = { segmentBytes: 300 };

async function writeSeq(n: number, opts: Partial<FileEventLogOptions> = SMALL): Promise<SegmentInfo[]> {
  const sealed: SegmentInfo[] = [];
  const { log } = await open({ ...opts, onSealed: (s) => sealed.push(s) });
  for (const i of range(0, n)) await log.append([event(i)]);
  await log.close();
  return sealed;
}

const segmentNames = async (): Promise<string[]> => (await readdir(path.join(dir, 'log'))).sort();

describe('segmented FileEventLog', () => {
  it('rolls to a new segment named by its first frame index once a segment reaches segmentBytes', async () => {
    const sealed = await writeSeq(10);
    const names = await segmentNames();
    expect(names.length).toBeGreaterThanOrEqual(3);
    const bases = (await listSegments(dir)).map((s) => s.base);
    expect(names).toEqual(bases.map((b) => `${String(b).padStart(20, '0')}.seg`));
    expect(bases[0]).toBe(0);
    // Every sealed segment reached the size before the roll, and bases follow frame counts exactly.
    for (const s of sealed) expect(s.bytes).toBeGreaterThanOrEqual(300);
    sealed.forEach((s, i) => expect(bases[i + 1]).toBe(s.base + s.frames));
    expect(sealed.map((s) => s.base)).toEqual(bases.slice(0, -1));
  });

  it('replays across every segment in order, reports global positions, and keeps appending after a reopen', async () => {
    await writeSeq(10);
    const { log, batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual(range(0, 10));
    const before = log.stats();
    expect(before).toMatchObject({ frames: 10, position: 10, firstPosition: 0, replayed: 10 });
    expect(before.segments).toBe((await segmentNames()).length);
    let total = 0;
    for (const s of await listSegments(dir)) total += (await stat(s.file)).size;
    expect(before.bytes).toBe(total);
    for (const i of range(10, 5)) await log.append([event(i)]);
    expect(log.stats().position).toBe(15);
    await log.close();
    const again = await open(SMALL);
    expect(seqsOf(again.batches)).toEqual(range(0, 15));
  });

  it('starts from a position: skips whole segments below it unread, delivers only frames at or after it', async () => {
    await writeSeq(12);
    const segments = await listSegments(dir);
    const from = segments[2]!.base;
    // Damage a segment wholly below `from`: it must not even be read.
    await writeFile(segments[0]!.file, 'garbage that is not a frame');
    const { log, batches } = await open(SMALL, from);
    expect(seqsOf(batches)).toEqual(range(from, 12 - from));
    expect(log.stats()).toMatchObject({ position: 12, firstPosition: 0, replayed: 12 - from });
    await log.close();
    // A position inside a segment works too (frames before it are checked, not delivered).
    const mid = await open(SMALL, from + 1);
    expect(seqsOf(mid.batches)).toEqual(range(from + 1, 11 - from));
  });

  it('refuses a start position before the first segment or after the end of the log', async () => {
    await writeSeq(9);
    const segments = await listSegments(dir);
    await rm(segments[0]!.file);
    await expect(open(SMALL, 0)).rejects.toThrow(/starts at frame \d+, but replay must start at frame 0/);
    await expect(open(SMALL, 50)).rejects.toThrow(/ends at frame 9, but the snapshot loaded is as of frame 50/);
    const ok = await open(SMALL, segments[1]!.base);
    expect(seqsOf(ok.batches)).toEqual(range(segments[1]!.base, 9 - segments[1]!.base));
  });

  it('checks that the snapshot loaded is covered before cutting a damaged tail, and cuts nothing when it is not', async () => {
    await writeSeq(10);
    const segments = await listSegments(dir);
    const last = segments[segments.length - 1]!;
    const bytes = await readFile(last.file);
    // Frame 9 damaged (its last byte), nothing valid after it: what would be a torn tail, were it not that a
    // snapshot as of frame 10 proves frame 9 was acknowledged.
    const damaged = Buffer.from(bytes);
    damaged.writeUInt8(damaged.readUInt8(damaged.length - 1) ^ 0xff, damaged.length - 1);
    await writeFile(last.file, damaged);
    const refused = (await open(SMALL, 10).then(() => new Error('started'), (err: unknown) => err)) as Error;
    expect(refused).toBeInstanceOf(EventLogCorruptError);
    expect(refused.message).toMatch(/ends at frame 9\b.*, but the snapshot loaded is as of frame 10/);
    expect(await readFile(last.file)).toEqual(damaged); // the bytes are still there for a repair
    expect(refused.message).toMatch(/\(batch crc mismatch at byte \d+ of .*\.seg\).*nothing was changed/);
    expect(warnings.filter((w) => w.includes('torn tail'))).toEqual([]);
    // Without that snapshot (an older one, or none), the same tail is a torn write and is cut.
    const { batches } = await open(SMALL, segments[1]!.base);
    expect(seqsOf(batches)).toEqual(range(segments[1]!.base, 9 - segments[1]!.base));
    expect((await stat(last.file)).size).toBeLessThan(damaged.length);
  });

  it('drops a torn tail in the last segment only, and appends cleanly after it', async () => {
    await writeSeq(10);
    const segments = await listSegments(dir);
    const last = segments[segments.length - 1]!;
    const bytes = await readFile(last.file);
    await writeFile(last.file, bytes.subarray(0, bytes.length - 5));
    const { log, batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual(range(0, 9));
    expect(warnings.some((w) => w.includes('torn tail'))).toBe(true);
    await log.append([event(100)]);
    await log.close();
    expect(seqsOf((await open(SMALL)).batches)).toEqual([...range(0, 9), 100]);
  });

  it('starts on an empty last segment (a crash right after a roll) and continues it', async () => {
    await writeSeq(6);
    const { log } = await open(SMALL);
    const position = log.stats().position;
    await log.close();
    await writeFile(segmentFile(dir, position), Buffer.alloc(0));
    const { log: again, batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual(range(0, 6));
    await again.append([event(6)]);
    expect(again.stats().position).toBe(7);
  });

  it.each([
    ['a flipped payload byte', (b: Buffer) => (b[20] = b[20]! ^ 0x55, b)],
    ['a torn end (sealed segments are never torn)', (b: Buffer) => b.subarray(0, b.length - 3)],
    ['zeros over the first frame', (b: Buffer) => (b.fill(0, 0, 16), b)],
  ])('refuses to start when a middle segment has %s, and changes nothing', async (_what, damage) => {
    await writeSeq(12);
    const segments = await listSegments(dir);
    const victim = segments[1]!.file;
    const damaged = damage(await readFile(victim));
    await writeFile(victim, damaged);
    const snapshotOfFiles = await Promise.all(segments.map((s) => readFile(s.file)));
    await expect(open(SMALL)).rejects.toThrow(EventLogCorruptError);
    expect(await Promise.all(segments.map((s) => readFile(s.file)))).toEqual(snapshotOfFiles);
  });

  it('refuses to start when a middle segment is missing (the names no longer line up)', async () => {
    await writeSeq(12);
    const segments = await listSegments(dir);
    await rm(segments[1]!.file);
    await expect(open(SMALL)).rejects.toThrow(/holds \d+ frames .* but the next segment starts at frame/);
  });

  it('migrates a legacy <dir>/events.log into place as segment 0, then rolls on from it', async () => {
    // Build a legacy file: the old format is exactly one segment's bytes at <dir>/events.log.
    await writeSeq(5, { segmentBytes: 1 << 30 });
    const seg0 = segmentFile(dir, 0);
    await writeFile(path.join(dir, 'events.log'), await readFile(seg0));
    await rm(path.join(dir, 'log'), { recursive: true });
    const { log, batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual(range(0, 5));
    expect(existsSync(path.join(dir, 'events.log'))).toBe(false);
    expect(existsSync(seg0)).toBe(true);
    expect(warnings.some((w) => w.includes('legacy'))).toBe(true);
    for (const i of range(5, 5)) await log.append([event(i)]);
    await log.close();
    expect((await segmentNames()).length).toBeGreaterThan(1);
    expect(seqsOf((await open(SMALL)).batches)).toEqual(range(0, 10));
  });

  it('migrates a legacy log with a torn tail (it is the last segment, so the tail is repaired)', async () => {
    await writeSeq(3, { segmentBytes: 1 << 30 });
    const bytes = await readFile(segmentFile(dir, 0));
    await rm(path.join(dir, 'log'), { recursive: true });
    await writeFile(path.join(dir, 'events.log'), bytes.subarray(0, bytes.length - 4));
    const { batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual([0, 1]);
  });

  it('refuses when both a legacy events.log and segments exist', async () => {
    await writeSeq(3);
    await writeFile(path.join(dir, 'events.log'), Buffer.alloc(0));
    await expect(open(SMALL)).rejects.toThrow(/legacy event log/);
  });

  it('takes a directory named events.log for the guard against older releases, not for a legacy log', async () => {
    await writeSeq(3);
    await mkdir(path.join(dir, 'events.log'));
    const { batches } = await open(SMALL);
    expect(seqsOf(batches)).toEqual(range(0, 3));
    expect(existsSync(path.join(dir, 'events.log'))).toBe(true);
  });
});

/*
 * SIGKILL while appending with tiny segments (rolls every few frames): after each kill the log reopens, and
 * every acknowledged append is there, in order, across however many segments were written.
 */
const CHILD = `
const { FileEventLog } = require(process.env.FEL_SRC);
const log = new FileEventLog({ dir: process.env.FEL_DIR, segmentBytes: 8000 });
const pad = 'x'.repeat(1500);
const ev = (seq) => ({ type: 'RecordsAppended', schema_version: 1, account: 'acct', dataset: 'crash',
  incarnation: 'inc', at: seq, records: [{ seq, pad }], delete_by: null });
(async () => {
  let replayed = 0;
  let live = false;
  await log.start(() => { if (!live) replayed += 1; });
  live = true;
  let next = replayed;
  process.stdout.write('ready ' + replayed + '\\n');
  const worker = async () => { for (;;) { const seq = next++; await log.append([ev(seq)]); process.stdout.write(seq + '\\n'); } };
  await Promise.all(Array.from({ length: 8 }, worker));
})().catch((err) => { console.error(err); process.exit(1); });
`;

async function crashRound(killAfterMs: number): Promise<number[]> {
  return (await runUntilKilled(CHILD, { FEL_DIR: dir }, killAfterMs)).slice(1).map(Number);
}

describe('segmented FileEventLog crash safety', () => {
  it('keeps every acknowledged append across SIGKILL while rolling segments', async () => {
    const acked: number[] = [];
    for (let round = 0; round < 2; round++) {
      acked.push(...(await crashRound(250)));
      const { log, batches } = await open({ segmentBytes: 8000 });
      const seqs = seqsOf(batches);
      expect(seqs).toEqual(range(0, seqs.length));
      expect(acked.filter((s) => s >= seqs.length)).toEqual([]);
      expect(log.stats().segments).toBeGreaterThan(1);
      await log.close();
    }
  }, 30_000);
});

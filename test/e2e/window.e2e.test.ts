import { TestServer } from '../helpers/server';
import { appendAll, createDataset, day, expectOk, field, listing, uid, UNLIMITED } from './support';

/*
 * The 5000-record window (docs/api.md → The 5000-record window): by insertion, by a
 * date field in whole days, by a datetime field in equal instants (milliseconds count), nulls first.
 * Filling a dataset takes ten appends of 500, so the server runs without the 60/minute limit.
 */

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await new TestServer({ env: UNLIMITED }).start();
  key = s.keys.acme!;
});
afterAll(async () => {
  await s.stop();
});

const records = (id: string) => s.records('acme', id);
const append = (id: string, body: unknown) => s.request('POST', `/datasets/${id}/data`, { key, body });
const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);

describe('default: the oldest insertions go', () => {
  it('keeps 5000: appending 3 to 5000 drops the 3 oldest-inserted records', async () => {
    const id = uid('insertion');
    await createDataset(s, key, id, { i: field('number', 'I') });
    await appendAll(s, key, id, range(0, 5000).map((i) => ({ i })));
    expect((await listing(s, 'acme', id)).record_count).toBe(5000);

    expectOk(await append(id, { data: [{ i: 5000 }, { i: 5001 }, { i: 5002 }] }));
    const rows = await records(id);
    expect(rows).toEqual(range(3, 5003).map((i) => ({ i })));
  });

  it('counts a unique_by merge as a new insertion', async () => {
    const id = uid('merge-window');
    await createDataset(s, key, id, { k: field('string', 'K'), n: field('number', 'N') }, ['k']);
    await appendAll(s, key, id, range(0, 5000).map((i) => ({ k: `k${i}`, n: i })));
    // k0 is the oldest insertion until it is merged; then k1 is the oldest and goes.
    expectOk(await append(id, { data: [{ k: 'k0', n: -1 }, { k: 'new', n: 5000 }] }));
    const rows = await records(id);
    expect(rows).toHaveLength(5000);
    expect(rows.slice(0, 2)).toEqual([
      { k: 'k2', n: 2 },
      { k: 'k3', n: 3 },
    ]);
    expect(rows.slice(-2)).toEqual([
      { k: 'k0', n: -1 },
      { k: 'new', n: 5000 },
    ]);
    expect(rows.find((r) => r.k === 'k1')).toBeUndefined();
  });

  it('does not truncate when a merge keeps the total at 5000', async () => {
    const id = uid('merge-full');
    await createDataset(s, key, id, { k: field('string', 'K'), n: field('number', 'N') }, ['k']);
    await appendAll(s, key, id, range(0, 5000).map((i) => ({ k: `k${i}`, n: i })));
    expectOk(await append(id, { data: [{ k: 'k10', n: -10 }] }));
    const rows = await records(id);
    expect(rows).toHaveLength(5000);
    expect(rows[0]).toEqual({ k: 'k0', n: 0 });
    expect(rows[4999]).toEqual({ k: 'k10', n: -10 });
  });
});

describe('delete_by a date field: whole days go', () => {
  it('DECISIONS example: 4999 stored, oldest day holding 3; append 2 of a new day → 4998', async () => {
    const id = uid('by-day');
    await createDataset(s, key, id, { day: field('date', 'Day'), n: field('number', 'N') });
    // 4996 records over days 1..1249 (4 a day), then the oldest day (day 0, 3 records) inserted last, so
    // that truncation by insertion order would pick other records.
    const later = range(0, 4996).map((n) => ({ day: day(1 + Math.floor(n / 4)), n }));
    const oldest = [0, 1, 2].map((k) => ({ day: day(0), n: 10_000 + k }));
    await appendAll(s, key, id, [...later, ...oldest]);
    expect((await listing(s, 'acme', id)).record_count).toBe(4999);

    const fresh = [
      { day: day(5000), n: 20_000 },
      { day: day(5000), n: 20_001 },
    ];
    expectOk(await append(id, { data: fresh, delete_by: 'day' }));
    const rows = await records(id);
    expect(rows).toHaveLength(4998);
    expect(rows).toEqual([...later, ...fresh]);
  });

  it('drops every group it touches: excess 2 over days of 1 and 3 records → 4996 (deleteBy)', async () => {
    const id = uid('by-day-groups');
    await createDataset(s, key, id, { day: field('date', 'Day'), n: field('number', 'N') });
    const day0 = [{ day: day(0), n: -1 }];
    const day1 = [0, 1, 2].map((k) => ({ day: day(1), n: -10 - k }));
    const rest = range(0, 4996).map((n) => ({ day: day(2 + Math.floor(n / 2)), n }));
    // Insertion order: newest days first, the two oldest days last.
    await appendAll(s, key, id, [...rest, ...day1, ...day0]);
    expect((await listing(s, 'acme', id)).record_count).toBe(5000);

    const fresh = [
      { day: day(9000), n: 1 },
      { day: day(9001), n: 2 },
    ];
    expectOk(await append(id, { data: fresh, deleteBy: 'day' }));
    expect(await records(id)).toEqual([...rest, ...fresh]);
  });
});

describe('delete_by a datetime field: equal instants only, milliseconds count', () => {
  it('drops both .000Z records and keeps both .001Z records (delete_by as a one-element array)', async () => {
    const id = uid('by-instant');
    await createDataset(s, key, id, { at: field('datetime', 'At'), n: field('number', 'N') });
    const base = Date.UTC(2024, 0, 1);
    const later = range(0, 4995).map((n) => ({ at: new Date(base + 1000 * (n + 1)).toISOString(), n }));
    // The two oldest instants, each held by two records, written in several ways and inserted late.
    const at000 = [
      { at: '2024-01-01T00:00:00.000Z', n: -1 },
      { at: '2024-01-01T01:00:00+01:00', n: -2 },
    ];
    const at001 = [
      { at: '2024-01-01T00:00:00.001Z', n: -3 },
      { at: '2023-12-31T23:00:00.001-01:00', n: -4 },
    ];
    await appendAll(s, key, id, [...later.slice(0, 2000), at001[0]!, at000[0]!, ...later.slice(2000), at000[1]!, at001[1]!]);
    expect((await listing(s, 'acme', id)).record_count).toBe(4999);

    // Exactly 5000: nothing is dropped.
    expectOk(await append(id, { data: [{ at: '2025-01-01T00:00:00Z', n: 5000 }], delete_by: ['at'] }));
    expect((await listing(s, 'acme', id)).record_count).toBe(5000);

    // 5001: the oldest instant goes whole (2 records), the next one, a millisecond later, stays.
    expectOk(await append(id, { data: [{ at: '2025-01-02T00:00:00Z', n: 5001 }], delete_by: ['at'] }));
    const rows = await records(id);
    expect(rows).toHaveLength(4999);
    expect(rows.filter((r) => r.n < 0)).toEqual([
      { at: '2024-01-01T00:00:00.001Z', n: -3 },
      { at: '2024-01-01T00:00:00.001Z', n: -4 },
    ]);
    expect(rows.filter((r) => r.n >= 0)).toHaveLength(4997);
    expect(rows.at(-1)).toEqual({ at: '2025-01-02T00:00:00.000Z', n: 5001 });
  });
});

describe('delete_by with nulls', () => {
  it('drops records with a null delete_by value first (deleteBy as a one-element array)', async () => {
    const id = uid('by-day-nulls');
    await createDataset(s, key, id, { day: field('date', 'Day', { optional: true }), n: field('number', 'N') });
    const dated = range(0, 4998).map((n) => ({ day: day(Math.floor(n / 3)), n }));
    const nulls = [
      { day: null, n: -1 },
      { n: -2 },
    ];
    await appendAll(s, key, id, [...dated.slice(0, 3000), nulls[0], ...dated.slice(3000), nulls[1]]);
    expect((await listing(s, 'acme', id)).record_count).toBe(5000);

    const fresh = [
      { day: day(4000), n: 1 },
      { day: day(4000), n: 2 },
    ];
    expectOk(await append(id, { data: fresh, deleteBy: ['day'] }));
    const rows = await records(id);
    expect(rows).toHaveLength(5000);
    expect(rows.filter((r) => r.day === null)).toEqual([]);
    // The oldest day, which would go next, is whole.
    expect(rows.filter((r) => r.day === day(0))).toHaveLength(3);
    expect(rows).toEqual([...dated, ...fresh]);
  });
});

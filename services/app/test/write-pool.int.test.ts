/*
 * The write pool decides exactly as the calling thread would (same events, same bytes), and carries a
 * DomainError across the thread boundary with its code and path. It runs the bundled worker, which jest's
 * global setup builds (scripts/build.js).
 */
import { decideWriteSync, inProcessDecider, type RawWriteCommand, type WriteDecider } from '@pushbase/app';
import { DomainError, encodedRecordsOf, parseDefinition, type DatasetState, type DatasetSummary } from '@pushbase/domain';
import { createWritePool, WRITE_WORKER_FILE, type WritePool } from '../src/write-pool';

const definition = parseDefinition({
  fields: { day: { type: 'date', name: 'Day' }, at: { type: 'datetime', name: 'At', optional: true }, n: { type: 'number', name: 'N' } },
  unique_by: ['day'],
});
const dataset: DatasetSummary = { account: 'acme', id: 'sales', incarnation: 'inc-1', definition, created_at: 1, updated_at: 2 };
const cmd = (body: unknown, kind: RawWriteCommand['kind'] = 'append'): RawWriteCommand => ({
  kind,
  account: 'acme',
  id: 'sales',
  json: Buffer.isBuffer(body) ? body : typeof body === 'string' ? Buffer.from(body) : Buffer.from(JSON.stringify(body)),
  at: 1_700_000_000_000,
});

describe('the write pool', () => {
  let pool: WritePool;
  beforeAll(() => {
    const created = createWritePool(2, { filename: WRITE_WORKER_FILE.replace(/services\/app\/src/, 'dist') });
    if (created === undefined) throw new Error('dist/write-worker.js is missing: the global setup should have built it');
    pool = created;
  });
  afterAll(async () => {
    await pool.close();
  });

  const outcome = async (decider: WriteDecider, c: RawWriteCommand, d: DatasetSummary | undefined) => {
    try {
      const { events, encoded } = await decider(c, d);
      return { events, encoded: Buffer.from(encoded).toString('utf8') };
    } catch (e: unknown) {
      if (!(e instanceof DomainError)) throw e;
      return { code: e.code, message: e.message, path: e.path };
    }
  };

  it.each([
    ['an append', cmd({ data: [{ day: '2024-01-01', n: 1, at: '2024-01-01T10:00:00+02:00' }, { day: '2024-01-01', n: 2 }], delete_by: 'day' })],
    ['a replace', cmd({ data: [{ day: '2024-01-02', n: 3 }] }, 'replace')],
    ['an empty append', cmd({ data: [] })],
    ['an invalid record', cmd({ data: [{ day: '2024-02-30', n: 1 }] })],
    ['invalid JSON', cmd('{"data": [')],
    ['no body', cmd('')],
    ['a body after a UTF-8 byte-order mark', cmd(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ data: [{ day: '2024-01-04', n: 5 }] }))]))],
    ['a bad delete_by', cmd({ data: [], delete_by: 'n' })],
  ])('decides %s exactly as the calling thread does', async (_name, c) => {
    const expected = await outcome(inProcessDecider, c, dataset);
    expect(await outcome(pool.decider, c, dataset)).toEqual(expected);
  });

  it('accepts a body after a UTF-8 byte-order mark, as create does', async () => {
    const withMark = cmd(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ data: [{ day: '2024-01-04', n: 5 }] }))]));
    expect((await pool.decider(withMark, dataset)).events).toEqual(decideWriteSync(cmd({ data: [{ day: '2024-01-04', n: 5 }] }), dataset).events);
  });

  it('answers a missing dataset with not_found, and the error keeps its path', async () => {
    await expect(pool.decider(cmd({ data: [] }), undefined)).rejects.toMatchObject({ code: 'not_found', message: 'Dataset not found' });
    await expect(pool.decider(cmd({ data: [{ day: 'x', n: 1 }] }), dataset)).rejects.toMatchObject({ code: 'invalid', path: 'data[0].day' });
  });

  it('sends only the schema across, not the rows of a live dataset state', async () => {
    // A live state with a row map that could not be cloned at all: the task must not carry it.
    const live = { ...dataset, rows: new Map([[0, { day: '2024-01-01', n: 1, fn: () => 1 }]]), nextRow: 1 } as unknown as DatasetState;
    const c = cmd({ data: [{ day: '2024-01-03', n: 4 }] });
    expect((await pool.decider(c, live)).events).toEqual(decideWriteSync(c, dataset).events);
  });

  it('hands back the events with their records still encoded, built only when read', async () => {
    const c = cmd({ data: [{ day: '2024-01-05', n: 6 }, { day: '2024-01-06', n: 7 }] });
    const [event] = (await pool.decider(c, { ...dataset, definition: { ...definition, unique_by: [] } })).events;
    if (event?.type !== 'RecordsAppended') throw new Error(`expected one RecordsAppended, got ${JSON.stringify(event)}`);
    expect(encodedRecordsOf(event)?.count).toBe(2);
    expect(event.records).toEqual([
      { day: '2024-01-05', at: null, n: 6 },
      { day: '2024-01-06', at: null, n: 7 },
    ]);
  });

  it('moves a body that is its whole buffer, and copies one that is a view into a larger buffer, leaving it intact', async () => {
    const text = JSON.stringify({ data: [{ day: '2024-01-07', n: 8 }] });
    const whole = new Uint8Array(Buffer.from(text));
    const slab = Buffer.from(`xx${text}yy`);
    const view = slab.subarray(2, 2 + text.length);
    const expected = decideWriteSync(cmd(text), dataset).events;
    expect((await pool.decider(cmd(view), dataset)).events).toEqual(expected);
    expect(slab.toString()).toBe(`xx${text}yy`);
    expect((await pool.decider({ ...cmd(text), json: whole }, dataset)).events).toEqual(expected);
    expect(whole.byteLength).toBe(0); // moved to the worker, not copied
  });

  it('is not created without threads or without the bundled worker', () => {
    const told: string[] = [];
    expect(createWritePool(0, { onUnavailable: (m) => told.push(m) })).toBeUndefined();
    expect(told).toEqual([]); // none asked for: nothing to tell
    expect(createWritePool(1, { filename: '/nonexistent/write-worker.js', onUnavailable: (m) => told.push(m) })).toBeUndefined();
    expect(told).toEqual(['write workers unavailable (no bundled write-worker.js): deciding writes on the event loop']);
  });
});

/*
 * Records kept encoded (rows.ts): an event whose records are still encoded folds into exactly the state the
 * same event with built records gives, whatever follows (more appends, the window, replaces, reads in
 * between), and its records are built only when something uses them.
 */
import fc from 'fast-check';
import {
  encodedRecordsOf,
  evolve,
  initialState,
  recordsOf,
  RowMap,
  withEncodedRecords,
  type DatasetEvent,
  type DatasetRecord,
  type EncodedRecords,
  type State,
} from '../src';
import { datasetDefined, field, recordsAppended, recordsReplaced } from './specification';

const definition = (unique: boolean) => ({ fields: { day: field('date', 'Day'), n: field('number', 'N') }, unique_by: unique ? ['n'] : [] });

/** An encoding that counts its decodes and builds fresh copies each time, as a real one does. */
function counted(records: readonly DatasetRecord[]): EncodedRecords & { decodes: number } {
  const enc = {
    count: records.length,
    bytes: JSON.stringify(records).length,
    decodes: 0,
    decode: () => {
      enc.decodes += 1;
      return records.map((r) => ({ ...r }));
    },
  };
  return enc;
}

function encoded<E extends Extract<DatasetEvent, { records: unknown }>>(e: E): { event: E; enc: ReturnType<typeof counted> } {
  const { records, ...head } = e;
  const enc = counted(records);
  return { event: withEncodedRecords<E>(head, enc), enc };
}

const dump = (s: State): unknown =>
  [...s].map(([account, datasets]) => [account, [...datasets.values()].map((d) => ({ ...d, rows: [...d.rows.entries()] }))]);

const rec = (n: number): DatasetRecord => ({ day: `2024-01-${String((n % 28) + 1).padStart(2, '0')}`, n });

describe('an event with encoded records', () => {
  it('reads like any event: records built on first read, once, and the same JSON values', () => {
    const plain = recordsAppended('sales', [rec(1), rec(2)]);
    const { event, enc } = encoded(plain);
    expect(enc.decodes).toBe(0);
    expect(encodedRecordsOf(event)).toBe(enc);
    expect(JSON.parse(JSON.stringify(event))).toEqual(JSON.parse(JSON.stringify(plain)));
    expect(event.records).toEqual(plain.records);
    expect(event.records).toBe(event.records);
    expect(enc.decodes).toBe(1);
    // Once built, the records are what a fold stores: no second decode.
    expect(encodedRecordsOf(event)).toBeUndefined();
  });

  it('is appended to a dataset without building its records, and evicted by the window without building them', () => {
    let s = evolve(initialState(), datasetDefined('sales', definition(false)));
    const encs: ReturnType<typeof counted>[] = [];
    for (let i = 0; i < 12; i++) {
      const { event, enc } = encoded(recordsAppended('sales', Array.from({ length: 500 }, (_, j) => rec(i * 500 + j))));
      encs.push(enc);
      s = evolve(s, event);
    }
    const ds = s.get('acme')!.get('sales')!;
    expect(ds.rows).toBeInstanceOf(RowMap);
    expect(ds.rows.size).toBe(5000);
    expect(ds.nextRow).toBe(6000);
    expect(encs.every((e) => e.decodes === 0)).toBe(true);
    const records = recordsOf(ds);
    expect(records[0]).toEqual(rec(1000));
    expect(records.at(-1)).toEqual(rec(5999));
    expect([...ds.rows.keys()][0]).toBe(1000);
    // The two evicted events were never built; the ten kept were, once each.
    expect(encs.map((e) => e.decodes)).toEqual([0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
  });
});

describe('RowMap', () => {
  it('keeps insertion order across built and encoded rows, and deletes the oldest of both', () => {
    const m = new RowMap();
    m.set('a', rec(0));
    m.appendEncoded(10, counted([rec(10), rec(11), rec(12)]));
    m.appendEncoded(13, counted([rec(13)]));
    expect(m.size).toBe(5);
    m.deleteOldest(2);
    expect(m.size).toBe(3);
    expect([...m.keys()]).toEqual([11, 12, 13]);
    m.set('z', rec(99));
    expect([...m.entries()]).toEqual([
      [11, rec(11)],
      [12, rec(12)],
      [13, rec(13)],
      ['z', rec(99)],
    ]);
    m.clear();
    expect(m.size).toBe(0);
  });

  it('captures built and encoded rows without building any', () => {
    const m = new RowMap();
    m.set(0, rec(0));
    const enc = counted([rec(1), rec(2), rec(3)]);
    m.appendEncoded(1, enc);
    m.deleteOldest(2);
    const c = m.capture();
    expect(c).toEqual({ keys: [], records: [], deferred: [{ first: 1, start: 1, end: 3, source: enc }] });
    expect(enc.decodes).toBe(0);
    expect(m.hasDeferred).toBe(true);
  });

  it('notes every key set and deleted while tracked, built or encoded, and nothing before or after', () => {
    const m = new RowMap();
    m.set('before', rec(0));
    const changes = { set: [] as (string | number)[], deleted: [] as (string | number)[] };
    m.track(changes);
    m.set('a', rec(1));
    m.appendEncoded(10, counted([rec(10), rec(11)]));
    m.delete('absent');
    m.delete('a');
    m.set('a', rec(2));
    m.deleteOldest(2);
    expect(changes).toEqual({ set: ['a', 10, 11, 'a'], deleted: ['a', 'before', 10] });
    m.clear();
    expect(changes.deleted).toEqual(['a', 'before', 10, 11, 'a']);
    m.track(undefined);
    m.set('after', rec(3));
    m.delete('after');
    expect(changes).toEqual({ set: ['a', 10, 11, 'a'], deleted: ['a', 'before', 10, 11, 'a'] });

    // Rows still encoded are noted as they go, without being built.
    const enc = counted([rec(20), rec(21), rec(22)]);
    const e = new RowMap();
    const noted = { set: [] as (string | number)[], deleted: [] as (string | number)[] };
    e.track(noted);
    e.appendEncoded(20, enc);
    e.deleteOldest(2);
    expect(noted).toEqual({ set: [20, 21, 22], deleted: [20, 21] });
    expect(enc.decodes).toBe(0);
  });

  it('refuses an encoding that gives another number of records than it said, and stays usable', () => {
    const m = new RowMap();
    m.appendEncoded(0, { count: 2, bytes: 1, decode: () => [rec(0)] });
    expect(() => [...m.values()]).toThrow(/gave 1 records, not 2/);
    expect(m.size).toBe(2);
  });
});

/** The fold of the same events, once with built records and once with encoded ones, reads the same. */
describe('the fold with encoded records (property)', () => {
  const step = fc.oneof(
    fc.record({ kind: fc.constant('append' as const), n: fc.integer({ min: 0, max: 700 }), encode: fc.boolean(), deleteBy: fc.boolean() }),
    fc.record({ kind: fc.constant('replace' as const), n: fc.integer({ min: 0, max: 500 }), encode: fc.boolean(), deleteBy: fc.constant(false) }),
    fc.record({ kind: fc.constant('read' as const), n: fc.constant(0), encode: fc.constant(false), deleteBy: fc.constant(false) }),
  );

  it('gives the state the built records give', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 14 }), fc.boolean(), (steps, unique) => {
        const defined = datasetDefined('sales', definition(unique));
        let plain = evolve(initialState(), defined);
        let lazy = evolve(initialState(), defined);
        let serial = 0;
        for (const s of steps) {
          if (s.kind === 'read') {
            void recordsOf(lazy.get('acme')!.get('sales')!);
            continue;
          }
          const records = Array.from({ length: s.n }, () => rec(serial++ % 900));
          const e =
            s.kind === 'append'
              ? recordsAppended('sales', records, s.deleteBy ? 'day' : null)
              : recordsReplaced('sales', records);
          plain = evolve(plain, e);
          lazy = evolve(lazy, s.encode ? encoded(e).event : e);
        }
        expect(lazy.get('acme')!.get('sales')!.rows.size).toBe(plain.get('acme')!.get('sales')!.rows.size);
        expect(dump(lazy)).toEqual(dump(plain));
      }),
      { numRuns: 60 },
    );
  });
});

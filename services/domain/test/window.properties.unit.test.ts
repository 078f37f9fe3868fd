/*
 * Property-based tests of the record window and the fold. Runs are bounded so the whole unit project
 * stays fast: small-limit properties call enforceWindow(rows, deleteBy, limit) directly; a few runs use
 * the full 5000-record window through the fold.
 */
import fc from 'fast-check';
import {
  LIMITS,
  enforceWindow,
  fold,
  recordsOf,
  uniqueKey,
  type DatasetDefinition,
  type DatasetEvent,
  type DatasetRecord,
  type DatasetState,
  type State,
} from '../src';
import { appendedInChunks, datasetDefined, datasetDeleted, datasetIn, decide, appendRecords, field, recordsAppended, recordsReplaced, replaceRecords } from './specification';

const DAY_MS = 86_400_000;
const EPOCH_2020 = Date.UTC(2020, 0, 1);
const day = (i: number): string => new Date(EPOCH_2020 + i * DAY_MS).toISOString().slice(0, 10);
const instant = (ms: number): string => new Date(EPOCH_2020 + ms).toISOString();

type Row = readonly [string, DatasetRecord];
const toMap = (rows: readonly Row[]): Map<string, DatasetRecord> => new Map(rows);

/** Rows with few distinct dates and instants (so groups form), some nulls, unique row keys in insertion order. */
const rowsArb = fc
  .array(
    fc.record({
      day: fc.option(fc.integer({ min: 0, max: 7 }), { freq: 6 }),
      at: fc.option(fc.integer({ min: 0, max: 5 }), { freq: 6 }),
      n: fc.integer(),
    }),
    { maxLength: 60 },
  )
  .map((xs): Row[] =>
    xs.map((x, i) => [
      `#${i}`,
      // Instants a millisecond or a second apart: only exactly equal ones may be grouped.
      { day: x.day === null ? null : day(x.day), at: x.at === null ? null : instant((x.at % 3) * 1000 + Math.floor(x.at / 3)), n: x.n },
    ]),
  );
const deleteByArb = fc.constantFrom<string | null>(null, 'day', 'at');
const limitArb = fc.integer({ min: 1, max: 40 });

const isSubsequence = (sub: readonly Row[], of: readonly Row[]): boolean => {
  let j = 0;
  for (const row of of) if (j < sub.length && sub[j]?.[0] === row[0] && sub[j]?.[1] === row[1]) j++;
  return j === sub.length;
};
const countBy = (rows: readonly Row[], key: string): Map<string, number> => {
  const m = new Map<string, number>();
  for (const [, r] of rows) {
    const v = r[key];
    if (typeof v === 'string') m.set(v, (m.get(v) ?? 0) + 1);
  }
  return m;
};

describe('enforceWindow (small limits)', () => {
  it('never leaves more than the limit, keeps a subsequence in insertion order, and touches nothing within the limit', () => {
    fc.assert(
      fc.property(rowsArb, deleteByArb, limitArb, (rows, deleteBy, limit) => {
        const map = toMap(rows);
        enforceWindow(map, deleteBy, limit);
        const after = [...map];
        expect(after.length).toBeLessThanOrEqual(limit);
        expect(isSubsequence(after, rows)).toBe(true);
        if (rows.length <= limit) expect(after).toStrictEqual(rows);
      }),
      { numRuns: 300 },
    );
  });

  it('without delete_by drops exactly the oldest insertions', () => {
    fc.assert(
      fc.property(rowsArb, limitArb, (rows, limit) => {
        const map = toMap(rows);
        enforceWindow(map, null, limit);
        expect([...map]).toStrictEqual(rows.slice(Math.max(0, rows.length - limit)));
      }),
      { numRuns: 200 },
    );
  });

  it('with delete_by: for every value, either all its records remain or none do (no partial day, no partial instant)', () => {
    fc.assert(
      fc.property(rowsArb, fc.constantFrom('day', 'at'), limitArb, (rows, deleteBy, limit) => {
        const before = countBy(rows, deleteBy);
        const map = toMap(rows);
        enforceWindow(map, deleteBy, limit);
        const after = countBy([...map], deleteBy);
        for (const [value, n] of before) expect([0, n]).toContain(after.get(value) ?? 0);
      }),
      { numRuns: 300 },
    );
  });

  it('with delete_by: drops nulls first (oldest insertion first), then the oldest values, and no more than needed', () => {
    fc.assert(
      fc.property(rowsArb, fc.constantFrom('day', 'at'), limitArb, (rows, deleteBy, limit) => {
        const map = toMap(rows);
        enforceWindow(map, deleteBy, limit);
        const removed = rows.filter(([k]) => !map.has(k));
        const kept = rows.filter(([k]) => map.has(k));
        const nulls = rows.filter(([, r]) => r[deleteBy] === null);
        const removedValues = removed.map(([, r]) => r[deleteBy]).filter((v): v is string => typeof v === 'string');
        const keptValues = kept.map(([, r]) => r[deleteBy]).filter((v): v is string => typeof v === 'string');
        // Nulls are the oldest: a valued record goes only once every null has gone, and nulls go in insertion order.
        const removedNulls = removed.filter(([, r]) => r[deleteBy] === null);
        expect(removedNulls).toStrictEqual(nulls.slice(0, removedNulls.length));
        if (removedValues.length > 0) expect(removedNulls).toHaveLength(nulls.length);
        // Ordered by the field: every dropped value is older than every kept one.
        if (removedValues.length > 0 && keptValues.length > 0) {
          const newestDropped = removedValues.reduce((a, b) => (a > b ? a : b));
          const oldestKept = keptValues.reduce((a, b) => (a < b ? a : b));
          expect(newestDropped < oldestKept).toBe(true);
        }
        // Minimal: without the last group dropped, the dataset would still be over the limit.
        if (removed.length > 0) {
          if (removedValues.length === 0) expect(kept).toHaveLength(limit);
          else {
            const newestDropped = removedValues.reduce((a, b) => (a > b ? a : b));
            const lastGroup = removedValues.filter((v) => v === newestDropped).length;
            expect(kept.length + lastGroup).toBeGreaterThan(limit);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// Through the fold, with the real 5000-record window.

const stats: DatasetDefinition = {
  fields: { day: field('date', 'Day', { optional: true }), at: field('datetime', 'At'), n: field('number', 'N') },
  unique_by: [],
};
const keyed: DatasetDefinition = {
  fields: { team: field('string', 'Team'), day: field('date', 'Day'), n: field('number', 'N') },
  unique_by: ['team', 'day'],
};

interface Request {
  readonly kind: 'append' | 'replace';
  readonly count: number;
  readonly startDay: number;
  readonly spread: number;
  readonly nullEvery: number;
  readonly deleteBy: 'day' | 'at' | null;
}
const requestArb = fc.record<Request>({
  kind: fc.constantFrom<'append' | 'replace'>('append', 'append', 'append', 'replace'),
  count: fc.integer({ min: 0, max: LIMITS.recordsPerRequest }),
  startDay: fc.integer({ min: 0, max: 4000 }),
  spread: fc.integer({ min: 1, max: 40 }),
  nullEvery: fc.integer({ min: 0, max: 30 }),
  deleteBy: fc.constantFrom<'day' | 'at' | null>(null, 'day', 'at'),
});
/** Raw records of a request, as a client sends them: dates spread over a few days, instants a few ms apart. */
const requestData = (q: Request, seq: number): Record<string, unknown>[] =>
  Array.from({ length: q.count }, (_, i) => ({
    day: q.nullEvery > 0 && i % q.nullEvery === 0 ? null : day(q.startDay + (i % q.spread)),
    at: instant((q.startDay + (i % q.spread)) * 1000 + (i % 3)),
    n: seq * 1000 + i,
  }));
const requestCommand = (q: Request, seq: number) => {
  const data = requestData(q, seq);
  return q.kind === 'replace' ? replaceRecords('stats', { data }) : appendRecords('stats', { data, ...(q.deleteBy === null ? {} : { delete_by: q.deleteBy }) });
};

/** A dataset already holding `size` records, dates spread over the years, with a few nulls. */
const baseEvents = (size: number): DatasetEvent[] => [
  datasetDefined('stats', stats),
  ...appendedInChunks(
    'stats',
    Array.from({ length: size }, (_, i) => ({ day: i % 97 === 0 ? null : day(i % 1500), at: instant((i % 1500) * 1000), n: -i })),
  ),
];
const recordsOfWrite = (events: readonly DatasetEvent[]): readonly DatasetRecord[] => {
  const [e] = events;
  if (e?.type !== 'RecordsAppended' && e?.type !== 'RecordsReplaced') throw new Error('expected one write event');
  return e.records;
};
const snapshotRecords = (s: State): DatasetRecord[] => recordsOf(datasetIn(s, 'stats') as DatasetState);

describe('the fold under random requests (full 5000 window)', () => {
  it('never holds more than 5000 records after any request, and a date delete_by never leaves a partial day', () => {
    fc.assert(
      fc.property(fc.integer({ min: 4500, max: 5000 }), fc.array(requestArb, { minLength: 1, maxLength: 4 }), (size, requests) => {
        const state = fold(baseEvents(size));
        requests.forEach((q, seq) => {
          const before = snapshotRecords(state);
          const events = decide(requestCommand(q, seq), state);
          fold(events, state);
          const after = snapshotRecords(state);
          expect(after.length).toBeLessThanOrEqual(LIMITS.recordsPerDataset);
          if (q.kind === 'replace') {
            expect(after).toStrictEqual(recordsOfWrite(events));
            return;
          }
          const applied = [...before, ...recordsOfWrite(events)];
          if (applied.length <= LIMITS.recordsPerDataset) expect(after).toStrictEqual(applied);
          else if (q.deleteBy !== null) {
            // Precisely: for every value v of the delete_by field, the records holding v after the request
            // are either all those that held v once the request was applied (before truncation), or none.
            const pre = countBy(applied.map((r, i) => [String(i), r] as const), q.deleteBy);
            const post = countBy(after.map((r, i) => [String(i), r] as const), q.deleteBy);
            for (const [v, n] of pre) expect([0, n]).toContain(post.get(v) ?? 0);
          } else expect(after).toStrictEqual(applied.slice(applied.length - LIMITS.recordsPerDataset));
        });
      }),
      { numRuns: 10 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// unique_by: keys unique, and a simple model of the merge rule.

const keyedRecordArb = fc.record({ team: fc.constantFrom('a', 'b', 'c', 'a,b', '"'), day: fc.integer({ min: 0, max: 5 }).map(day), n: fc.integer() });
const keyedRequestArb = fc.record({ kind: fc.constantFrom<'append' | 'replace'>('append', 'append', 'replace'), data: fc.array(keyedRecordArb, { maxLength: 25 }) });

describe('unique_by datasets', () => {
  it('hold each unique key at most once, and match a model where the later record replaces the earlier (in its place within a request) and becomes the newest', () => {
    fc.assert(
      fc.property(fc.array(keyedRequestArb, { maxLength: 8 }), (requests) => {
        const state = fold([datasetDefined('keyed', keyed)]);
        let model: DatasetRecord[] = [];
        for (const q of requests) {
          const command = q.kind === 'append' ? appendRecords('keyed', { data: q.data }) : replaceRecords('keyed', { data: q.data });
          fold(decide(command, state), state);
          if (q.kind === 'replace') model = [];
          // Within the request the later duplicate wins in the first one's place; each surviving record
          // then replaces any stored one with its key and becomes the newest.
          const request: DatasetRecord[] = [];
          for (const r of q.data) {
            const at = request.findIndex((m) => m.team === r.team && m.day === r.day);
            if (at >= 0) request[at] = { team: r.team, day: r.day, n: r.n };
            else request.push({ team: r.team, day: r.day, n: r.n });
          }
          for (const r of request) {
            model = model.filter((m) => !(m.team === r.team && m.day === r.day));
            model.push(r);
          }
          const rows = recordsOf(datasetIn(state, 'keyed') as DatasetState);
          const keys = rows.map((r) => uniqueKey(keyed.unique_by, r));
          expect(new Set(keys).size).toBe(keys.length);
          expect(new Set(rows.map((r) => JSON.stringify([r.team, r.day]))).size).toBe(rows.length);
          expect(rows).toStrictEqual(model);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('stay unique at the full window too', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5200 }), { minLength: 1, maxLength: 500 }), (days) => {
        const base = Array.from({ length: 5000 }, (_, i) => ({ team: 't', day: day(i), n: i }));
        const state = fold([datasetDefined('keyed', keyed), ...appendedInChunks('keyed', base)]);
        fold(decide(appendRecords('keyed', { data: days.map((d, i) => ({ team: 't', day: day(d), n: -i })) }), state), state);
        const rows = recordsOf(datasetIn(state, 'keyed') as DatasetState);
        expect(rows.length).toBeLessThanOrEqual(5000);
        expect(new Set(rows.map((r) => r.day)).size).toBe(rows.length);
        expect(rows.length).toBe(Math.min(5000, new Set([...base.map((r) => r.day), ...days.map(day)]).size));
      }),
      { numRuns: 5 },
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// Determinism of the fold.

const daily: DatasetDefinition = { fields: { day: field('date', 'Day', { optional: true }), n: field('number', 'N') }, unique_by: ['day'] };
const plain: DatasetDefinition = { fields: { day: field('date', 'Day', { optional: true }), n: field('number', 'N') }, unique_by: [] };
const recordArb = fc.record({ day: fc.option(fc.integer({ min: 0, max: 6 }).map(day), { freq: 5 }), n: fc.integer({ min: -5, max: 5 }) });
const eventArb: fc.Arbitrary<DatasetEvent> = fc
  .record({
    type: fc.constantFrom('DatasetDefined', 'RecordsAppended', 'RecordsAppended', 'RecordsReplaced', 'DatasetDeleted'),
    account: fc.constantFrom('acme', 'globex'),
    dataset: fc.constantFrom('a', 'b'),
    incarnation: fc.constantFrom('i1', 'i2'),
    at: fc.integer({ min: 0, max: 1000 }),
    keyed: fc.boolean(),
    records: fc.array(recordArb, { maxLength: 6 }),
    deleteBy: fc.constantFrom<string | null>(null, 'day'),
  })
  .map((e): DatasetEvent => {
    const o = { account: e.account, incarnation: e.incarnation, at: e.at };
    switch (e.type) {
      case 'DatasetDefined':
        return datasetDefined(e.dataset, e.keyed ? daily : plain, o);
      case 'RecordsAppended':
        return recordsAppended(e.dataset, e.records, e.deleteBy, o);
      case 'RecordsReplaced':
        return recordsReplaced(e.dataset, e.records, o);
      case 'DatasetDeleted':
        return datasetDeleted(e.dataset, o);
    }
  });

const snapshot = (s: State) =>
  [...s].map(([account, datasets]) => [
    account,
    [...datasets].map(([id, ds]) => ({
      id,
      account: ds.account,
      incarnation: ds.incarnation,
      definition: ds.definition,
      created_at: ds.created_at,
      updated_at: ds.updated_at,
      nextRow: ds.nextRow,
      rows: [...ds.rows],
    })),
  ]);

function deepFreeze<T>(x: T): T {
  if (typeof x === 'object' && x !== null && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) deepFreeze(v);
  }
  return x;
}

describe('fold', () => {
  it('gives equal states when the same events are folded twice from the initial state, without touching the events', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), (events) => {
        deepFreeze(events);
        const once = fold(events);
        const twice = fold(events);
        expect(snapshot(twice)).toStrictEqual(snapshot(once));
        for (const [account, datasets] of once) {
          for (const [id, ds] of datasets) expect(recordsOf(twice.get(account)?.get(id) as DatasetState)).toStrictEqual(recordsOf(ds));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('folds a split history to the same state as the whole history', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), fc.nat(), (events, cut) => {
        const at = events.length === 0 ? 0 : cut % (events.length + 1);
        expect(snapshot(fold(events.slice(at), fold(events.slice(0, at))))).toStrictEqual(snapshot(fold(events)));
      }),
      { numRuns: 200 },
    );
  });
});

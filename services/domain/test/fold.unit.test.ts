import { LIMITS, enforceWindow, evolve, fold, initialState, recordsOf, streamKey, type DatasetDefinition, type DatasetEvent, type DatasetRecord, type RowKey } from '../src';
import {
  ACCOUNT,
  AT,
  appendRecords,
  appendedInChunks,
  datasetDefined,
  datasetDeleted,
  datasetIn,
  defineDataset,
  deleteDataset,
  field,
  given,
  recordsAppended,
  recordsReplaced,
  replaceRecords,
} from './specification';

const DAY_MS = 86_400_000;
/** Day `i` after 2020-01-01 as `YYYY-MM-DD` (the test side may use Date as an oracle). */
const day = (i: number): string => new Date(Date.UTC(2020, 0, 1) + i * DAY_MS).toISOString().slice(0, 10);
const instant = (ms: number): string => new Date(Date.UTC(2020, 0, 1) + ms).toISOString();

const log: DatasetDefinition = { fields: { msg: field('string', 'Message'), n: field('number', 'N') }, unique_by: [] };
const daily: DatasetDefinition = { fields: { day: field('date', 'Day'), n: field('number', 'N') }, unique_by: ['day'] };
const byDay: DatasetDefinition = { fields: { day: field('date', 'Day', { optional: true }), n: field('number', 'N') }, unique_by: [] };
const byAt: DatasetDefinition = { fields: { at: field('datetime', 'At'), n: field('number', 'N') }, unique_by: [] };

describe('append without unique_by', () => {
  it('adds every record to the existing contents, duplicates included, oldest first', () => {
    given([datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }])])
      .when(appendRecords('log', { data: [{ msg: 'b', n: 2 }, { msg: 'a', n: 1 }] }))
      .thenRecords([
        { msg: 'a', n: 1 },
        { msg: 'b', n: 2 },
        { msg: 'a', n: 1 },
      ]);
  });

  it("keys rows by their position in the dataset's history, counting on across appends and replaces", () => {
    // Snapshots keep these keys and the counter, so later appends must continue the same sequence.
    given([datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }, { msg: 'b', n: 2 }]), recordsAppended('log', [{ msg: 'c', n: 3 }])]).thenState((s) => {
      expect([...datasetIn(s, 'log')!.rows.keys()]).toStrictEqual([0, 1, 2]);
      expect(datasetIn(s, 'log')?.nextRow).toBe(3);
    });
    given([datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }]), recordsReplaced('log', [{ msg: 'b', n: 2 }, { msg: 'c', n: 3 }])]).thenState((s) => {
      expect([...datasetIn(s, 'log')!.rows.keys()]).toStrictEqual([1, 2]);
      expect(datasetIn(s, 'log')?.nextRow).toBe(3);
    });
  });

  it('stamps updated_at from the event and keeps created_at', () => {
    given([datasetDefined('log', log, { at: 10 }), recordsAppended('log', [{ msg: 'a', n: 1 }], null, { at: 20 })]).thenState((s) => {
      const ds = datasetIn(s, 'log');
      expect([ds?.created_at, ds?.updated_at]).toEqual([10, 20]);
    });
  });
});

describe('unique_by merge', () => {
  it('worked example: d1→1, d2→2; append d1→10 → d2→2, d1→10 (the update is now the newest)', () => {
    given([datasetDefined('daily', daily), recordsAppended('daily', [{ day: day(1), n: 1 }, { day: day(2), n: 2 }])])
      .when(appendRecords('daily', { data: [{ day: day(1), n: 10 }] }))
      .thenRecords([
        { day: day(2), n: 2 },
        { day: day(1), n: 10 },
      ]);
  });

  it('worked example: one request d1→1, d2→2, d1→3, d3→4 on an empty dataset → three records, the later d1 kept', () => {
    given([datasetDefined('daily', daily)])
      .when(appendRecords('daily', { data: [{ day: day(1), n: 1 }, { day: day(2), n: 2 }, { day: day(1), n: 3 }, { day: day(3), n: 4 }] }))
      .thenState((s) => {
        const records = recordsOf(datasetIn(s, 'daily')!);
        expect(records).toHaveLength(3);
        expect(records).toEqual(expect.arrayContaining([{ day: day(1), n: 3 }, { day: day(2), n: 2 }, { day: day(3), n: 4 }]));
        // In the order the worked example lists them: the later d1 wins and keeps the first d1's place.
        expect(records).toStrictEqual([{ day: day(1), n: 3 }, { day: day(2), n: 2 }, { day: day(3), n: 4 }]);
      });
  });

  it('replaces the stored record whole: omitted optional keys become null', () => {
    const def: DatasetDefinition = { fields: { day: field('date', 'Day'), n: field('number', 'N'), note: field('string', 'Note', { optional: true }) }, unique_by: ['day'] };
    given([datasetDefined('d', def), recordsAppended('d', [{ day: day(1), n: 1, note: 'first' }])])
      .when(appendRecords('d', { data: [{ day: day(1), n: 2 }] }))
      .thenRecords([{ day: day(1), n: 2, note: null }]);
  });

  it('merges on the combination of several unique_by fields', () => {
    const def: DatasetDefinition = { fields: { team: field('string', 'Team'), day: field('date', 'Day'), n: field('number', 'N') }, unique_by: ['team', 'day'] };
    given([datasetDefined('t', def), recordsAppended('t', [{ team: 'a', day: day(1), n: 1 }, { team: 'b', day: day(1), n: 2 }])])
      .when(appendRecords('t', { data: [{ team: 'a', day: day(2), n: 3 }, { team: 'a', day: day(1), n: 4 }] }))
      .thenRecords([
        { team: 'b', day: day(1), n: 2 },
        { team: 'a', day: day(2), n: 3 },
        { team: 'a', day: day(1), n: 4 },
      ]);
  });

  it('keeps values apart that would collide if joined naively', () => {
    const def: DatasetDefinition = { fields: { a: field('string', 'A'), b: field('string', 'B') }, unique_by: ['a', 'b'] };
    given([datasetDefined('t', def)])
      .when(appendRecords('t', { data: [{ a: 'x,', b: 'y' }, { a: 'x', b: ',y' }, { a: 'x","', b: 'y' }, { a: 'x', b: '","y' }] }))
      .thenState((s) => expect(datasetIn(s, 't')?.rows.size).toBe(4));
  });

  it('compares datetimes after normalisation to UTC: the same instant in two offsets is one key', () => {
    const def: DatasetDefinition = { fields: { at: field('datetime', 'At'), n: field('number', 'N') }, unique_by: ['at'] };
    given([datasetDefined('t', def)])
      .when(appendRecords('t', { data: [{ at: '2024-01-01T02:00:00+02:00', n: 1 }, { at: '2024-01-01T00:00:00Z', n: 2 }, { at: '2024-01-01T00:00:00.001Z', n: 3 }] }))
      .thenRecords([
        { at: '2024-01-01T00:00:00.000Z', n: 2 },
        { at: '2024-01-01T00:00:00.001Z', n: 3 },
      ]);
  });

  it('merges on a single number field by numeric value', () => {
    const def: DatasetDefinition = { fields: { id: field('number', 'Id'), s: field('string', 'S') }, unique_by: ['id'] };
    given([datasetDefined('t', def), recordsAppended('t', [{ id: 1, s: 'a' }, { id: 2, s: 'b' }])])
      .when(appendRecords('t', { data: [{ id: 1.0, s: 'c' }] }))
      .thenRecords([
        { id: 2, s: 'b' },
        { id: 1, s: 'c' },
      ]);
  });

  it('SPEC: four records sent with one duplicate pair leave three rows', () => {
    given([datasetDefined('daily', daily)])
      .when(appendRecords('daily', { data: [{ day: day(1), n: 1 }, { day: day(2), n: 2 }, { day: day(3), n: 3 }, { day: day(2), n: 20 }] }))
      .thenRecords([
        { day: day(1), n: 1 },
        { day: day(2), n: 20 },
        { day: day(3), n: 3 },
      ]);
  });
});

describe('replace', () => {
  const seven = [1, 2, 3, 4, 5, 6, 7].map((n) => ({ day: day(n === 6 ? 2 : n), n }));

  it('leaves exactly the supplied records', () => {
    given([datasetDefined('log', log), recordsAppended('log', [{ msg: 'old', n: 0 }])])
      .when(replaceRecords('log', { data: [{ msg: 'new', n: 1 }, { msg: 'new', n: 1 }] }))
      .thenRecords([
        { msg: 'new', n: 1 },
        { msg: 'new', n: 1 },
      ]);
  });

  it('worked example: 7 records, two sharing a unique_by key → 6 records, the later duplicate kept', () => {
    given([datasetDefined('daily', daily), recordsAppended('daily', [{ day: day(9), n: 9 }])])
      .when(replaceRecords('daily', { data: seven }))
      .thenState((s) => {
        const records = recordsOf(datasetIn(s, 'daily')!);
        expect(records).toHaveLength(6);
        expect(records).toContainEqual({ day: day(2), n: 6 });
        expect(records).not.toContainEqual({ day: day(2), n: 2 });
        expect(records).not.toContainEqual({ day: day(9), n: 9 });
      });
  });

  it('with data [] clears the records and keeps the dataset and its schema', () => {
    const events = [datasetDefined('daily', daily), recordsAppended('daily', [{ day: day(1), n: 1 }])];
    given(events)
      .when(replaceRecords('daily', { data: [] }))
      .thenState((s) => {
        const ds = datasetIn(s, 'daily');
        expect(ds?.definition).toStrictEqual(daily);
        expect(ds?.incarnation).toBe('inc-1');
        expect(ds?.rows.size).toBe(0);
      });
    given([...events, recordsReplaced('daily', [])]).when(defineDataset('daily', { fields: { day: { type: 'date', name: 'Day' }, n: { type: 'number', name: 'N' } }, unique_by: ['day'] })).then([]);
    given([...events, recordsReplaced('daily', [])])
      .when(appendRecords('daily', { data: [{ day: day(5), n: 5 }] }))
      .thenRecords([{ day: day(5), n: 5 }]);
  });

  it('orders later appends after the replaced records', () => {
    given([datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }]), recordsReplaced('log', [{ msg: 'b', n: 2 }])])
      .when(appendRecords('log', { data: [{ msg: 'c', n: 3 }] }))
      .thenRecords([
        { msg: 'b', n: 2 },
        { msg: 'c', n: 3 },
      ]);
  });
});

describe('delete and re-create', () => {
  const old = [datasetDefined('sales', daily, { incarnation: 'old' }), recordsAppended('sales', [{ day: day(1), n: 1 }], null, { incarnation: 'old' })];

  it('removes the schema and the records', () => {
    given([...old, datasetDeleted('sales', { incarnation: 'old' })]).thenNoDataset('sales');
    given([...old, datasetDeleted('sales', { incarnation: 'old' })]).thenState((s) => expect(s.has(ACCOUNT)).toBe(false));
  });

  it('re-creates the id with another schema; the old data never reappears', () => {
    const events = [
      ...old,
      datasetDeleted('sales', { incarnation: 'old' }),
      datasetDefined('sales', log, { incarnation: 'new' }),
      // Late or redelivered events of the deleted incarnation.
      recordsAppended('sales', [{ day: day(2), n: 2 }], null, { incarnation: 'old' }),
      recordsReplaced('sales', [{ day: day(3), n: 3 }], { incarnation: 'old' }),
      datasetDeleted('sales', { incarnation: 'old' }),
      datasetDefined('sales', daily, { incarnation: 'old' }),
    ];
    given(events.slice(0, 4)).thenRecords('sales', []);
    given(events.slice(0, 7))
      .when(appendRecords('sales', { data: [{ msg: 'hello', n: 1 }] }))
      .thenRecords([{ msg: 'hello', n: 1 }]);
    given(events.slice(0, 7)).thenState((s) => {
      expect(datasetIn(s, 'sales')?.definition).toStrictEqual(log);
      expect(datasetIn(s, 'sales')?.incarnation).toBe('new');
    });
  });

  it("removes only the deleted dataset: the account's other datasets stay, records and all", () => {
    const two = [...old, datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }])];
    given([...two, datasetDeleted('sales', { incarnation: 'old' })]).thenRecords('log', [{ msg: 'a', n: 1 }]);
    given(two)
      .when(deleteDataset('log'))
      .thenState((s) => {
        expect(datasetIn(s, 'log')).toBeUndefined();
        expect(recordsOf(datasetIn(s, 'sales')!)).toStrictEqual([{ day: day(1), n: 1 }]);
        expect([...(s.get(ACCOUNT)?.keys() ?? [])]).toStrictEqual(['sales']);
      });
  });

  it('decides a delete against the live incarnation and the fold applies it', () => {
    given(old)
      .when(deleteDataset('sales'))
      .thenState((s) => expect(datasetIn(s, 'sales')).toBeUndefined());
  });
});

describe('incarnations: events of another incarnation are ignored', () => {
  const live = [datasetDefined('log', log, { incarnation: 'live' }), recordsAppended('log', [{ msg: 'a', n: 1 }], null, { incarnation: 'live' })];

  it.each<[string, DatasetEvent]>([
    ['an append', recordsAppended('log', [{ msg: 'x', n: 9 }], null, { incarnation: 'stale' })],
    ['a replace', recordsReplaced('log', [{ msg: 'x', n: 9 }], { incarnation: 'stale' })],
    ['a delete', datasetDeleted('log', { incarnation: 'stale' })],
  ])('ignores %s of another incarnation', (_label, event) => {
    given([...live, event]).thenRecords('log', [{ msg: 'a', n: 1 }]);
  });

  it.each<[string, DatasetEvent]>([
    ['an append', recordsAppended('log', [{ msg: 'x', n: 9 }])],
    ['a replace', recordsReplaced('log', [{ msg: 'x', n: 9 }])],
    ['a delete', datasetDeleted('log')],
  ])('ignores %s for a dataset that does not exist', (_label, event) => {
    given([event]).thenNoDataset('log');
  });

  it('takes a redelivered definition of the live incarnation as a no-op (records kept)', () => {
    given([...live, datasetDefined('log', log, { incarnation: 'live', at: AT + 99 })]).thenState((s) => {
      expect(recordsOf(datasetIn(s, 'log')!)).toStrictEqual([{ msg: 'a', n: 1 }]);
      expect(datasetIn(s, 'log')?.created_at).toBe(AT);
    });
  });

  it('takes a definition of a new incarnation over the live one as a fresh dataset: new schema, no records, new times', () => {
    // The schema side decides creates one at a time, but a fold must still end in the newest incarnation
    // if a log ever holds two definitions of an id without a delete between them.
    given([...live, datasetDefined('log', daily, { incarnation: 'next', at: AT + 5 })]).thenState((s) => {
      const ds = datasetIn(s, 'log');
      expect(ds?.incarnation).toBe('next');
      expect(ds?.definition).toStrictEqual(daily);
      expect(ds?.rows.size).toBe(0);
      expect([ds?.created_at, ds?.updated_at]).toStrictEqual([AT + 5, AT + 5]);
    });
    given([...live, datasetDefined('log', daily, { incarnation: 'next' }), recordsAppended('log', [{ msg: 'late', n: 2 }], null, { incarnation: 'live' })])
      .when(appendRecords('log', { data: [{ day: day(1), n: 1 }] }))
      .thenRecords([{ day: day(1), n: 1 }]);
  });

  it('keeps accounts apart', () => {
    given([...live, datasetDefined('log', log, { account: 'globex' }), recordsAppended('log', [{ msg: 'g', n: 0 }], null, { account: 'globex' })]).thenState((s) => {
      expect(recordsOf(datasetIn(s, 'log')!)).toStrictEqual([{ msg: 'a', n: 1 }]);
      expect(recordsOf(datasetIn(s, 'log', 'globex')!)).toStrictEqual([{ msg: 'g', n: 0 }]);
    });
  });

  it('leaves the state as it is on an event type it does not know', () => {
    const unknown = { ...datasetDeleted('log', { incarnation: 'live' }), type: 'DatasetRenamed' } as unknown as DatasetEvent;
    given([...live, unknown]).thenRecords('log', [{ msg: 'a', n: 1 }]);
  });
});

describe('the 5000-record window', () => {
  const logRecords = (from: number, n: number): DatasetRecord[] => Array.from({ length: n }, (_, i) => ({ msg: `m${from + i}`, n: from + i }));

  it('leaves a dataset at exactly 5000 alone', () => {
    given([datasetDefined('log', log), ...appendedInChunks('log', logRecords(0, LIMITS.recordsPerDataset))]).thenState((s) =>
      expect(datasetIn(s, 'log')?.rows.size).toBe(5000),
    );
  });

  it('worked example: no delete_by, 5000 stored; append 3 → the 3 oldest-inserted go; 5000 remain', () => {
    given([datasetDefined('log', log), ...appendedInChunks('log', logRecords(0, 5000))])
      .when(appendRecords('log', { data: logRecords(5000, 3) }))
      .thenState((s) => {
        const records = recordsOf(datasetIn(s, 'log')!);
        expect(records).toHaveLength(5000);
        expect(records[0]).toStrictEqual({ msg: 'm3', n: 3 });
        expect(records.at(-1)).toStrictEqual({ msg: 'm5002', n: 5002 });
      });
  });

  it('drops by insertion even when a unique_by merge made an old key the newest', () => {
    const records = Array.from({ length: 5000 }, (_, i) => ({ day: day(i), n: i }));
    given([datasetDefined('daily', daily), ...appendedInChunks('daily', records)])
      .when(appendRecords('daily', { data: [{ day: day(0), n: -1 }, { day: day(6000), n: 6000 }] }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'daily')!);
        expect(rows).toHaveLength(5000);
        expect(rows[0]).toStrictEqual({ day: day(2), n: 2 }); // day 1 was the oldest insertion left
        expect(rows).toContainEqual({ day: day(0), n: -1 });
      });
  });

  it('does not truncate when merges keep a full unique_by dataset at 5000', () => {
    const records = Array.from({ length: 5000 }, (_, i) => ({ day: day(i), n: i }));
    given([datasetDefined('daily', daily), ...appendedInChunks('daily', records)])
      .when(appendRecords('daily', { data: records.slice(0, 500).map((r) => ({ ...r, n: r.n + 1 })) }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'daily')!);
        expect(rows).toHaveLength(5000);
        expect(rows.at(-1)).toStrictEqual({ day: day(499), n: 500 });
      });
  });

  it('worked example: delete_by date, 4999 stored, oldest day holds 3; append 2 of a new day → that day goes whole; 4998 remain', () => {
    // Day 0 holds 3 records; the other 4996 spread over days 1..2498, two a day, inserted newest first.
    const stored: DatasetRecord[] = [];
    for (let i = 4995; i >= 0; i--) stored.push({ day: day(1 + Math.floor(i / 2)), n: i });
    stored.push({ day: day(0), n: -1 }, { day: day(0), n: -2 }, { day: day(0), n: -3 });
    expect(stored).toHaveLength(4999);
    given([datasetDefined('stats', byDay), ...appendedInChunks('stats', stored)])
      .when(appendRecords('stats', { data: [{ day: day(3000), n: 1 }, { day: day(3000), n: 2 }], delete_by: 'day' }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'stats')!);
        expect(rows).toHaveLength(4998);
        expect(rows.filter((r) => r.day === day(0))).toHaveLength(0);
        expect(rows.filter((r) => r.day === day(3000))).toHaveLength(2);
        expect(rows.filter((r) => r.day === day(1))).toHaveLength(2);
      });
  });

  it('orders by the delete_by field, not by insertion: the oldest value goes even when inserted last', () => {
    const stored = Array.from({ length: 5000 }, (_, i) => ({ day: day(100 + i), n: i }));
    given([datasetDefined('stats', byDay), ...appendedInChunks('stats', stored)])
      .when(appendRecords('stats', { data: [{ day: day(5), n: -5 }], deleteBy: 'day' }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'stats')!);
        expect(rows).toHaveLength(5000);
        expect(rows).not.toContainEqual({ day: day(5), n: -5 });
        expect(rows[0]).toStrictEqual({ day: day(100), n: 0 });
      });
  });

  it('worked example: delete_by datetime groups only equal instants (millisecond precision)', () => {
    const stored: DatasetRecord[] = [
      { at: instant(0), n: 0 },
      { at: instant(0), n: 1 },
      { at: instant(1), n: 2 },
      { at: instant(1), n: 3 },
      ...Array.from({ length: 4996 }, (_, i) => ({ at: instant(1000 + i), n: 4 + i })),
    ];
    given([datasetDefined('events', byAt), ...appendedInChunks('events', stored)])
      .when(appendRecords('events', { data: [{ at: '2021-01-01T00:00:00Z', n: 9999 }], delete_by: ['at'] }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'events')!);
        expect(rows).toHaveLength(4999);
        expect(rows.map((r) => r.n).slice(0, 2)).toStrictEqual([2, 3]);
        expect(rows.filter((r) => r.at === '2020-01-01T00:00:00.001Z')).toHaveLength(2);
      });
  });

  it('compares datetimes as instants: a value written with an offset groups with the equal UTC instant', () => {
    const stored: DatasetRecord[] = Array.from({ length: 5000 }, (_, i) => ({ at: instant(10_000 + i), n: i }));
    given([datasetDefined('events', byAt), ...appendedInChunks('events', stored)])
      .when(appendRecords('events', { data: [{ at: '2020-01-01T02:00:10.000+02:00', n: -1 }], delete_by: 'at' }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'events')!);
        // 2020-01-01T00:00:10.000Z equals the oldest stored instant: both go together.
        expect(rows).toHaveLength(4999);
        expect(rows.some((r) => r.n === 0 || r.n === -1)).toBe(false);
      });
  });

  it('worked example: delete_by an optional date field, records holding null go first', () => {
    const stored: DatasetRecord[] = [
      ...Array.from({ length: 2000 }, (_, i) => ({ day: day(i), n: i })),
      { day: null, n: -1 },
      ...Array.from({ length: 2997 }, (_, i) => ({ day: day(2000 + i), n: 2000 + i })),
      { day: null, n: -2 },
      { day: null, n: -3 },
    ];
    const events = [datasetDefined('stats', byDay), ...appendedInChunks('stats', stored)];
    given(events)
      .when(appendRecords('stats', { data: [{ day: day(9000), n: 9000 }, { day: day(9001), n: 9001 }], delete_by: 'day' }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'stats')!);
        expect(rows).toHaveLength(5000);
        expect(rows.filter((r) => r.day === null).map((r) => r.n)).toStrictEqual([-3]);
        expect(rows[0]).toStrictEqual({ day: day(0), n: 0 });
      });
    given(events)
      .when(appendRecords('stats', { data: [1, 2, 3, 4, 5].map((i) => ({ day: day(9000 + i), n: 9000 + i })), delete_by: 'day' }))
      .thenState((s) => {
        const rows = recordsOf(datasetIn(s, 'stats')!);
        expect(rows).toHaveLength(5000);
        expect(rows.filter((r) => r.day === null)).toHaveLength(0);
        expect(rows[0]).toStrictEqual({ day: day(2), n: 2 });
      });
  });

  it('without delete_by drops by insertion even when the records hold a field named "null"', () => {
    const rows = new Map<RowKey, DatasetRecord>([
      [0, { null: '2024-01-02' }],
      [1, { null: '2024-01-01' }],
      [2, { null: '2024-01-03' }],
    ]);
    enforceWindow(rows, null, 2);
    expect([...rows.values()]).toStrictEqual([{ null: '2024-01-01' }, { null: '2024-01-03' }]);
  });

  it('drops nothing when a delete_by append stays within 5000', () => {
    const stored = Array.from({ length: 4990 }, (_, i) => ({ day: day(i), n: i }));
    given([datasetDefined('stats', byDay), ...appendedInChunks('stats', stored)])
      .when(appendRecords('stats', { data: [{ day: day(0), n: -1 }], delete_by: 'day' }))
      .thenState((s) => expect(datasetIn(s, 'stats')?.rows.size).toBe(4991));
  });
});

describe('evolve and fold', () => {
  it('fold is evolve applied in order, from an empty state', () => {
    const events = [datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }]), recordsAppended('log', [{ msg: 'b', n: 2 }])];
    const byHand = events.reduce(evolve, initialState());
    expect(recordsOf(datasetIn(byHand, 'log')!)).toStrictEqual(recordsOf(datasetIn(fold(events), 'log')!));
    expect(fold([]).size).toBe(0);
  });

  it("puts one dataset's events in one stream, named account/dataset", () => {
    expect(streamKey('acme', 'sales.by.day')).toBe('acme/sales.by.day');
    expect(streamKey('acme', 'a')).not.toBe(streamKey('globex', 'a'));
  });

  it('folds on from a given state', () => {
    const first = [datasetDefined('log', log), recordsAppended('log', [{ msg: 'a', n: 1 }])];
    const later = [recordsAppended('log', [{ msg: 'b', n: 2 }])];
    expect(recordsOf(datasetIn(fold(later, fold(first)), 'log')!)).toStrictEqual([
      { msg: 'a', n: 1 },
      { msg: 'b', n: 2 },
    ]);
  });
});

import fc from 'fast-check';
import type { LoadedDataset, ProjectedHead, StreamPosition } from '@pushbase/contracts';
import {
  daysFromCivil,
  DomainError,
  EVENT_SCHEMA_VERSION,
  formatUtcMillis,
  initialState,
  parseDefinition,
  recordsOf,
  type DatasetDefinition,
  type DatasetEvent,
  type DatasetRecord,
  type FieldType,
  type FieldValue,
  type State,
} from '@pushbase/domain';
import { command, connectClickHouse, selectRows, type ClickHouseConnection } from '../src/client';
import { heldState } from '@pushbase/projector';
import { ClickHouseHeadsStore } from '../src/heads-store';
import { ClickHouseReadModel } from '../src/read-model';
import { ClickHouseProjectionStore } from '../src/write-store';
import { emptyBatch, holdLoaded, partitionStream, plain, projectEvent, projectionIn, pureFold, testDatabase, writeBatch, type Batch, type TestDatabase } from './support';

/*
 * The ClickHouse projection store against a real ClickHouse (18.16 here): exact round trips of every field
 * kind, the crash argument (docs/clickhouse.md → Crash safety: a write interrupted before or between its two
 * inserts, then a restart that redelivers a suffix of the stream), FINAL without PREWHERE, and the errors a
 * projector acts on.
 */

const DAY = 86_400_000;
const FIRST_DAY = daysFromCivil(0, 1, 1);
const LAST_DAY = daysFromCivil(9999, 12, 31);
const base = (account: string, dataset: string, incarnation: string) => ({
  schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION,
  account,
  dataset,
  incarnation,
  at: 1_700_000_000_000,
});

const valueArb = (type: FieldType): fc.Arbitrary<FieldValue> => {
  switch (type) {
    case 'number':
    case 'percentage':
    case 'duration':
      // Every finite double: -0, subnormals (5e-324), the largest, and ordinary ones.
      return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(-0, 5e-324, Number.MAX_VALUE, 0.1, 1 / 3));
    case 'money':
      return fc.oneof(fc.maxSafeInteger(), fc.constantFrom(2 ** 53, -(2 ** 53), -0));
    case 'string':
      // Any code point: NUL, quotes, backslashes, newlines, astral characters; up to 100 of them.
      return fc.oneof(fc.string({ unit: 'binary', maxLength: 100 }), fc.constantFrom('', '\u0000', "'\\\n", '😀'.repeat(100)));
    case 'date':
      return fc.integer({ min: FIRST_DAY, max: LAST_DAY }).map((d) => formatUtcMillis(d * DAY).slice(0, 10));
    case 'datetime':
      return fc
        .oneof(fc.integer({ min: FIRST_DAY * DAY, max: (LAST_DAY + 1) * DAY - 1 }), fc.constantFrom(-1, 0, FIRST_DAY * DAY, (LAST_DAY + 1) * DAY - 1))
        .map(formatUtcMillis);
  }
};

const TYPES: readonly FieldType[] = ['number', 'percentage', 'money', 'duration', 'string', 'date', 'datetime'];

/** A valid definition of 1–10 fields of mixed kinds, with or without unique_by. */
const definitionArb: fc.Arbitrary<DatasetDefinition> = fc
  .record({
    types: fc.array(fc.record({ type: fc.constantFrom(...TYPES), optional: fc.boolean() }), { minLength: 1, maxLength: 10 }),
    unique: fc.nat(),
  })
  .map(({ types, unique }) => {
    const fields = Object.fromEntries(
      types.map((t, i) => [
        `f${i}_${t.type}`,
        { type: t.type, name: `Field ${i}`, optional: t.optional, ...(t.type === 'money' ? { currency_code: 'EUR' } : {}), ...(t.type === 'duration' ? { time_unit: 'seconds' } : {}) },
      ]),
    );
    const keys = Object.keys(fields);
    // unique % 3: none, one field, or every string/date/datetime field.
    const multi = keys.filter((k) => /_(string|date|datetime)$/.test(k));
    const unique_by = unique % 3 === 0 ? [] : unique % 3 === 1 ? [keys[unique % keys.length] as string] : multi;
    return parseDefinition({ fields, unique_by });
  });

const recordsArb = (def: DatasetDefinition): fc.Arbitrary<DatasetRecord[]> =>
  fc.array(
    fc.record(Object.fromEntries(Object.entries(def.fields).map(([k, f]) => [k, f.optional ? fc.option(valueArb(f.type), { freq: 4 }) : valueArb(f.type)]))),
    { minLength: 0, maxLength: 40 },
  );

/**
 * A connection whose INSERTs fail as if the projector died while sending them, counted in the order they
 * are sent: the `at`-th and every later one, or (`onlyThat`) the `at`-th alone, the others landing. A
 * write sends its records insert, then its heads-table insert (together), so this covers "nothing landed",
 * "only the records", and "only the heads table".
 */
interface Crash {
  readonly at: number;
  readonly onlyThat: boolean;
}
function crashing(conn: ClickHouseConnection, crash: Crash): ClickHouseConnection {
  let sent = 0;
  const client = new Proxy(conn.client, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (prop === 'exec') {
        return (params: { query: string }) => {
          if (!params.query.startsWith('INSERT')) return target.exec(params);
          const i = sent++;
          return i === crash.at || (i > crash.at && !crash.onlyThat) ? Promise.reject(new Error('simulated crash')) : target.exec(params);
        };
      }
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { ...conn, client };
}

describe('ClickHouseProjection store', () => {
  let db: TestDatabase;
  let run = 0;
  const freshAccount = (): string => `acc_${process.pid}_${run++}`;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('gives back exactly the records the fold holds, for every field kind (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        definitionArb.chain((def) => fc.record({ def: fc.constant(def), appends: fc.array(recordsArb(def), { minLength: 1, maxLength: 3 }) })),
        async ({ def, appends }) => {
          const account = freshAccount();
          const events: DatasetEvent[] = [
            { ...base(account, 'ds', 'i1'), type: 'DatasetDefined', definition: def },
            ...appends.map((records): DatasetEvent => ({ ...base(account, 'ds', 'i1'), type: 'RecordsAppended', records, delete_by: null })),
          ];
          const batch = emptyBatch();
          let s: State = initialState();
          events.forEach((e, offset) => (s = projectEvent(s, e, { partition: 3, offset }, batch)));
          await writeBatch(db.store, batch);

          const expected = pureFold(events).get(account)?.get('ds');
          const loaded = await db.store.load(account, 'ds');
          expect(loaded?.position).toEqual({ partition: 3, offset: events.length - 1 });
          expect(plain(loaded?.state)).toEqual(plain(expected));
          await expect(db.readModel.listRecords(account, 'ds')).resolves.toEqual(expected === undefined ? undefined : recordsOf(expected));
          // The projector's load: each record with its date and datetime values only, which is what it holds.
          const dates = await db.store.load(account, 'ds', { values: 'dates' });
          expect(dates?.position).toEqual(loaded?.position);
          const held = pureFold(events).get(account)?.get('ds');
          expect(plain(dates?.state)).toEqual(plain(held === undefined ? undefined : heldState(held)));
        },
      ),
      { numRuns: 25 },
    );
  });

  it('loads only date and datetime values for the projector, in insertion order, numbered keys as numbers; none for a dataset without them', async () => {
    const account = freshAccount();
    const dated = parseDefinition({
      fields: {
        n: { type: 'number', name: 'N' },
        d: { type: 'date', name: 'D', optional: true },
        s: { type: 'string', name: 'S' },
        t: { type: 'datetime', name: 'T' },
      },
    });
    const undated = parseDefinition({ fields: { k: { type: 'string', name: 'K' }, n: { type: 'number', name: 'N' } }, unique_by: ['k'] });
    const batch = emptyBatch();
    const fold = partitionStream(1);
    const apply = (e: DatasetEvent): void => fold(batch, e);
    apply({ ...base(account, 'dated', 'i1'), type: 'DatasetDefined', definition: dated });
    apply({ ...base(account, 'undated', 'i2'), type: 'DatasetDefined', definition: undated });
    const records: DatasetRecord[] = [
      { n: 1, d: '2024-05-01', s: 'a', t: '2024-05-01T10:00:00.000Z' },
      { n: 2, d: null, s: 'b', t: '1999-12-31T23:59:59.999Z' },
      { n: 3, d: '0001-01-01', s: 'c', t: '2024-05-01T09:00:00.000Z' },
    ];
    apply({ ...base(account, 'dated', 'i1'), type: 'RecordsAppended', records, delete_by: null });
    apply({ ...base(account, 'undated', 'i2'), type: 'RecordsAppended', records: [{ k: 'z', n: 1 }, { k: 'a', n: 2 }], delete_by: null });
    await writeBatch(db.store, batch);

    const loadedDated = await db.store.load(account, 'dated', { values: 'dates' });
    expect([...(loadedDated?.state?.rows ?? [])]).toEqual([
      [0, { d: '2024-05-01', t: '2024-05-01T10:00:00.000Z' }],
      [1, { d: null, t: '1999-12-31T23:59:59.999Z' }],
      [2, { d: '0001-01-01', t: '2024-05-01T09:00:00.000Z' }],
    ]);
    expect(loadedDated?.state?.nextRow).toBe(3);
    expect(loadedDated?.position).toEqual({ partition: 1, offset: 2 });
    const loadedUndated = await db.store.load(account, 'undated', { values: 'dates' });
    // The fold's keys of unique_by rows (and their order: z before a) are as a full load has them.
    const fullUndated = await db.store.load(account, 'undated');
    expect([...(fullUndated?.state?.rows.values() ?? [])]).toEqual([{ k: 'z', n: 1 }, { k: 'a', n: 2 }]);
    expect([...(loadedUndated?.state?.rows ?? [])]).toEqual([...(fullUndated?.state?.rows.keys() ?? [])].map((key) => [key, {}]));
    // The full load of the same datasets, for the readers, still has every value.
    expect([...((await db.store.load(account, 'dated'))?.state?.rows.values() ?? [])]).toEqual(records);
  });

  it('a write into the buffer of a larger one before it stores its own rows only, and writes at once use buffers of their own', async () => {
    // The store encodes each write into the buffer of the last one that landed (write-store.ts, `scratch`).
    const account = freshAccount();
    const definition = parseDefinition({ fields: { s: { type: 'string', name: 'S' }, n: { type: 'number', name: 'N' } } });
    const apply = partitionStream(2);
    const write = async (events: DatasetEvent[]): Promise<void> => {
      const batch = emptyBatch();
      for (const e of events) apply(batch, e);
      await writeBatch(db.store, batch);
    };
    const large = Array.from({ length: 400 }, (_, i) => ({ s: `${'long value '.repeat(8)}${i}`, n: i }));
    await write([
      { ...base(account, 'large', 'i1'), type: 'DatasetDefined', definition },
      { ...base(account, 'large', 'i1'), type: 'RecordsAppended', records: large, delete_by: null },
    ]);
    const small = [{ s: 'x', n: -1 }];
    await write([
      { ...base(account, 'small', 'i2'), type: 'DatasetDefined', definition },
      { ...base(account, 'small', 'i2'), type: 'RecordsAppended', records: small, delete_by: null },
    ]);
    expect([...((await db.store.load(account, 'small'))?.state?.rows.values() ?? [])]).toEqual(small);
    expect([...((await db.store.load(account, 'large'))?.state?.rows.values() ?? [])]).toEqual(large);

    // Two writes at once: the second must not encode into the buffer the first is still sending.
    const batches = [emptyBatch(), emptyBatch()];
    const both = [large.map((r) => ({ ...r, n: r.n + 1000 })), large.map((r) => ({ ...r, s: r.s.toUpperCase() }))];
    both.forEach((records, i) => {
      const events: DatasetEvent[] = [
        { ...base(account, `both${i}`, `b${i}`), type: 'DatasetDefined', definition },
        { ...base(account, `both${i}`, `b${i}`), type: 'RecordsAppended', records, delete_by: null },
      ];
      for (const e of events) apply(batches[i]!, e);
    });
    await Promise.all(batches.map((b) => writeBatch(db.store, b)));
    for (const [i, records] of both.entries()) expect([...((await db.store.load(account, `both${i}`))?.state?.rows.values() ?? [])]).toEqual(records);
  });

  it('takes rows encoded part by part as they were added, several parts in one write, and refuses parts its heads do not match', async () => {
    // The projector adds each event's rows to its partition's part (write-store.ts, EncodedRows); the
    // parts' buffers serve the next writes' parts once copied into a body.
    const account = freshAccount();
    const definition = parseDefinition({ fields: { s: { type: 'string', name: 'S' }, n: { type: 'number', name: 'N' } } });
    const streams = [partitionStream(3), partitionStream(4)];
    const records = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ s: `${tag}-${i}-${'é'.repeat(i % 3)}`, n: i }));
    for (const round of [0, 1]) {
      const parts = [db.store.begin(), db.store.begin()];
      const heads: ProjectedHead[] = [];
      const expected: [string, DatasetRecord[]][] = [];
      for (const [p, part] of parts.entries()) {
        const id = `part${p}`;
        const appended = records(`r${round}p${p}`, 50 + 30 * p);
        const events: DatasetEvent[] = [
          ...(round === 0 ? [{ ...base(account, id, `p${p}`), type: 'DatasetDefined' as const, definition }] : []),
          { ...base(account, id, `p${p}`), type: 'RecordsAppended', records: appended, delete_by: null },
        ];
        for (const e of events) {
          // One event at a time, with its own head, as the projector adds them.
          const batch = emptyBatch();
          streams[p]!(batch, e);
          part.add(batch.rows, [...batch.heads.values()]);
          heads.push(...batch.heads.values());
        }
        expected.push([id, round === 0 ? appended : [...records(`r0p${p}`, 50 + 30 * p), ...appended]]);
      }
      const newest = new Map(heads.map((h) => [h.dataset, h]));
      await db.store.prepare(parts, [...newest.values()]).send();
      // A part goes into one write: its buffer now serves the next parts.
      expect(() => db.store.prepare(parts, [...newest.values()])).toThrow(/went into a write already/);
      expect(() => parts[0]!.add([], [])).toThrow(/went into a write already/);
      for (const [id, want] of expected) expect([...((await db.store.load(account, id))?.state?.rows.values() ?? [])]).toEqual(want);
    }

    // The heads decide: rows encoded with another definition than their incarnation's head, or not covered.
    const other = db.store.begin();
    const batch = emptyBatch();
    const stream = partitionStream(5);
    stream(batch, { ...base(account, 'mismatch', 'm1'), type: 'DatasetDefined', definition });
    stream(batch, { ...base(account, 'mismatch', 'm1'), type: 'RecordsAppended', records: records('m', 3), delete_by: null });
    const [head] = [...batch.heads.values()];
    other.add(batch.rows, [head!]);
    const changed = parseDefinition({ fields: { n: { type: 'number', name: 'N' }, s: { type: 'string', name: 'S' } } });
    expect(() => db.store.prepare([other], [{ ...head!, definition: changed }])).toThrow(/another definition/);
    expect(() => db.store.prepare([other], [{ ...head!, version: 0 }])).toThrow(/need a head of at least that version/);
    expect(() => db.store.prepare([other], [{ ...head!, incarnation: 'm2' }])).toThrow(/needs that incarnation's head/);
  });

  it('loadMany reads many datasets in a few queries, each as load gives it, and mends the heads table of each', async () => {
    const account = freshAccount();
    const dated = parseDefinition({ fields: { d: { type: 'date', name: 'D' }, n: { type: 'number', name: 'N' } } });
    const keyed = parseDefinition({ fields: { k: { type: 'string', name: 'K' } }, unique_by: ['k'] });
    const names = Array.from({ length: 20 }, (_, i) => `ds${i}`);
    const apply = partitionStream(2);
    const first = emptyBatch();
    names.forEach((name, i) => {
      apply(first, { ...base(account, name, `i${i}`), type: 'DatasetDefined', definition: i % 2 === 0 ? dated : keyed });
      const records = Array.from({ length: i }, (_, j) => (i % 2 === 0 ? { d: `2024-01-${String(1 + (j % 28)).padStart(2, '0')}`, n: j } : { k: `k${j}` }));
      apply(first, { ...base(account, name, `i${i}`), type: 'RecordsAppended', records, delete_by: null });
    });
    apply(first, { ...base(account, 'ds3', 'i3'), type: 'DatasetDeleted' });
    await writeBatch(db.store, first);
    // A second write whose heads-table insert is lost (a crash between the two inserts): the heads table lags.
    const second = emptyBatch();
    for (const name of ['ds4', 'ds5']) apply(second, { ...base(account, name, `i${names.indexOf(name)}`), type: 'RecordsReplaced', records: name === 'ds4' ? [{ d: '2024-02-01', n: 1 }] : [{ k: 'only' }] });
    await expect(writeBatch(new ClickHouseProjectionStore(crashing(db.conn, { at: 1, onlyThat: true }), db.database), second)).rejects.toThrow('simulated crash');
    const counted = (await db.readModel.listDatasets(account)).filter((d) => d.id === 'ds4' || d.id === 'ds5').map((d) => d.record_count);
    expect(counted).toEqual([4, 5]);

    const refs = [...names.map((dataset) => ({ account, dataset })), { account, dataset: 'never' }].reverse();
    // A store that counts its SELECTs: 21 datasets are two queries of the records table and two of the heads table.
    let selects = 0;
    const counting: ClickHouseConnection = {
      ...db.conn,
      client: new Proxy(db.conn.client, {
        get(target, prop, receiver) {
          const v: unknown = Reflect.get(target, prop, receiver);
          if (prop === 'query') selects++;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      }),
    };
    const many = await new ClickHouseProjectionStore(counting, db.database).loadMany(refs, { values: 'dates' });
    expect(selects).toBe(4);
    // The lagging heads were written again by loadMany.
    expect((await db.readModel.listDatasets(account)).filter((d) => d.id === 'ds4' || d.id === 'ds5').map((d) => d.record_count)).toEqual([1, 1]);
    const singles: unknown[] = [];
    for (const r of refs) singles.push(await db.store.load(r.account, r.dataset, { values: 'dates' }).then((l) => l && { position: l.position, state: plain(l.state) }));
    expect(many.map((l) => l && { position: l.position, state: plain(l.state) })).toEqual(singles);
    expect(many[0]).toBeUndefined();
    expect(many.find((l) => l?.state?.id === 'ds3')).toBeUndefined();
    expect(many.filter((l) => l !== undefined && l.state === undefined)).toHaveLength(1);
    expect([...(many.find((l) => l?.state?.id === 'ds4')?.state?.rows.values() ?? [])]).toEqual([{ d: '2024-02-01' }]);
  });

  it('keeps numbers that 18.16 parses wrongly as text, -0 and the extremes of every kind', async () => {
    const account = freshAccount();
    const def = parseDefinition({
      fields: {
        n: { type: 'number', name: 'N' },
        m: { type: 'money', name: 'M', currency_code: 'USD' },
        d: { type: 'date', name: 'D' },
        t: { type: 'datetime', name: 'T' },
        s: { type: 'string', name: 'S' },
      },
    });
    const records: DatasetRecord[] = [
      { n: 2.6207770942560195e-11, m: 2 ** 53, d: '0000-01-01', t: '0000-01-01T00:00:00.000Z', s: '\u0000' },
      { n: 5e-324, m: -(2 ** 53), d: '9999-12-31', t: '9999-12-31T23:59:59.999Z', s: '😀𝄞' },
      { n: -0, m: -0, d: '1970-01-01', t: '1969-12-31T23:59:59.999Z', s: "'\\\n\r\t" },
    ];
    const batch = emptyBatch();
    let s: State = initialState();
    s = projectEvent(s, { ...base(account, 'x', 'i1'), type: 'DatasetDefined', definition: def }, { partition: 0, offset: 1 }, batch);
    projectEvent(s, { ...base(account, 'x', 'i1'), type: 'RecordsAppended', records, delete_by: null }, { partition: 0, offset: 2 }, batch);
    await writeBatch(db.store, batch);
    const got = await db.readModel.listRecords(account, 'x');
    expect(got).toEqual(records);
    expect(Object.is(got?.[2]?.n, -0)).toBe(true);
    // And SQL readers see the same numbers and instants in the typed columns.
    const sql = await selectRows<{ num_0: number; time_0: string }>(
      db.conn,
      `SELECT num_0, toString(time_0) AS time_0 FROM ${db.store.tables.records} FINAL WHERE account = '${account}' AND incarnation = 'i1' AND deleted = 0 ORDER BY seq`,
      'typed columns',
    );
    expect(sql.map((r) => r.num_0)).toEqual([2.6207770942560195e-11, 5e-324, -0]);
  });

  it('writes a lone surrogate as U+FFFD instead of failing the write for ever (the one value that does not round-trip)', async () => {
    const account = freshAccount();
    const def = parseDefinition({ fields: { s: { type: 'string', name: 'S' } }, unique_by: ['s'] });
    const batch = emptyBatch();
    let s: State = initialState();
    s = projectEvent(s, { ...base(account, 'x', 'i1'), type: 'DatasetDefined', definition: def }, { partition: 0, offset: 1 }, batch);
    projectEvent(s, { ...base(account, 'x', 'i1'), type: 'RecordsAppended', records: [{ s: 'a\ud800' }, { s: '\udc00😀' }], delete_by: null }, { partition: 0, offset: 2 }, batch);
    await writeBatch(db.store, batch);
    await expect(db.readModel.listRecords(account, 'x')).resolves.toEqual([{ s: 'a\ufffd' }, { s: '\ufffd😀' }]);
  });

  it('never returns a removed row: FINAL … WHERE deleted = 0 (PREWHERE would bring it back on 18.16)', async () => {
    const account = freshAccount();
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    // The trap shows only while the row and its tombstone are in two parts: a background merge of the
    // shared table (the other tests' parts) could collapse them first.
    await command(db.conn, `SYSTEM STOP MERGES ${db.store.tables.records}`, 'stop merges');
    try {
      await removedRowTrap(account, def);
    } finally {
      await command(db.conn, `SYSTEM START MERGES ${db.store.tables.records}`, 'start merges');
    }
  });

  async function removedRowTrap(account: string, def: DatasetDefinition): Promise<void> {
    let s: State = initialState();
    const first = emptyBatch();
    s = projectEvent(s, { ...base(account, 'x', 'i1'), type: 'DatasetDefined', definition: def }, { partition: 0, offset: 1 }, first);
    s = projectEvent(s, { ...base(account, 'x', 'i1'), type: 'RecordsAppended', records: [{ n: 1 }], delete_by: null }, { partition: 0, offset: 2 }, first);
    await writeBatch(db.store, first);
    const second = emptyBatch();
    projectEvent(s, { ...base(account, 'x', 'i1'), type: 'RecordsReplaced', records: [] }, { partition: 0, offset: 3 }, second);
    expect(second.rows.map((r) => r.deleted)).toEqual([true]);
    await writeBatch(db.store, second);

    await expect(db.readModel.listRecords(account, 'x')).resolves.toEqual([]);
    const where = (clause: string) =>
      selectRows(db.conn, `SELECT record_key FROM ${db.store.tables.records} FINAL ${clause}`, 'a trap').then((rows) => rows.length);
    expect(await where(`WHERE account = '${account}' AND incarnation = 'i1' AND deleted = 0`)).toBe(0);
    // The trap the reads avoid: PREWHERE filters the tombstone out before FINAL collapses the versions.
    expect(await where(`PREWHERE deleted = 0 WHERE account = '${account}' AND incarnation = 'i1'`)).toBe(1);
  }

  it('after a crash with none or one of its two inserts landed, load gives a state and position of one moment, and re-applying the rest ends as applying once (property)', async () => {
    type Op =
      | { kind: 'define' | 'delete' | 'stale'; ds: 'u' | 'p' }
      | { kind: 'append' | 'replace'; ds: 'u' | 'p'; keys: number[] };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      { weight: 2, arbitrary: fc.record({ kind: fc.constantFrom('define' as const, 'delete' as const, 'stale' as const), ds: fc.constantFrom('u' as const, 'p' as const) }) },
      {
        weight: 5,
        arbitrary: fc.record({
          kind: fc.constantFrom('append' as const, 'append' as const, 'replace' as const),
          ds: fc.constantFrom('u' as const, 'p' as const),
          keys: fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 6 }),
        }),
      },
    );
    const uniqueDef = parseDefinition({ fields: { k: { type: 'string', name: 'K' }, n: { type: 'number', name: 'N' } }, unique_by: ['k'] });
    const plainDef = parseDefinition({ fields: { n: { type: 'number', name: 'N' }, at: { type: 'datetime', name: 'At', optional: true } } });

    const compile = (account: string, ops: readonly Op[]): DatasetEvent[] => {
      const live = new Map<string, string>();
      let incarnations = 0;
      let at = 0;
      const events: DatasetEvent[] = [];
      for (const op of ops) {
        const inc = live.get(op.ds);
        const head = (incarnation: string) => ({ ...base(account, op.ds, incarnation), at: ++at });
        switch (op.kind) {
          case 'define': {
            const incarnation = inc ?? `inc-${++incarnations}`;
            live.set(op.ds, incarnation);
            // A define of the live incarnation is a redelivery: the fold ignores it.
            events.push({ ...head(incarnation), type: 'DatasetDefined', definition: op.ds === 'u' ? uniqueDef : plainDef });
            break;
          }
          case 'delete':
            if (inc !== undefined) events.push({ ...head(inc), type: 'DatasetDeleted' });
            live.delete(op.ds);
            break;
          case 'stale':
            events.push({ ...head('inc-0'), type: 'RecordsAppended', records: [{ k: 'x', n: 0 }], delete_by: null });
            break;
          case 'append':
          case 'replace': {
            if (inc === undefined) break;
            const records = op.keys.map((k, i) => (op.ds === 'u' ? { k: `k${k}`, n: at * 10 + i } : { n: k + i / 8, at: k % 2 === 0 ? null : formatUtcMillis(at * 1000 + i) }));
            events.push(
              op.kind === 'append'
                ? { ...head(inc), type: 'RecordsAppended', records, delete_by: null }
                : { ...head(inc), type: 'RecordsReplaced', records },
            );
          }
        }
      }
      return events;
    };

    /** Feeds events from `from` on, in batches cut at `cuts`, as a restarted projector would. */
    const project = async (
      store: ClickHouseProjectionStore,
      events: readonly DatasetEvent[],
      from: number,
      to: number,
      cuts: readonly number[],
      onLoad?: (dataset: string, loaded: LoadedDataset | undefined) => void,
    ): Promise<State> => {
      let state: State = initialState();
      const positions = new Map<string, number>();
      let batch: Batch = emptyBatch();
      for (let offset = from; offset < to; offset++) {
        const e = events[offset] as DatasetEvent;
        if (!positions.has(e.dataset)) {
          const loaded = await store.load(e.account, e.dataset, { values: 'dates' });
          onLoad?.(e.dataset, loaded);
          positions.set(e.dataset, loaded?.position.offset ?? -1);
          if (loaded?.state !== undefined) {
            const datasets = state.get(e.account) ?? new Map();
            // As the projector holds a loaded state (projector.ts, loadMissing). onLoad has copied it already.
            datasets.set(e.dataset, holdLoaded(heldState(loaded.state), loaded.slots));
            state.set(e.account, datasets);
          }
        }
        if (offset > (positions.get(e.dataset) ?? -1)) state = projectEvent(state, e, { partition: 0, offset }, batch);
        if (cuts.includes(offset) || offset === to - 1) {
          await writeBatch(store, batch);
          batch = emptyBatch();
        }
      }
      return state;
    };

    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 3, maxLength: 24 }),
        fc.array(fc.nat(30), { maxLength: 5 }),
        fc.nat(),
        fc.record({ at: fc.constantFrom(0, 1), onlyThat: fc.boolean() }),
        fc.nat(),
        async (ops, cuts, crashPick, crash, redeliverPick) => {
          const account = freshAccount();
          const events = compile(account, [{ kind: 'define', ds: 'u' }, { kind: 'define', ds: 'p' }, ...ops]);
          const boundaries = [...new Set(cuts.filter((c) => c < events.length - 1))].sort((a, b) => a - b);
          // The batches are [start, end) ranges; the crash hits one of them.
          const starts = [0, ...boundaries.map((b) => b + 1)];
          const k = crashPick % starts.length;
          const crashStart = starts[k] as number;
          const crashEnd = (starts[k + 1]) ?? events.length;

          // Before the crash: every batch before k is written and its offsets committed.
          await project(db.store, events, 0, crashStart, boundaries);
          // Batch k dies with none, or only one, of its two inserts landed.
          const dying = new ClickHouseProjectionStore(crashing(db.conn, crash), db.database);
          // (A batch of events the fold ignores writes nothing, and so cannot die.)
          await project(dying, events, 0, crashEnd, boundaries.filter((b) => b >= crashStart)).catch((e: unknown) => {
            expect(e).toMatchObject({ code: 'unavailable', message: expect.stringContaining('simulated crash') });
          });

          // The restart redelivers any suffix that starts at or before the committed offset.
          const from = crashStart === 0 ? 0 : redeliverPick % (crashStart + 1);
          // (Taken as plain data at once: evolve goes on to consume the loaded state.)
          const whatLoaded = new Map<string, { position: StreamPosition; state: unknown } | undefined>();
          const restarted = await project(db.store, events, from, events.length, boundaries, (ds, loaded) =>
            whatLoaded.set(ds, loaded === undefined ? undefined : { position: loaded.position, state: plain(loaded.state) }),
          );

          // Each load was of one moment: the state the fold had at the position it came with, as the
          // projector holds it (its load reads only the values it holds).
          for (const [ds, loaded] of whatLoaded) {
            if (loaded === undefined) continue;
            const upTo = pureFold(events.slice(0, loaded.position.offset + 1)).get(account)?.get(ds);
            expect(loaded.state).toEqual(plain(upTo === undefined ? undefined : heldState(upTo)));
          }
          // And the end equals the pure fold, in memory and in ClickHouse (heads table included).
          const expected = pureFold(events).get(account);
          for (const ds of ['u', 'p']) {
            const want = expected?.get(ds);
            const inMemory = restarted.get(account)?.get(ds);
            // The projector holds of each row only the values a later window reads (project.ts, heldRecord).
            // heldState consumes the state it is given: a fold of its own.
            const held = pureFold(events).get(account)?.get(ds);
            if (whatLoaded.has(ds)) expect(plain(inMemory)).toEqual(plain(held === undefined ? undefined : heldState(held)));
            expect(plain((await db.store.load(account, ds))?.state)).toEqual(plain(want));
          }
          await expect(db.readModel.listDatasets(account)).resolves.toEqual(
            [...(expected?.values() ?? [])]
              .sort((a, b) => (a.id < b.id ? -1 : 1))
              .map((d) => ({
                id: d.id,
                fields: d.definition.fields,
                unique_by: d.definition.unique_by,
                record_count: d.rows.size,
                created_at: formatUtcMillis(d.created_at),
                updated_at: formatUtcMillis(d.updated_at),
              })),
          );
          await expect(db.heads.count(account)).resolves.toBe(expected?.size ?? 0);
        },
      ),
      { numRuns: 20 },
    );
  });

  it('refuses a write whose rows no head covers, and ids that are not ids, before any SQL', async () => {
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const head = { account: 'acc', dataset: 'x', incarnation: 'i1', definition: def, created_at: 0, updated_at: 0, record_count: 1, next_row: 1, position: { partition: 0, offset: 1 }, version: 10, deleted: false };
    const row = { account: 'acc', dataset: 'x', incarnation: 'i1', row_key: '0', slot: 1, version: 11, seq: 11, deleted: false, record: { n: 1 } };
    // Unreachable: an error other than `unavailable` proves nothing was sent.
    const nowhere = projectionIn(connectClickHouse('http://127.0.0.1:1'), 'pushbase');
    await expect(nowhere.store.write([row], [head])).rejects.toThrow(/need a head of at least that version/);
    await expect(nowhere.store.write([{ ...row, deleted: true, record: null }], [])).rejects.toThrow(/need a head/);
    await expect(nowhere.store.write([row], [])).rejects.toThrow(/needs that incarnation's head/);
    await expect(nowhere.store.write([{ ...row, version: 5, incarnation: 'i2' }], [head])).rejects.toThrow(/needs that incarnation's head/);
    await expect(nowhere.store.write([], [{ ...head, account: "acc' OR 1=1" }])).rejects.toMatchObject({ code: 'invalid' });
    await expect(nowhere.store.write([{ ...row, version: 5, dataset: 'X;DROP' }], [head])).rejects.toMatchObject({ code: 'invalid' });
    await expect(nowhere.store.load('acc', "x' OR '1'='1")).rejects.toMatchObject({ code: 'invalid' });
    await expect(nowhere.readModel.listRecords('a\u0000', 'x')).rejects.toMatchObject({ code: 'invalid' });
    expect(() => new ClickHouseProjectionStore(db.conn, 'pushbase`; DROP')).toThrow(DomainError);
    expect(() => new ClickHouseReadModel(db.conn, 'pushbase`; DROP')).toThrow(DomainError);
    expect(() => new ClickHouseHeadsStore(db.conn, 'pushbase`; DROP')).toThrow(DomainError);
  });

  it('rejects with `unavailable` when ClickHouse cannot be reached, so the projector retries', async () => {
    const nowhere = connectClickHouse('http://127.0.0.1:1');
    const store = new ClickHouseProjectionStore(nowhere, 'pushbase');
    const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });
    const head = { account: 'acc', dataset: 'x', incarnation: 'i1', definition: def, created_at: 0, updated_at: 0, record_count: 0, next_row: 0, position: { partition: 0, offset: 1 }, version: 10, deleted: false };
    const failure = store.write([], [head]);
    await expect(failure).rejects.toBeInstanceOf(DomainError);
    await expect(failure).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('cannot be reached') });
    await expect(store.load('acc', 'x')).rejects.toMatchObject({ code: 'unavailable' });
    await nowhere.close();
  });
});

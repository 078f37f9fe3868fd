import { encodedRecordsOf, EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import {
  decodeEvent,
  decodeEventBatch,
  decodeEventValue,
  encodeEvent,
  encodeEventBatch,
  eventHeads,
  eventsFromEncodedBatch,
  EVENT_UPCASTERS,
  EventDecodeError,
  type Upcaster,
} from '../src/event-codec';

const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acct', dataset: 'sales', incarnation: 'inc-7', at: 1_700_000_000_000 } as const;

const events: DatasetEvent[] = [
  {
    ...base,
    type: 'DatasetDefined',
    definition: { fields: { amount: { type: 'number', name: 'Amount', optional: false } }, unique_by: [] },
  },
  { ...base, type: 'RecordsAppended', records: [{ amount: 1 }, { amount: 2.5 }], delete_by: null },
  { ...base, type: 'RecordsAppended', records: [{ day: '2024-01-02' }], delete_by: 'day' },
  { ...base, type: 'RecordsReplaced', records: [{ label: 'naïve ✓ "quoted" \\ back' }] },
  { ...base, type: 'DatasetDeleted' },
];

const json = (v: unknown): string => JSON.stringify(v);
/** An event as stored now (schema_version 2), as a plain value to tamper with. */
const wire = (e: DatasetEvent): Record<string, unknown> => JSON.parse(encodeEvent(e).toString('utf8'));
/** An event as the releases before schema_version 2 stored it: the in-memory event's own JSON. */
const v1 = (e: DatasetEvent): Record<string, unknown> => ({ ...JSON.parse(JSON.stringify(e)), schema_version: 1 });
const decodeError = (run: () => unknown): string => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(EventDecodeError);
    return (err as Error).message;
  }
  throw new Error('decoded without an error');
};

describe('event codec', () => {
  it('round-trips every event type, one event per value', () => {
    for (const event of events) expect(decodeEvent(encodeEvent(event))).toEqual(event);
  });

  it('carries an Idempotency-Key inside every event type, through the batch and its heads too', () => {
    const idempotency = { key: 'order 17 "retry"', fingerprint: 'fp' };
    const keyed = events.map((e) => ({ ...e, idempotency }));
    for (const event of keyed) {
      expect(decodeEvent(encodeEvent(event))).toEqual(event);
      expect(wire(event).idempotency).toEqual(idempotency);
      expect(wire(event).schema_version).toBe(2);
    }
    expect(decodeEventBatch(encodeEventBatch(keyed))).toEqual(keyed);
    expect(eventsFromEncodedBatch(encodeEventBatch(keyed), eventHeads(keyed)).map((e) => e.idempotency)).toEqual(keyed.map(() => idempotency));
  });

  it('reads events written before keys existed, of both versions, as writes without a key', () => {
    for (const event of events) {
      expect(decodeEventValue(wire(event)).idempotency).toBeUndefined();
      expect(decodeEventValue(v1(event)).idempotency).toBeUndefined();
      expect('idempotency' in wire(event)).toBe(false);
    }
    // A version 1 event never held a key, but an upcast keeps whatever envelope fields it has.
    expect(decodeEventValue({ ...v1(events[1]!), idempotency: { key: 'k', fingerprint: 'f' } }).idempotency).toEqual({ key: 'k', fingerprint: 'f' });
  });

  it.each([null, 'k', { key: '', fingerprint: 'f' }, { key: 'k' }, { key: 'k', fingerprint: 7 }])('refuses a malformed idempotency %p', (idempotency) => {
    expect(decodeError(() => decodeEventValue({ ...wire(events[1]!), idempotency }))).toMatch(/idempotency must be an object/);
  });

  it('writes records by position: the field names once, then one row of values per record', () => {
    const appended: DatasetEvent = { ...base, type: 'RecordsAppended', records: [{ day: '2024-01-02', n: 1, note: null }, { day: '2024-01-03', n: 2.5, note: 'x' }], delete_by: 'day' };
    const value = wire(appended);
    expect(Object.keys(value)).toEqual(['type', 'schema_version', 'account', 'dataset', 'incarnation', 'at', 'fields', 'rows', 'delete_by']);
    expect(value).toMatchObject({ schema_version: 2, fields: ['day', 'n', 'note'], rows: [['2024-01-02', 1, null], ['2024-01-03', 2.5, 'x']] });
    expect(Object.keys(wire(events[3]!))).toEqual(['type', 'schema_version', 'account', 'dataset', 'incarnation', 'at', 'fields', 'rows']);
    expect(wire(events[0]!)).toEqual({ ...events[0], schema_version: 2 });
    expect(wire(events[4]!)).toEqual({ ...events[4], schema_version: 2 });
  });

  it('writes the current schema_version whatever the in-memory event says', () => {
    expect(wire({ ...events[1]!, schema_version: 1 } as unknown as DatasetEvent).schema_version).toBe(EVENT_SCHEMA_VERSION);
  });

  it('encodes a batch (a file-log frame) as the array of the events a Kafka message each holds', () => {
    expect(encodeEventBatch(events).toString('utf8')).toBe(`[${events.map((e) => encodeEvent(e).toString('utf8')).join(',')}]`);
  });

  it('reads a record whose keys come in another order than the first record\'s by name', () => {
    const e: DatasetEvent = { ...base, type: 'RecordsReplaced', records: [{ a: 1, b: 'x' }, { b: 'y', a: 2 }] };
    expect(decodeEvent(encodeEvent(e))).toEqual(e);
  });

  it('keeps field lists apart that join to the same text', () => {
    const one: DatasetEvent = { ...base, type: 'RecordsReplaced', records: [{ 'a,b': 1 }] };
    const two: DatasetEvent = { ...base, type: 'RecordsReplaced', records: [{ a: 2, b: 3 }] };
    for (const e of [one, two, one]) expect(decodeEvent(encodeEvent(e))).toEqual(e);
  });

  describe('schema_version 1 (records as objects, written before the positional encoding)', () => {
    it('reads every event type as the same in-memory event', () => {
      for (const event of events) expect(decodeEvent(json(v1(event)))).toEqual(event);
      expect(decodeEventBatch(json(events.map(v1)))).toEqual(events);
    });

    it('keeps every key of records that do not all hold the same ones; a key a record lacks reads as null', () => {
      const odd = { ...v1(events[1]!), records: [{ a: 1 }, { b: 2 }] };
      expect(decodeEvent(json(odd))).toEqual({ ...events[1], records: [{ a: 1, b: null }, { a: null, b: 2 }] });
    });

    it.each([
      ['records not an array', { records: {} }, /RecordsAppended: records must be an array of objects, not object/],
      ['a record that is no object', { records: [{ a: 1 }, 7] }, /RecordsAppended: records must be an array of objects/],
      ['no delete_by', { delete_by: undefined }, /delete_by must be a field name or null/],
    ])('refuses %s', (_name, change, expected) => {
      expect(decodeError(() => decodeEvent(json({ ...v1(events[1]!), ...change })))).toMatch(expected);
    });

    it('refuses a replace without records', () => {
      expect(decodeError(() => decodeEvent(json({ ...v1(events[3]!), records: undefined })))).toMatch(/RecordsReplaced: records must be an array of objects/);
    });
  });

  it('round-trips a batch (a file-log frame), and names the event of a batch that is bad', () => {
    expect(decodeEventBatch(encodeEventBatch(events))).toEqual(events);
    expect(decodeError(() => decodeEventBatch(json([events[0], { ...events[1], type: 'Nope' }])))).toMatch(/^event 1 of the batch: unknown event type "Nope"/);
    expect(decodeError(() => decodeEventBatch(json(events[0])))).toMatch(/must be a JSON array, not object/);
  });

  it('decodes bytes given as a view into a larger buffer', () => {
    const inner = encodeEvent(events[4]!);
    const outer = Buffer.concat([Buffer.from('xx'), inner, Buffer.from('yy')]);
    expect(decodeEvent(outer.subarray(2, 2 + inner.length))).toEqual(events[4]);
  });

  it('refuses an event from a newer writer, naming its version, rather than dropping it', () => {
    const message = decodeError(() => decodeEvent(json({ ...events[1], schema_version: EVENT_SCHEMA_VERSION + 1 })));
    expect(message).toContain(`schema_version ${EVENT_SCHEMA_VERSION + 1}`);
    expect(message).toContain(`newer than this reader knows (${EVENT_SCHEMA_VERSION})`);
  });

  it.each([
    ['no schema_version', { ...events[1], schema_version: undefined }, /no valid schema_version \(undefined\)/],
    ['a string schema_version', { ...events[1], schema_version: '1' }, /no valid schema_version \("1"\)/],
    ['schema_version 0', { ...events[1], schema_version: 0 }, /no valid schema_version \(0\)/],
    ['a fractional schema_version', { ...events[1], schema_version: 1.5 }, /no valid schema_version \(1.5\)/],
    ['an unknown type', { ...events[1], type: 'RecordsMerged' }, /unknown event type "RecordsMerged"/],
    ['no type', { ...events[4], type: undefined }, /unknown event type undefined/],
    ['no account', { ...events[4], account: undefined }, /account must be a non-empty string/],
    ['an empty dataset', { ...events[4], dataset: '' }, /dataset must be a non-empty string/],
    ['a numeric incarnation', { ...events[4], incarnation: 7 }, /incarnation must be a non-empty string, not 7/],
    ['a string at', { ...events[4], at: '2024' }, /at must be a number/],
    ['rows not an array', { ...wire(events[1]!), rows: {} }, /RecordsAppended: rows must be an array, not object/],
    ['a row of the wrong length', { ...wire(events[1]!), rows: [[1], [2, 3]] }, /RecordsAppended: row 1 must be an array of 1 values/],
    ['a row that is no array', { ...wire(events[1]!), rows: [{ amount: 1 }] }, /RecordsAppended: row 0 must be an array of 1 values/],
    ['no fields', { ...wire(events[1]!), fields: undefined }, /RecordsAppended: fields must be an array of distinct field names/],
    ['a field twice', { ...wire(events[1]!), fields: ['a', 'a'], rows: [] }, /fields must be an array of distinct field names/],
    ['an empty field name', { ...wire(events[1]!), fields: [''], rows: [] }, /fields must be an array of distinct field names/],
    ['records instead of rows', { ...events[1], schema_version: 2 }, /RecordsAppended: fields must be an array/],
    ['no delete_by', { ...wire(events[1]!), delete_by: undefined }, /delete_by must be a field name or null/],
    ['replace without rows', { ...wire(events[3]!), rows: undefined }, /RecordsReplaced: rows must be an array/],
    ['a definition without fields', { ...events[0], definition: { unique_by: [] } }, /definition must be an object/],
    ['an array', [events[1]], /must be a JSON object, not an array/],
    ['null', null, /must be a JSON object, not null/],
  ])('refuses %s', (_name, value, expected) => {
    expect(decodeError(() => decodeEvent(json(value)))).toMatch(expected);
  });

  it('refuses bytes that are not JSON', () => {
    expect(decodeError(() => decodeEvent(Buffer.from('{"type":')))).toMatch(/^not JSON/);
    expect(decodeError(() => decodeEvent(Buffer.from([0xff, 0xfe])))).toMatch(/^not JSON/);
  });

  describe('upcasting (a reader of a later version)', () => {
    // A pretend version 3 that added `source`, after the real 1 → 2.
    const upcasters: Record<number, Upcaster> = { ...EVENT_UPCASTERS, 2: (e) => ({ ...e, source: 'upcast', schema_version: 3 }) };

    it('lifts an old event through every upcaster in turn', () => {
      const event = events[1]!;
      expect(decodeEventValue(v1(event), { currentVersion: 3, upcasters })).toEqual({ ...event, source: 'upcast', schema_version: 3 });
      expect(decodeEventValue(wire(event), { currentVersion: 3, upcasters })).toEqual({ ...event, source: 'upcast', schema_version: 3 });
    });

    it('refuses a version no upcaster lifts, and an upcaster that lands on the wrong version', () => {
      expect(decodeError(() => decodeEventValue(v1(events[1]!), { currentVersion: 3, upcasters: { 2: upcasters[2]! } }))).toMatch(
        /no upcaster from schema_version 1 to 2/,
      );
      expect(decodeError(() => decodeEventValue(v1(events[1]!), { currentVersion: 2, upcasters: { 1: (e) => ({ ...e, schema_version: 3 }) } }))).toMatch(
        /upcaster from schema_version 1 gave version 3, not 2/,
      );
    });

    it('checks the upcast event, so an upcaster cannot hand the fold a broken one', () => {
      expect(decodeError(() => decodeEventValue(wire(events[1]!), { currentVersion: 3, upcasters: { 2: (e) => ({ ...e, rows: 'x', schema_version: 3 }) } }))).toMatch(
        /rows must be an array/,
      );
    });
  });

  describe('events from an encoded batch and their heads (what a write worker hands back)', () => {
    it.each([
      ['bytes', (e: DatasetEvent[]) => encodeEventBatch(e)],
      ['text', (e: DatasetEvent[]) => encodeEventBatch(e).toString('utf8')],
    ])('are the batch\'s events, records decoded only when read, from its %s', (_what, encode) => {
      const bytes = encode(events);
      const heads = eventHeads(events);
      expect(JSON.stringify(heads)).not.toContain('2.5');
      const lazy = eventsFromEncodedBatch(bytes, heads);
      const counts = lazy.map((e) => (e.type === 'RecordsAppended' || e.type === 'RecordsReplaced' ? encodedRecordsOf(e)?.count : 'none'));
      expect(counts).toEqual(['none', 2, 1, 1, 'none']);
      expect(lazy).toEqual(decodeEventBatch(bytes));
      expect(lazy.map((e) => encodeEvent(e).toString())).toEqual(events.map((e) => encodeEvent(e).toString()));
    });

    it('refuses, when read, records that are not what the head says', () => {
      const heads = eventHeads(events).map((h) => ('count' in h ? { ...h, count: h.count + 1 } : h));
      const lazy = eventsFromEncodedBatch(encodeEventBatch(events), heads);
      expect(lazy[0]).toEqual(events[0]);
      const appended = lazy[1] as Extract<DatasetEvent, { type: 'RecordsAppended' }>;
      expect(decodeError(() => appended.records)).toMatch(/event 1 of the batch is not the RecordsAppended of 3 records/);
    });
  });
});

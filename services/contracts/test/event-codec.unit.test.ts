import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { decodeEvent, decodeEventBatch, decodeEventValue, encodeEvent, encodeEventBatch, EventDecodeError, type Upcaster } from '../src/event-codec';

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

  it('writes the envelope as the event JSON itself, so file frames and Kafka values share it', () => {
    const value = JSON.parse(encodeEvent(events[1]!).toString('utf8'));
    expect(Object.keys(value)).toEqual(['schema_version', 'account', 'dataset', 'incarnation', 'at', 'type', 'records', 'delete_by']);
    expect(encodeEventBatch(events).toString('utf8')).toBe(JSON.stringify(events));
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
    ['records not an array', { ...events[1], records: {} }, /RecordsAppended: records must be an array/],
    ['no delete_by', { ...events[1], delete_by: undefined }, /delete_by must be a field name or null/],
    ['replace without records', { ...events[3], records: undefined }, /RecordsReplaced: records must be an array/],
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
    // A pretend version 3: v2 renamed `at` to `at_ms`, v3 added `source`.
    const upcasters: Record<number, Upcaster> = {
      1: ({ at, ...rest }) => ({ ...rest, at_ms: at, at, schema_version: 2 }),
      2: (e) => ({ ...e, source: 'upcast', schema_version: 3 }),
    };

    it('lifts an old event through every upcaster in turn', () => {
      const v1 = events[1]!;
      expect(decodeEventValue(v1, { currentVersion: 3, upcasters })).toEqual({ ...v1, at_ms: v1.at, source: 'upcast', schema_version: 3 });
      const v2 = { ...v1, at_ms: v1.at, schema_version: 2 };
      expect(decodeEventValue(v2, { currentVersion: 3, upcasters })).toEqual({ ...v2, source: 'upcast', schema_version: 3 });
    });

    it('refuses a version no upcaster lifts, and an upcaster that lands on the wrong version', () => {
      expect(decodeError(() => decodeEventValue(events[1], { currentVersion: 3, upcasters: { 2: upcasters[2]! } }))).toMatch(
        /no upcaster from schema_version 1 to 2/,
      );
      expect(decodeError(() => decodeEventValue(events[1], { currentVersion: 2, upcasters: { 1: (e) => ({ ...e, schema_version: 3 }) } }))).toMatch(
        /upcaster from schema_version 1 gave version 3, not 2/,
      );
    });

    it('checks the upcast event, so an upcaster cannot hand the fold a broken one', () => {
      expect(decodeError(() => decodeEventValue(events[1], { currentVersion: 2, upcasters: { 1: (e) => ({ ...e, records: 'x', schema_version: 2 }) } }))).toMatch(
        /records must be an array/,
      );
    });
  });
});

import fc from 'fast-check';
import {
  bucketKey,
  compareCodePoints,
  DomainError,
  parseAggregateQuery,
  parseDefinition,
  parseRecordQuery,
  resolveAggregateQuery,
  resolveRecordQuery,
  type QueryParams,
} from '../src';

/* The read API's query rules (read-query.ts): syntax, validation against a definition, order and buckets. */

const def = parseDefinition({
  fields: {
    team: { type: 'string', name: 'Team' },
    n: { type: 'number', name: 'N', optional: true },
    price: { type: 'money', name: 'Price', currency_code: 'EUR' },
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'At', optional: true },
  },
});

/** The parameter a refused query is blamed on. */
function blamed(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError && e.code === 'invalid') return e.path;
    throw e;
  }
  throw new Error('not refused');
}
const records = (q: QueryParams) => resolveRecordQuery(def, parseRecordQuery(q));
const aggregate = (q: QueryParams) => resolveAggregateQuery(def, parseAggregateQuery(q));

describe('records query', () => {
  it('has defaults: the first 100 in insertion order', () => {
    expect(records({})).toEqual({ filters: [], sort: null, order: 'asc', limit: 100, offset: 0 });
  });

  it('types filter values by their field: numbers, dates, datetimes as epoch ms in UTC, strings as given', () => {
    const q = records({ 'filter.team': 'a.b', 'filter.n.gte': '-1.5e3', 'filter.day.lt': '2024-02-29', 'filter.at.gt': '2024-01-01T01:00:00+01:00', 'filter.n.null': 'false', sort: 'day', order: 'desc', limit: '5', offset: '10' });
    expect(q).toEqual({
      filters: [
        { field: 'at', type: 'datetime', op: 'gt', value: Date.UTC(2024, 0, 1) },
        { field: 'day', type: 'date', op: 'lt', value: '2024-02-29' },
        { field: 'n', type: 'number', op: 'gte', value: -1500 },
        { field: 'n', type: 'number', op: 'null', value: false },
        { field: 'team', type: 'string', op: 'eq', value: 'a.b' },
      ],
      sort: { field: 'day', type: 'date' },
      order: 'desc',
      limit: 5,
      offset: 10,
    });
  });

  it.each<[QueryParams, string]>([
    [{ limit: '0' }, 'limit'],
    [{ limit: '1001' }, 'limit'],
    [{ limit: '1.5' }, 'limit'],
    [{ offset: '-1' }, 'offset'],
    [{ order: 'up' }, 'order'],
    [{ sort: 'nope' }, 'sort'],
    [{ sort: 'constructor' }, 'sort'],
    [{ limit: ['1', '2'] }, 'limit'],
    [{ colour: 'red' }, 'colour'],
    [{ 'filter.nope': '1' }, 'filter.nope'],
    [{ 'filter.n.like': '1' }, 'filter.n.like'],
    [{ 'filter.n': 'abc' }, 'filter.n'],
    [{ 'filter.n': '' }, 'filter.n'],
    [{ 'filter.n': '0x10' }, 'filter.n'],
    [{ 'filter.n': 'Infinity' }, 'filter.n'],
    [{ 'filter.day': '2023-02-29' }, 'filter.day'],
    [{ 'filter.at.lt': 'yesterday' }, 'filter.at.lt'],
    [{ 'filter.team.gt': 'a' }, 'filter.team.gt'],
    [{ 'filter.n.null': 'yes' }, 'filter.n.null'],
  ])('refuses %j, naming %s', (q, param) => {
    expect(blamed(() => records(q))).toBe(param);
  });
});

describe('aggregate query', () => {
  it('takes count without a field, and a numeric field grouped by a string or a date bucket', () => {
    expect(aggregate({ op: 'count' })).toEqual({ op: 'count', field: null, groupBy: null, filters: [] });
    expect(aggregate({ op: 'sum', field: 'price', group_by: 'day', bucket: 'week' }).groupBy).toEqual({ key: 'day', type: 'date', bucket: 'week' });
    expect(aggregate({ op: 'count', field: 'team', group_by: 'team' }).field).toEqual({ key: 'team', type: 'string' });
  });

  it.each<[QueryParams, string]>([
    [{}, 'op'],
    [{ op: 'median', field: 'n' }, 'op'],
    [{ op: 'sum' }, 'field'],
    [{ op: 'sum', field: 'team' }, 'field'],
    [{ op: 'avg', field: 'day' }, 'field'],
    [{ op: 'sum', field: 'n', group_by: 'n' }, 'group_by'],
    [{ op: 'sum', field: 'n', group_by: 'day' }, 'bucket'],
    [{ op: 'sum', field: 'n', group_by: 'team', bucket: 'day' }, 'bucket'],
    [{ op: 'sum', field: 'n', bucket: 'day' }, 'bucket'],
    [{ op: 'sum', field: 'n', group_by: 'at', bucket: 'year' }, 'bucket'],
    [{ op: 'count', limit: '5' }, 'limit'],
  ])('refuses %j, naming %s', (q, param) => {
    expect(blamed(() => aggregate(q))).toBe(param);
  });
});

describe('order and buckets', () => {
  it('orders strings by code point, astral characters after U+FFFF-range ones', () => {
    expect(['b', '😀', '\uffff', 'a', '', 'ab'].sort(compareCodePoints)).toEqual(['', 'a', 'ab', 'b', '\uffff', '😀']);
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        const bytes = Buffer.compare(Buffer.from(a), Buffer.from(b));
        expect(Math.sign(compareCodePoints(a, b))).toBe(bytes);
      }),
    );
  });

  it.each([
    ['date', 'day', '2024-03-06', '2024-03-06'],
    ['date', 'week', '2024-03-06', '2024-03-04'], // a Wednesday: its week starts on Monday the 4th
    ['date', 'week', '2024-03-04', '2024-03-04'],
    ['date', 'week', '2024-03-03', '2024-02-26'], // a Sunday belongs to the week before
    ['date', 'month', '2024-02-29', '2024-02-01'],
    ['date', 'week', '1970-01-01', '1969-12-29'],
    ['date', 'week', '0000-01-01', '-0001-12-27'],
    ['date', 'month', '9999-12-31', '9999-12-01'],
    ['datetime', 'day', '2024-03-03T23:59:59.999Z', '2024-03-03'],
    ['datetime', 'week', '2024-03-04T00:00:00.000Z', '2024-03-04'],
    ['datetime', 'month', '1969-12-31T23:59:59.999Z', '1969-12-01'],
  ] as const)('puts the %s %s of %s at %s (UTC, weeks from Monday)', (type, bucket, value, key) => {
    expect(bucketKey(type, bucket, value)).toBe(key);
  });
});

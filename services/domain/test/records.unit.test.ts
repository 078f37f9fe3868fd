import { DomainError, LIMITS, describeValue, invalid, parseDefinition, parseJsonBody, parseRecords, quoteValue, uniqueKey, type DatasetDefinition, type DatasetRecord, type FieldDefinition } from '../src';
import { appendRecords, datasetDefined, field, given, recordsAppended, recordsReplaced, replaceRecords } from './specification';

/** A dataset with one required field `value` of the given kind, plus an optional `note`. */
const single = (f: FieldDefinition): DatasetDefinition => ({ fields: { value: f, note: field('string', 'Note', { optional: true }) }, unique_by: [] });
const givenField = (f: FieldDefinition) => given([datasetDefined('ds', single(f))]);
const accepts = (f: FieldDefinition, value: unknown, stored: unknown = value) =>
  givenField(f)
    .when(appendRecords('ds', { data: [{ value }] }))
    .then([recordsAppended('ds', [{ value: stored, note: null } as DatasetRecord])]);
const refuses = (f: FieldDefinition, value: unknown, fragment: string): void => {
  givenField(f).when(appendRecords('ds', { data: [{ value }] })).thenThrows('invalid', fragment, 'data[0].value');
};

const orders: DatasetDefinition = {
  fields: {
    day: field('date', 'Day'),
    at: field('datetime', 'At', { optional: true }),
    item: field('string', 'Item'),
    qty: field('number', 'Quantity'),
    price: field('money', 'Price', { currency_code: 'USD', optional: true }),
  },
  unique_by: [],
};
const ordersDefined = [datasetDefined('orders', orders)];
const order = (i: number): Record<string, unknown> => ({ day: '2024-03-01', item: `item ${i}`, qty: i });
const stored = (i: number): DatasetRecord => ({ day: '2024-03-01', at: null, item: `item ${i}`, qty: i, price: null });

describe('request bodies: JSON whatever the Content-Type said', () => {
  it('parses any JSON value', () => {
    expect(parseJsonBody('{"data": [{"n": 1}]}')).toStrictEqual({ data: [{ n: 1 }] });
    expect(parseJsonBody(' [1] ')).toStrictEqual([1]);
    expect(parseJsonBody('null')).toBeNull();
  });

  it.each(['', ' ', '\r\n\t '])('reads the empty body %j as absent', (text) => expect(parseJsonBody(text)).toBeUndefined());

  it.each(['{', '{"data": [}', 'data=1', ' x '])('refuses %j as invalid JSON, saying why', (text) => {
    let reason = '';
    try {
      JSON.parse(text);
    } catch (e) {
      reason = (e as Error).message;
    }
    expect(() => parseJsonBody(text)).toThrow(new DomainError('invalid', `The request body is not valid JSON: ${reason}`));
    expect(() => parseJsonBody(text)).toThrow(expect.objectContaining({ code: 'invalid' }) as Error);
  });
});

describe('append and replace bodies', () => {
  it('normalises records into one RecordsAppended event, in request order', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [order(1), { ...order(2), at: '2024-03-01T10:00:00+01:00', price: 795.0 }] }))
      .then([recordsAppended('orders', [stored(1), { ...stored(2), at: '2024-03-01T09:00:00.000Z', price: 795 }])]);
  });

  it('records a RecordsReplaced event for replace', () => {
    given(ordersDefined).when(replaceRecords('orders', { data: [order(1)] })).then([recordsReplaced('orders', [stored(1)])]);
  });

  it.each([null, [], 'data', 5])('refuses a body %j that is not an object', (body) => {
    given(ordersDefined).when(appendRecords('orders', body)).thenThrows('invalid', 'must be a JSON object');
    given(ordersDefined).when(replaceRecords('orders', body)).thenThrows('invalid', 'must be a JSON object');
  });

  it('requires data', () => {
    given(ordersDefined).when(appendRecords('orders', {})).thenThrows('invalid', '"data" is required', 'data');
    given(ordersDefined).when(replaceRecords('orders', { delete_by: 'day' })).thenThrows('invalid', '"data" is required', 'data');
  });

  it.each([null, {}, 'records', 3, { 0: order(1) }])('refuses data %j that is not an array', (data) => {
    given(ordersDefined).when(appendRecords('orders', { data })).thenThrows('invalid', '"data" must be an array', 'data');
    given(ordersDefined).when(replaceRecords('orders', { data })).thenThrows('invalid', '"data" must be an array', 'data');
  });

  it('checks what it can of a body without the dataset first: a malformed request is refused even when the dataset does not exist', () => {
    const tooMany = Array.from({ length: 501 }, () => ({}));
    for (const [body, fragment, path] of [
      [{ data: 0, delete_by: 'day' }, '"data" must be an array', 'data'],
      [{}, '"data" is required', 'data'],
      [{ data: tooMany }, 'at most 500 records', 'data'],
      [{ data: [{ nope: 1 }, 5] }, 'Record 1 (data[1]) must be an object', 'data[1]'],
    ] as const) {
      given([]).when(appendRecords('orders', body)).thenThrows('invalid', fragment, path);
      given([]).when(replaceRecords('orders', body)).thenThrows('invalid', fragment, path);
    }
    given([]).when(appendRecords('orders', { data: [], delete_by: 5 })).thenThrows('invalid', '"delete_by" must be the key', 'delete_by');
    given([]).when(appendRecords('orders', { data: [], deleteBy: ['day', 'at'] })).thenThrows('invalid', '"deleteBy" must be the key', 'deleteBy');
    // What only the dataset can tell (a record's fields, whether delete_by names a date field) comes after it.
    given([]).when(appendRecords('orders', { data: [{ nope: 1 }], delete_by: 'nope' })).thenThrows('not_found', 'Dataset not found');
    given([]).when(replaceRecords('orders', { data: [{ nope: 1 }], delete_by: 5 })).thenThrows('not_found', 'Dataset not found');
  });

  it('takes an empty append as a no-op', () => {
    const events = [...ordersDefined, recordsAppended('orders', [stored(1)])];
    given(events).when(appendRecords('orders', { data: [] })).then([recordsAppended('orders', [])]);
    given(events).when(appendRecords('orders', { data: [] })).thenRecords([stored(1)]);
  });

  it('accepts 500 records in one request and refuses 501, for append and replace', () => {
    const five = Array.from({ length: LIMITS.recordsPerRequest }, (_, i) => order(i));
    given(ordersDefined).when(appendRecords('orders', { data: five })).then([recordsAppended('orders', five.map((_, i) => stored(i)))]);
    given(ordersDefined).when(replaceRecords('orders', { data: five })).then([recordsReplaced('orders', five.map((_, i) => stored(i)))]);
    const tooMany = [...five, order(500)];
    given(ordersDefined).when(appendRecords('orders', { data: tooMany })).thenThrows('invalid', 'at most 500 records', 'data');
    given(ordersDefined).when(replaceRecords('orders', { data: tooMany })).thenThrows('invalid', '501 were sent', 'data');
  });

  it('counts updated records under unique_by towards the 500 too', () => {
    const keyed = [datasetDefined('k', { fields: { day: field('date', 'Day') }, unique_by: ['day'] })];
    const same = Array.from({ length: 501 }, () => ({ day: '2024-01-01' }));
    given(keyed).when(appendRecords('k', { data: same })).thenThrows('invalid', 'at most 500 records');
  });

  it('validates the whole request first: one bad record refuses it, naming the first failing index and field', () => {
    const data = [order(0), order(1), { ...order(2), qty: 'three' }, { ...order(3), day: 'nope' }];
    given(ordersDefined).when(appendRecords('orders', { data })).thenThrows('invalid', 'Record 2 (data[2]): the field "qty"', 'data[2].qty');
    given(ordersDefined).when(replaceRecords('orders', { data })).thenThrows('invalid', 'Record 2', 'data[2].qty');
  });

  it('refuses a wrong type, e.g. a number in a datetime field (docs/api.md → Fields and values)', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [{ ...order(0), at: 1709280000000 }] }))
      .thenThrows('invalid', 'the field "at" must be an ISO 8601 date-time', 'data[0].at');
  });
});

describe('record shape', () => {
  it.each([null, 5, 'record', [], [1, 2], true])('refuses a record %j that is not an object', (record) => {
    given(ordersDefined).when(appendRecords('orders', { data: [order(0), record] })).thenThrows('invalid', 'must be an object', 'data[1]');
  });

  it('refuses an unknown key, naming it and the defined keys', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [{ ...order(0), colour: 'red' }] }))
      .thenThrows('invalid', 'unknown field "colour"; the dataset defines day, at, item, qty, price', 'data[0].colour');
  });

  it('quotes at most 60 characters of an unknown key, in the message and the path', () => {
    const key = `${'k'.repeat(60)}overflow`;
    const err = given(ordersDefined)
      .when(appendRecords('orders', { data: [{ ...order(0), [key]: 1 }] }))
      .thenThrows('invalid', `unknown field "${'k'.repeat(60)}"; the dataset defines`, `data[0].${'k'.repeat(60)}`);
    expect(err.message).not.toContain('overflow');
  });

  it('names an unknown key with a lone surrogate, or one cut inside a pair, as well-formed text in the message and the path', () => {
    for (const key of ['\ud800', `${'k'.repeat(59)}😀overflow`]) {
      const err = given(ordersDefined).when(appendRecords('orders', { data: [{ ...order(0), [key]: 1 }] })).thenThrows('invalid', 'unknown field');
      expect([err.message.isWellFormed(), err.path?.isWellFormed()]).toStrictEqual([true, true]);
    }
    given(ordersDefined).when(appendRecords('orders', { data: [{ ...order(0), 'a\udc00': 1 }] })).thenThrows('invalid', 'unknown field "a\ufffd"', 'data[0].a\ufffd');
  });

  it('refuses an own "__proto__" key as sent in JSON', () => {
    const record: unknown = JSON.parse('{"day": "2024-03-01", "item": "x", "qty": 1, "__proto__": {"qty": 2}}');
    given(ordersDefined).when(appendRecords('orders', { data: [record] })).thenThrows('invalid', 'unknown field "__proto__"');
  });

  it('refuses a missing required key', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [{ day: '2024-03-01', item: 'x' }] }))
      .thenThrows('invalid', 'the field "qty" is required but missing', 'data[0].qty');
  });

  it('refuses null in a required field', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [{ ...order(0), item: null }] }))
      .thenThrows('invalid', 'the field "item" is required and may not be null', 'data[0].item');
  });

  it('reads a missing optional key and an explicit null alike as null', () => {
    given(ordersDefined)
      .when(appendRecords('orders', { data: [order(0), { ...order(1), at: null, price: null }] }))
      .then([recordsAppended('orders', [stored(0), stored(1)])]);
  });

  it('reads a missing field named "constructor" as missing, not as Object.prototype.constructor', () => {
    const def: DatasetDefinition = { fields: { constructor: field('number', 'C', { optional: true }), n: field('number', 'N') }, unique_by: [] };
    const events = [datasetDefined('ds', def)];
    given(events)
      .when(appendRecords('ds', { data: [{ n: 1 }] }))
      .thenState((s) => expect(Object.entries(s.get('acme')?.get('ds')?.rows.get(0) ?? {})).toStrictEqual([['constructor', null], ['n', 1]]));
    given(events)
      .when(appendRecords('ds', { data: [{ constructor: 7, n: 1 }] }))
      .thenState((s) => expect(Object.entries(s.get('acme')?.get('ds')?.rows.get(0) ?? {})).toStrictEqual([['constructor', 7], ['n', 1]]));
    const required: DatasetDefinition = { fields: { constructor: field('number', 'C') }, unique_by: [] };
    given([datasetDefined('ds', required)]).when(appendRecords('ds', { data: [{}] })).thenThrows('invalid', 'is required but missing');
  });
});

describe('number, percentage and duration: a finite JSON number', () => {
  const kinds: FieldDefinition[] = [field('number', 'N'), field('percentage', 'P'), field('duration', 'D', { time_unit: 'seconds' })];
  describe.each(kinds)('$type', (f) => {
    it.each([0, -0, 1, -1.5, 0.25, 1.5, 150, 1e300, -1e-300, Number.MAX_VALUE, Number.MIN_VALUE])('accepts %p', (v) => accepts(f, v));
    it.each([NaN, Infinity, -Infinity, '5', '', true, false, {}, [], [1]])('refuses %p', (v) => refuses(f, v, `must be a ${f.type} (a finite JSON number)`));
  });
});

describe('money: an integer amount within ±2^53', () => {
  const usd = field('money', 'Amount', { currency_code: 'USD' });
  it.each([0, 1000, -250, 795.0, 2 ** 53, -(2 ** 53), Number.MAX_SAFE_INTEGER, 1e15])('accepts %p', (v) => accepts(usd, v));
  it.each([795.5, 0.1, -0.01, 2 ** 53 + 2, -(2 ** 53) - 2, 1e300, NaN, Infinity, '795', true, {}])('refuses %p', (v) =>
    refuses(usd, v, 'integer amount in the smallest unit of USD'),
  );
  it('names the currency generically for a definition that lacks the code (one not made by parseDefinition)', () =>
    refuses(field('money', 'Amount'), 0.5, 'must be an integer amount in the smallest unit of the currency (e.g. 1000 for 10.00)'));
});

describe('string: at most 100 characters counted as code points', () => {
  const str = field('string', 'S');
  it.each([
    ['the empty string', ''],
    ['one character', 'a'],
    ['100 ASCII characters', 'x'.repeat(100)],
    ['100 astral characters (200 UTF-16 units)', '😀'.repeat(100)],
    ['99 letters and one emoji', `${'x'.repeat(99)}😀`],
    ['100 CJK characters', '漢'.repeat(100)],
    ['100 characters at both ends of the astral planes', '\u{10000}\u{10ffff}'.repeat(50)],
    ['control characters', '\u0000\n\t'],
  ])('accepts %s', (_label, v) => accepts(str, v));

  // ClickHouse (and gRPC) keep text as UTF-8, where a lone surrogate becomes U+FFFD: "\ud800" and "\ud801"
  // would be stored as one value, so two unique keys as one row.
  it.each([
    ['a lone high surrogate', '\ud800'],
    ['a lone low surrogate', 'a\udc00b'],
    ['a low surrogate before a high one', '\ude00\ud83d'],
    ['99 emoji and a lone high surrogate at the end (100 code points)', `${'😀'.repeat(99)}\ud800`],
    ['98 emoji and two lone high surrogates (100 code points)', `${'😀'.repeat(98)}\udbff\ud800`],
  ])('refuses %s: it is not well-formed Unicode', (_label, v) => refuses(str, v, 'must be well-formed Unicode text, without a lone UTF-16 surrogate (such as "\\ud800"); got "'));

  it('refuses a lone surrogate with a message that is well-formed itself (gRPC carries it as UTF-8)', () => {
    const err = givenField(str).when(appendRecords('ds', { data: [{ value: `${'x'.repeat(59)}😀` }, { value: '\ud800' }] })).thenThrows('invalid', 'Record 1', 'data[1].value');
    expect(err.message).toContain('got "\\ud800"');
    expect(err.message.isWellFormed()).toBe(true);
  });

  it.each([
    ['101 ASCII characters', 'x'.repeat(101)],
    ['101 astral characters', '😀'.repeat(101)],
    ['99 letters and two emoji', `${'x'.repeat(99)}😀😀`],
    ['100 letters and a combining accent (101 code points)', `${'e'.repeat(99)}e\u0301`],
    ['101 characters at both ends of the astral planes', `${'\u{10000}\u{10ffff}'.repeat(50)}\u{10000}`],
    ['100 emoji and one letter', `${'😀'.repeat(100)}x`],
    ['99 emoji, a lone high surrogate and a letter (101 code points)', `${'😀'.repeat(99)}\ud800x`],
    ['99 emoji, a high surrogate before a high surrogate, and a letter', `${'😀'.repeat(98)}\ud800\udbffx`],
    ['99 emoji, a high surrogate before a character past the low surrogates, and a letter', `${'😀'.repeat(98)}\udbff\ue000x`],
    ['99 emoji, lone low surrogates (each one character)', `${'😀'.repeat(99)}\udc00\udfff`],
    ['100 letters and a lone low surrogate', `${'x'.repeat(100)}\udc00`],
  ])('refuses %s', (_label, v) => refuses(str, v, 'at most 100 characters'));

  it.each([5, true, {}, ['a']])('refuses the non-string %p', (v) => refuses(str, v, 'must be a string'));
});

describe('date: YYYY-MM-DD, a real calendar date', () => {
  const date = field('date', 'Day');
  it.each(['2024-02-29', '2000-02-29', '2023-02-28', '1999-12-31', '2024-04-30', '0001-01-01', '0000-01-01', '9999-12-31'])('accepts %p unchanged', (v) =>
    accepts(date, v),
  );
  it.each([
    '2023-02-29',
    '1900-02-29',
    '2100-02-29',
    '2024-02-30',
    '2024-04-31',
    '2024-13-01',
    '2024-00-10',
    '2024-01-00',
    '2024-01-32',
    '2024-1-1',
    '24-01-01',
    '20240101',
    '2024/01/01',
    // A character just past either end of 0-9 in each digit position ('/' and ':').
    ':024-01-01',
    '/024-01-01',
    '2:24-01-01',
    '2/24-01-01',
    '20:4-01-01',
    '20/4-01-01',
    '202:-01-01',
    '202/-01-01',
    '2024-0:-01',
    '2024-1/-01',
    '2024-01-0:',
    '2024-01-1/',
    '2O24-01-01',
    '2024-01/01',
    '2024/01-01',
    '2024-01-01T00:00:00Z',
    ' 2024-01-01',
    '2024-01-01 ',
    '+02024-01-01',
    '２０２４-01-01',
    '',
    20240101,
    true,
  ])('refuses %p', (v) => refuses(date, v, 'must be a date formatted YYYY-MM-DD'));
});

describe('datetime: ISO 8601 with Z, ±hh:mm or no offset (UTC), stored as UTC with milliseconds', () => {
  const dt = field('datetime', 'At');
  it.each([
    ['2024-01-31T12:00:00Z', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00.000Z', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00+00:00', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00-00:00', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00+02:00', '2024-01-31T10:00:00.000Z'],
    ['2024-01-31T12:00:00-05:00', '2024-01-31T17:00:00.000Z'],
    ['2024-01-31T12:00:00+05:30', '2024-01-31T06:30:00.000Z'],
    ['2024-01-31T01:00:00+02:00', '2024-01-30T23:00:00.000Z'],
    ['2024-12-31T23:30:00-01:00', '2025-01-01T00:30:00.000Z'],
    ['2024-03-01T00:00:00+05:30', '2024-02-29T18:30:00.000Z'],
    ['2024-01-31T12:00:00', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00.5Z', '2024-01-31T12:00:00.500Z'],
    ['2024-01-31T12:00:00.05Z', '2024-01-31T12:00:00.050Z'],
    ['2024-01-31T12:00:00.123Z', '2024-01-31T12:00:00.123Z'],
    ['2024-01-31T12:00:00.123456789Z', '2024-01-31T12:00:00.123Z'],
    ['2024-01-31T12:00:00.9999Z', '2024-01-31T12:00:00.999Z'],
    ['2024-01-31T12:00:00.001+01:00', '2024-01-31T11:00:00.001Z'],
    ['2024-02-29T23:59:59.999Z', '2024-02-29T23:59:59.999Z'],
    ['1970-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z'],
    ['1969-12-31T23:59:59.999Z', '1969-12-31T23:59:59.999Z'],
    // The RFC 3339 and ISO 8601 variants: lower-case t and z, a space for the T, a decimal comma.
    ['2024-01-31t12:00:00z', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31t12:00:00.250+01:00', '2024-01-31T11:00:00.250Z'],
    ['2024-01-31 12:00:00Z', '2024-01-31T12:00:00.000Z'],
    ['2024-01-31T12:00:00,5Z', '2024-01-31T12:00:00.500Z'],
    ['2024-01-31T12:00:00,123-01:00', '2024-01-31T13:00:00.123Z'],
    // Seconds may be left out, with or without an offset.
    ['2024-01-31T12:34', '2024-01-31T12:34:00.000Z'],
    ['2024-01-31T12:34Z', '2024-01-31T12:34:00.000Z'],
    ['2024-01-31T12:34+01:00', '2024-01-31T11:34:00.000Z'],
    ['2024-01-31T12:34:56.7', '2024-01-31T12:34:56.700Z'],
    // 2000 is the last year of a 400-year cycle: its 29 February exists and stays 29 February.
    ['2000-02-29T12:00:00Z', '2000-02-29T12:00:00.000Z'],
    ['2000-03-01T00:30:00+01:00', '2000-02-29T23:30:00.000Z'],
    ['2000-02-29T23:30:00-01:00', '2000-03-01T00:30:00.000Z'],
    ['2000-12-31T23:00:00-01:00', '2001-01-01T00:00:00.000Z'],
    // An offset may carry the instant to the very ends of four-digit years, not past them.
    ['0000-01-01T01:00:00+01:00', '0000-01-01T00:00:00.000Z'],
    ['0000-01-01T00:00:00-00:01', '0000-01-01T00:01:00.000Z'],
    ['9999-12-31T22:59:59.999-01:00', '9999-12-31T23:59:59.999Z'],
    ['9999-12-31T23:59:59.999+00:01', '9999-12-31T23:58:59.999Z'],
    ['2024-01-31T12:00:00+23:59', '2024-01-30T12:01:00.000Z'],
    ['2024-01-31T12:00:00-23:59', '2024-02-01T11:59:00.000Z'],
  ])('accepts %p as %p', (v, normalised) => accepts(dt, v, normalised));

  it.each([
    '2023-02-29T00:00:00Z',
    '2024-04-31T00:00:00Z',
    '2024-13-01T00:00:00Z',
    '2024-01-31T24:00:00Z',
    '2024-01-31T12:60:00Z',
    '2024-01-31T12:00:60Z',
    '2024-01-31T12:00:00+25:00',
    '2024-01-31T12:00:00+02:60',
    '2024-01-31T12:00:00 Z',
    '2024-01-31T12:00:00.Z',
    '2024-01-31',
    '2024-01-31T',
    '12:00:00Z',
    'yesterday',
    'Wed, 31 Jan 2024 12:00:00 GMT',
    '',
    // Not the dash-separated calendar date, or another separator where the grammar has one.
    '2024/01/31T12:00:00Z',
    '2024-01/31T12:00:00Z',
    '2024-01-31_12:00:00Z',
    '2024-01-31T12.00:00Z',
    '2024-01-31T12:00.00Z',
    '2024-01-31T12:00:00;5Z',
    '2024-01-31T-1:00:00Z',
    '2024-01-31T12:-1:00Z',
    '2024-01-31T12:00:-1Z',
    '2024-01-31T12:00:00+-1:00',
    '2024-01-31T12:00:00+01:-1',
    '2024-01-31T12:00:00 01:00',
    '2024-01-31T12:00:00*01:00',
    '2024-01-31T1:00:00Z',
    '2024-01-31T12:0',
    '2024-01-31T12:00:0Z',
    // Nothing may follow the offset or the time.
    '2024-01-31T12:00:00Zjunk',
    '2024-01-31T12:00:00ZZ',
    '2024-01-31T12:00:00Z ',
    '2024-01-31T12:00:00+01:00Z',
    '2024-01-31T12:00:00+01:00:00',
    '2024-01-31T12:00:00.123 ',
    '2024-01-31T12:00:00.12a',
    '2024-01-31T12:00x',
    // The offset is written ±hh:mm (docs/api.md → Fields and values); ±hh and ±hhmm are not taken.
    '2024-01-31T12:00:00+01',
    '2024-01-31T12:00:00-05',
    '2024-01-31T12:00:00+0100',
    '2024-01-31T12:00:00-0530',
    '2024-01-31T12:00+01',
    '2024-01-31T12:00:00+1:00',
    '2024-01-31T12:00:00+01:0',
    '2024-01-31T12:00:00+01-00',
    '2024-01-31T12:00:00+24:00',
    '2024-01-31T12:00:00+',
    '2024-01-31T12:00:00 +01:00',
    '2024-01-31T12:00:00UTC',
    // An offset that takes the instant outside four-digit years.
    '9999-12-31T23:59:59.999-00:01',
    '9999-12-31T23:00:00-01:00',
    '0000-01-01T00:00:00+00:01',
    '0000-01-01T00:59:59.999+01:00',
  ])('refuses %p', (v) => refuses(dt, v, 'must be an ISO 8601 date-time'));

  it.each([1706702400000, true, {}, ['2024-01-31T12:00:00Z']])('refuses the non-string %p', (v) => refuses(dt, v, 'must be an ISO 8601 date-time'));
});

describe('delete_by', () => {
  const stats: DatasetDefinition = {
    fields: { day: field('date', 'Day'), at: field('datetime', 'At'), team: field('string', 'Team'), n: field('number', 'N') },
    unique_by: [],
  };
  const events = [datasetDefined('stats', stats)];
  const rec = { day: '2024-01-01', at: '2024-01-01T00:00:00Z', team: 'a', n: 1 };
  const normal = { day: '2024-01-01', at: '2024-01-01T00:00:00.000Z', team: 'a', n: 1 };

  it.each<[Record<string, unknown>, string | null]>([
    [{}, null],
    [{ delete_by: null }, null],
    [{ delete_by: '' }, null],
    [{ deleteBy: null }, null],
    [{ deleteBy: '' }, null],
    [{ delete_by: null, deleteBy: 'day' }, 'day'],
    [{ delete_by: 'day' }, 'day'],
    [{ delete_by: 'at' }, 'at'],
    [{ deleteBy: 'day' }, 'day'],
    [{ delete_by: ['at'] }, 'at'],
    [{ deleteBy: ['day'] }, 'day'],
  ])('reads %j as %j', (extra, deleteBy) => {
    given(events)
      .when(appendRecords('stats', { data: [rec], ...extra }))
      .then([recordsAppended('stats', [normal], deleteBy)]);
  });

  it('quotes at most 60 characters of an unknown delete_by', () => {
    const name = `${'d'.repeat(60)}overflow`;
    const err = given(events).when(appendRecords('stats', { data: [rec], delete_by: name })).thenThrows('invalid', `unknown field "${'d'.repeat(60)}"; it must be`);
    expect(err.message).not.toContain('overflow');
  });

  it.each<[unknown, string]>([
    ['n', 'must name a date or datetime field; "n" is of type number'],
    ['team', '"team" is of type string'],
    ['dya', 'unknown field "dya"'],
    ['Day', 'unknown field "Day"'],
    ['constructor', 'unknown field "constructor"'],
    ['toString', 'unknown field "toString"'],
    [['day', 'at'], 'must be the key of a date or datetime field'],
    [[], 'must be the key of a date or datetime field'],
    [[5], 'must be the key of a date or datetime field'],
    [5, 'must be the key of a date or datetime field'],
    [{ field: 'day' }, 'must be the key of a date or datetime field'],
  ])('refuses delete_by %j', (deleteBy, fragment) => {
    given(events).when(appendRecords('stats', { data: [rec], delete_by: deleteBy })).thenThrows('invalid', fragment, 'delete_by');
    given(events).when(appendRecords('stats', { data: [rec], deleteBy })).thenThrows('invalid', fragment, 'deleteBy');
  });

  // The official clients send one spelling each; a second one beside a valid first is checked too, never
  // dropped silently.
  it.each<[unknown, string]>([
    [5, 'must be the key of a date or datetime field'],
    [[5], 'must be the key of a date or datetime field'],
    [[null], 'must be the key of a date or datetime field'],
    [[], 'must be the key of a date or datetime field'],
    [['day', 'day'], 'must be the key of a date or datetime field'],
    [{}, 'must be the key of a date or datetime field'],
    [false, 'must be the key of a date or datetime field'],
    ['n', '"deleteBy" must name a date or datetime field; "n" is of type number'],
    ['nope', '"deleteBy" names the unknown field "nope"'],
  ])('refuses a malformed deleteBy %j beside a valid delete_by', (deleteBy, fragment) => {
    for (const delete_by of ['day', ['day'], '', null]) {
      given(events).when(appendRecords('stats', { data: [rec], delete_by, deleteBy })).thenThrows('invalid', fragment, 'deleteBy');
      given(events).when(appendRecords('stats', { data: [], delete_by, deleteBy })).thenThrows('invalid', fragment, 'deleteBy');
    }
  });

  it('refuses a malformed delete_by beside a valid deleteBy', () => {
    given(events).when(appendRecords('stats', { data: [rec], delete_by: [7], deleteBy: 'day' })).thenThrows('invalid', 'must be the key', 'delete_by');
    given(events).when(appendRecords('stats', { data: [rec], delete_by: 'n', deleteBy: 'day' })).thenThrows('invalid', '"n" is of type number', 'delete_by');
  });

  it('refuses delete_by and deleteBy naming different fields', () => {
    given(events)
      .when(appendRecords('stats', { data: [rec], delete_by: 'day', deleteBy: 'at' }))
      .thenThrows('invalid', '"delete_by" and "deleteBy" name different fields ("day" and "at"); send one of them', 'deleteBy');
  });

  it.each<[Record<string, unknown>, string | null]>([
    [{ delete_by: 'day', deleteBy: 'day' }, 'day'],
    [{ delete_by: ['at'], deleteBy: 'at' }, 'at'],
    [{ delete_by: '', deleteBy: 'day' }, 'day'],
    [{ delete_by: 'at', deleteBy: null }, 'at'],
    [{ delete_by: [''], deleteBy: '' }, null],
  ])('reads both spellings %j as %j when they agree', (extra, deleteBy) => {
    given(events)
      .when(appendRecords('stats', { data: [rec], ...extra }))
      .then([recordsAppended('stats', [normal], deleteBy)]);
  });
});

describe('error messages never serialise a client value whole', () => {
  const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
  const def = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });

  it('names a deeply nested record value by kind instead of overflowing the stack', () => {
    expect(() => parseRecords(def, [{ n: deep }])).toThrow(/Record 0 \(data\[0\]\): the field "n" must be a number \(a finite JSON number\); got an array/);
  });

  it('renders strings quoted and cut after 60 characters, numbers and booleans as written, anything else by kind', () => {
    expect(quoteValue('x'.repeat(60))).toBe(`"${'x'.repeat(60)}"`);
    expect(quoteValue('x'.repeat(61))).toBe(`"${'x'.repeat(60)}…"`);
    expect(quoteValue('say "hi"')).toBe('"say \\"hi\\""');
    expect([quoteValue(-1.5), quoteValue(0), quoteValue(true), quoteValue(false)]).toStrictEqual(['-1.5', '0', 'true', 'false']);
    expect([quoteValue(undefined), quoteValue(null), quoteValue([1]), quoteValue({ a: 1 })]).toStrictEqual(['nothing', 'null', 'an array', 'object']);
    expect([describeValue(null), describeValue([]), describeValue({}), describeValue('s'), describeValue(1), describeValue(undefined)]).toStrictEqual([
      'null',
      'an array',
      'object',
      'string',
      'number',
      'undefined',
    ]);
  });

  it('throws DomainErrors that say so by name, with a code, a message and the path of the broken rule', () => {
    const err = invalid('bad', 'data[0].n');
    expect(err).toBeInstanceOf(Error);
    expect([err.name, err.code, err.message, err.path]).toStrictEqual(['DomainError', 'invalid', 'bad', 'data[0].n']);
    expect(String(err)).toBe('DomainError: bad');
  });

  it('does the same for a nested field type, and cuts long strings', () => {
    expect(() => parseDefinition({ fields: { n: { type: deep, name: 'N' } } })).toThrow(/invalid type an array/);
    expect(() => parseRecords(def, [{ n: 'x'.repeat(5000) }])).toThrow(new RegExp(`got "${'x'.repeat(60)}…"$`));
  });
});

describe('the unique key: the row key of a unique_by dataset, kept in snapshots, so its form is durable', () => {
  it('writes one field as a kind letter and the value: z for null, n for a number, s for a string', () => {
    expect(uniqueKey(['day'], { day: '2024-01-01', n: 1 })).toBe('s2024-01-01');
    expect(uniqueKey(['n'], { day: '2024-01-01', n: 1.5 })).toBe('n1.5');
    expect(uniqueKey(['n'], { n: null })).toBe('z');
    expect(uniqueKey(['n'], {})).toBe('z');
  });

  it('writes several fields as the JSON array of their values', () => {
    expect(uniqueKey(['day', 'team'], { day: '2024-01-01', team: 'a"b', n: 1 })).toBe('["2024-01-01","a\\"b"]');
    expect(uniqueKey(['day', 'team'], { day: '2024-01-01' })).toBe('["2024-01-01",null]');
  });

  it('tells a number from the string of its digits, and null from the string "null"', () => {
    expect(uniqueKey(['v'], { v: 1 })).not.toBe(uniqueKey(['v'], { v: '1' }));
    expect(uniqueKey(['v'], { v: null })).not.toBe(uniqueKey(['v'], { v: 'null' }));
    expect(uniqueKey(['v'], { v: null })).not.toBe(uniqueKey(['v'], { v: '' }));
  });
});

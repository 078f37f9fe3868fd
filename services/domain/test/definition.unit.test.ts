import { LIMITS, decideDefine, parseDatasetId, parseDefinition, type DatasetDefinition, type FieldDefinition } from '../src';
import {
  ACCOUNT,
  AT,
  appendRecords,
  datasetDefined,
  datasetDeleted,
  defineDataset,
  deleteDataset,
  field,
  given,
  recordsAppended,
  replaceRecords,
} from './specification';

const salesBody = {
  fields: {
    day: { type: 'date', name: 'Day' },
    amount: { type: 'money', name: 'Amount', currency_code: 'USD' },
  },
  unique_by: ['day'],
};
const sales: DatasetDefinition = {
  fields: { day: field('date', 'Day'), amount: field('money', 'Amount', { currency_code: 'USD' }) },
  unique_by: ['day'],
};
const bodyWith = (fields: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ fields, ...extra });
const oneField = (f: unknown) => bodyWith({ value: f });

describe('find or create a dataset (PUT /datasets/:id)', () => {
  it('creates a new dataset with its definition normalised', () => {
    given([]).when(defineDataset('sales.by.day', salesBody)).then([datasetDefined('sales.by.day', sales)]);
  });

  it('finds an existing dataset with the same definition and records nothing', () => {
    given([datasetDefined('sales', sales)]).when(defineDataset('sales', salesBody, { incarnation: 'inc-other' })).then([]);
  });

  it('returns the stored dataset when found and a summary of the new one when created', () => {
    const created = decideDefine({ account: ACCOUNT, id: 'sales', body: salesBody, at: AT, newIncarnation: 'i1' }, undefined, 0);
    expect(created.outcome).toBe('created');
    expect(created.dataset).toStrictEqual({ account: ACCOUNT, id: 'sales', incarnation: 'i1', definition: sales, created_at: AT, updated_at: AT });
    const found = decideDefine({ account: ACCOUNT, id: 'sales', body: salesBody, at: AT + 5, newIncarnation: 'i2' }, created.dataset, 1);
    expect(found).toStrictEqual({ outcome: 'found', dataset: created.dataset });
  });

  it('tolerates the extra top-level keys clients echo back (id, created_at, updated_at)', () => {
    const body = { ...salesBody, id: 'sales', created_at: '2024-01-01T00:00:00Z', updated_at: '2024-01-01T00:00:00Z' };
    given([]).when(defineDataset('sales', body)).then([datasetDefined('sales', sales)]);
    given([datasetDefined('sales', sales)]).when(defineDataset('sales', body)).then([]);
  });

  it('refuses a body that is not an object with fields', () => {
    for (const body of [null, [], 'fields', 42, undefined]) {
      given([]).when(defineDataset('sales', body)).thenThrows('invalid', 'must be a JSON object');
    }
    for (const body of [{}, { fields: [] }, { fields: null }, { fields: 'day' }, { unique_by: ['day'] }]) {
      given([]).when(defineDataset('sales', body)).thenThrows('invalid', '"fields" is required', 'fields');
    }
  });
});

describe('dataset ids: 1–100 characters of a-z 0-9 . _ -, starting and ending with a letter or digit', () => {
  it.each(['a', '7', 'sales', 'sales.by.day', 'a-b_c.d', '9lives', 'x1', 'a..b', 'a__--b', 'x'.repeat(100), `a${'.'.repeat(98)}z`])(
    'accepts %j',
    (id) => {
      expect(parseDatasetId(id)).toBe(id);
      given([]).when(defineDataset(id, salesBody)).then([datasetDefined(id, sales)]);
    },
  );

  it.each([
    '',
    'x'.repeat(101),
    '.a',
    'a.',
    '-a',
    'a-',
    '_a',
    'a_',
    '.',
    '..',
    'Sales',
    'salesByDay',
    'a b',
    'a/b',
    'a%20b',
    'a:b',
    'a!',
    'é',
    'sales\n',
    ' sales',
  ])('refuses %j', (id) => {
    given([]).when(defineDataset(id, salesBody)).thenThrows('invalid', 'Invalid dataset id', 'id');
  });

  it('quotes at most 120 characters of a refused id', () => {
    const id = `${'A'.repeat(120)}overflow`;
    const err = given([]).when(defineDataset(id, salesBody)).thenThrows('invalid', `Invalid dataset id "${'A'.repeat(120)}": use 1 to 100 characters`);
    expect(err.message).not.toContain('overflow');
  });

  it('validates the id of append, replace and delete too, before looking the dataset up', () => {
    const events = [datasetDefined('sales', sales)];
    given(events).when(appendRecords('Sales', { data: [] })).thenThrows('invalid', 'Invalid dataset id');
    given(events).when(replaceRecords('sales/', { data: [] })).thenThrows('invalid', 'Invalid dataset id');
    given(events).when(deleteDataset('-sales')).thenThrows('invalid', 'Invalid dataset id');
  });
});

describe('field keys: ^[a-z][a-z0-9_]{0,49}$', () => {
  it.each(['a', 'day', 'amount_usd', 'x1', 'a_', 'constructor', `a${'b'.repeat(49)}`])('accepts %j', (key) => {
    // Compared as entries: jest's strict equality reads an own "constructor" key as the object's class.
    given([])
      .when(defineDataset('ds', bodyWith({ [key]: { type: 'number', name: 'N' } })))
      .thenState((s) => expect(Object.entries(s.get(ACCOUNT)?.get('ds')?.definition.fields ?? {})).toStrictEqual([[key, field('number', 'N')]]));
  });

  it.each(['Day', 'dayOfWeek', '1day', '_day', 'day-of', 'day.of', 'day of', 'dày', '', '__proto__', `a${'b'.repeat(50)}`])('refuses %j', (key) => {
    given([])
      .when(defineDataset('ds', bodyWith({ ok: { type: 'number', name: 'OK' }, [key]: { type: 'number', name: 'N' } })))
      .thenThrows('invalid', 'Invalid field key', `fields.${key}`);
  });

  it('quotes at most 60 characters of a refused key', () => {
    const key = `${'K'.repeat(60)}overflow`;
    const err = given([]).when(defineDataset('ds', bodyWith({ [key]: { type: 'number', name: 'N' } }))).thenThrows('invalid', `Invalid field key "${'K'.repeat(60)}": field keys`);
    expect(err.message).not.toContain('overflow');
  });

  it('refuses "__proto__" as sent in JSON (an own key, not the prototype)', () => {
    const body: unknown = JSON.parse('{"fields": {"__proto__": {"type": "number", "name": "P"}}}');
    given([]).when(defineDataset('ds', body)).thenThrows('invalid', 'Invalid field key');
  });
});

describe('fields: 1 to 10 entries', () => {
  const nFields = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: 'number', name: `F${i}` }]));

  it('refuses an empty fields object', () => {
    given([]).when(defineDataset('ds', bodyWith({}))).thenThrows('invalid', 'at least one field', 'fields');
  });

  it.each([1, 2, LIMITS.fieldsPerDataset])('accepts %i fields', (n) => {
    given([])
      .when(defineDataset('ds', bodyWith(nFields(n))))
      .thenState((s) => expect(Object.keys(s.get(ACCOUNT)?.get('ds')?.definition.fields ?? {})).toHaveLength(n));
  });

  it.each([11, 20])('refuses %i fields, naming the limit of 10', (n) => {
    given([]).when(defineDataset('ds', bodyWith(nFields(n)))).thenThrows('invalid', 'at most 10 fields', 'fields');
  });

  it('accepts any mix of types', () => {
    const fields = {
      a: { type: 'date', name: 'A' },
      b: { type: 'datetime', name: 'B' },
      c: { type: 'number', name: 'C' },
      d: { type: 'percentage', name: 'D' },
      e: { type: 'string', name: 'E' },
      f: { type: 'money', name: 'F', currency_code: 'EUR' },
      g: { type: 'duration', name: 'G', time_unit: 'seconds' },
      h: { type: 'number', name: 'H', optional: true },
      i: { type: 'string', name: 'I', optional: true },
      j: { type: 'date', name: 'J', optional: false },
    };
    given([])
      .when(defineDataset('mix', bodyWith(fields)))
      .then([
        datasetDefined('mix', {
          fields: {
            a: field('date', 'A'),
            b: field('datetime', 'B'),
            c: field('number', 'C'),
            d: field('percentage', 'D'),
            e: field('string', 'E'),
            f: field('money', 'F', { currency_code: 'EUR' }),
            g: field('duration', 'G', { time_unit: 'seconds' }),
            h: field('number', 'H', { optional: true }),
            i: field('string', 'I', { optional: true }),
            j: field('date', 'J'),
          },
          unique_by: [],
        }),
      ]);
  });
});

describe('field definitions', () => {
  it.each(['date', 'datetime', 'number', 'percentage', 'string'] as const)('accepts type %s', (type) => {
    given([])
      .when(defineDataset('ds', oneField({ type, name: 'Value' })))
      .then([datasetDefined('ds', { fields: { value: field(type, 'Value') }, unique_by: [] })]);
  });

  it.each([undefined, null, 'text', 'integer', 'Date', 'NUMBER', 'boolean', 5, ['number']])('refuses type %j', (type) => {
    given([]).when(defineDataset('ds', oneField({ type, name: 'Value' }))).thenThrows('invalid', 'invalid type', 'fields.value.type');
  });

  it('lists the types to choose from when the type is refused', () => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'text', name: 'Value' })))
      .thenThrows('invalid', 'Field "value" has an invalid type "text": use one of date, datetime, number, percentage, string, money, duration');
  });

  it.each([null, 'number', 5, ['number']])('refuses a field definition that is %j rather than an object', (def) => {
    given([]).when(defineDataset('ds', oneField(def))).thenThrows('invalid', 'must be an object', 'fields.value');
  });

  it.each([undefined, '', 5, null, ['Value']])('refuses name %j: it must be a non-empty string', (name) => {
    given([]).when(defineDataset('ds', oneField({ type: 'number', name }))).thenThrows('invalid', 'needs a name', 'fields.value.name');
  });

  it('accepts any non-empty name, even one of spaces (docs/api.md → Find or create a dataset asks only for a non-empty string)', () => {
    given([]).when(defineDataset('ds', oneField({ type: 'number', name: '   ' }))).thenState((s) => expect(s.get(ACCOUNT)?.get('ds')?.definition.fields.value?.name).toBe('   '));
  });

  it.each([
    ['250 ASCII characters', 'N'.repeat(250)],
    ['250 emoji (500 UTF-16 units)', '😀'.repeat(250)],
    ['249 letters and a combining accent', `${'e'.repeat(249)}\u0301`],
  ])('accepts a name of %s: the limit is 250 code points', (_label, name) => {
    given([]).when(defineDataset('ds', oneField({ type: 'number', name }))).thenState((s) => expect(s.get(ACCOUNT)?.get('ds')?.definition.fields.value?.name).toBe(name));
  });

  it.each([
    ['251 ASCII characters', 'N'.repeat(251)],
    ['251 emoji', '😀'.repeat(251)],
    ['4 MB', 'N'.repeat(4 * 1024 * 1024)],
  ])('refuses a name of %s, naming the field and the limit', (_label, name) => {
    expect(LIMITS.fieldNameLength).toBe(250);
    given([])
      .when(defineDataset('ds', bodyWith({ ok: { type: 'number', name: 'OK' }, value: { type: 'number', name } })))
      .thenThrows('invalid', 'Field "value" has a name longer than 250 characters: a field name is at most 250 characters (Unicode code points)', 'fields.value.name');
  });

  // Text is UTF-8 wherever a definition goes (Redis, Kafka's consumers, ClickHouse, gRPC): a lone surrogate
  // would come back as U+FFFD, a different name than the one stored, and the next find a conflict.
  it.each(['\ud800', 'Day\udc00', '\ude00\ud83d'])('refuses the name %j: it is not well-formed Unicode', (name) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name })))
      .thenThrows('invalid', 'Field "value": the name must be well-formed Unicode text, without a lone UTF-16 surrogate (such as "\\ud800")', 'fields.value.name');
  });

  it('names a refused key or unique_by entry as well-formed text, whatever surrogates it holds', () => {
    const key = '\ud800';
    const bad = given([]).when(defineDataset('ds', bodyWith({ [key]: { type: 'number', name: 'N' } }))).thenThrows('invalid', 'Invalid field key "\ufffd"', 'fields.\ufffd');
    const unknown = given([]).when(defineDataset('ds', { ...oneField({ type: 'number', name: 'N' }), unique_by: [`${'u'.repeat(59)}😀${'x'.repeat(1000)}`] })).thenThrows('invalid', `unknown field "${'u'.repeat(59)}\ufffd"`, 'unique_by[0]');
    expect([bad.message, bad.path, unknown.message].map((t) => t?.isWellFormed())).toStrictEqual([true, true, true]);
  });

  it('defaults optional to false and stores it explicitly', () => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name: 'Value' })))
      .thenState((s) => expect(s.get(ACCOUNT)?.get('ds')?.definition.fields.value).toStrictEqual({ type: 'number', name: 'Value', optional: false }));
  });

  it.each([true, false])('accepts optional %j', (optional) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name: 'Value', optional })))
      .then([datasetDefined('ds', { fields: { value: field('number', 'Value', { optional }) }, unique_by: [] })]);
  });

  it.each(['true', 'false', 1, 0, null, 'yes', []])('refuses optional %j: it must be a boolean', (optional) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name: 'Value', optional })))
      .thenThrows('invalid', 'optional must be true or false', 'fields.value.optional');
  });

  it.each(['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'AUD', 'BHD'])('accepts money with the ISO 4217 code %s', (code) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'money', name: 'Value', currency_code: code })))
      .then([datasetDefined('ds', { fields: { value: field('money', 'Value', { currency_code: code }) }, unique_by: [] })]);
  });

  it.each([undefined, null, '', 'usd', 'Usd', 'US', 'USDD', 'US$', 'ABC', 'ZZZ', 'QQQ', 840, ['USD']])(
    'refuses money with currency_code %j (an existing upper-case ISO 4217 code is required)',
    (code) => {
      given([])
        .when(defineDataset('ds', oneField({ type: 'money', name: 'Value', currency_code: code })))
        .thenThrows('invalid', 'currency_code', 'fields.value.currency_code');
    },
  );

  it.each(['milliseconds', 'seconds', 'minutes', 'hours'] as const)('accepts duration in %s', (unit) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'duration', name: 'Value', time_unit: unit })))
      .then([datasetDefined('ds', { fields: { value: field('duration', 'Value', { time_unit: unit }) }, unique_by: [] })]);
  });

  it.each([undefined, null, '', 'days', 'ms', 'Seconds', 'second', 1000])('refuses duration with time_unit %j', (unit) => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'duration', name: 'Value', time_unit: unit })))
      .thenThrows('invalid', 'time_unit', 'fields.value.time_unit');
  });

  it('lists the time units to choose from', () => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'duration', name: 'Value', time_unit: 'days' })))
      .thenThrows('invalid', 'needs a time_unit: one of milliseconds, seconds, minutes, hours');
  });

  it('keeps currency_code only on money and time_unit only on duration', () => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name: 'Value', currency_code: 'USD', time_unit: 'hours' })))
      .then([datasetDefined('ds', { fields: { value: field('number', 'Value') }, unique_by: [] })]);
  });

  // Tolerated on a type that does not use them, as clients built from one template send them; dropped.
  it.each([
    ['date', { currency_code: 'EUR' }],
    ['string', { currency_code: null, time_unit: null }],
    ['duration', { time_unit: 'seconds', currency_code: 'GBP' }],
    ['money', { currency_code: 'USD', time_unit: 'minutes' }],
    ['percentage', { time_unit: 'milliseconds' }],
  ] as const)('tolerates a valid or null currency_code / time_unit on type %s and does not store it', (type, extra) => {
    const kept: Partial<FieldDefinition> = type === 'money' ? { currency_code: 'USD' } : type === 'duration' ? { time_unit: 'seconds' } : {};
    given([])
      .when(defineDataset('ds', oneField({ type, name: 'Value', ...extra })))
      .then([datasetDefined('ds', { fields: { value: field(type, 'Value', kept) }, unique_by: [] })]);
  });

  // An invalid value is a mistake wherever it stands: refused with its path, not dropped silently.
  it.each(['number', 'date', 'datetime', 'string', 'percentage', 'duration'])('refuses an invalid currency_code on type %s', (type) => {
    for (const code of ['usd', '', 'AAA', 'US', 840, ['USD'], {}, false]) {
      const extra = type === 'duration' ? { time_unit: 'hours' } : {};
      given([])
        .when(defineDataset('ds', oneField({ type, name: 'Value', ...extra, currency_code: code })))
        .thenThrows('invalid', 'has an invalid currency_code', 'fields.value.currency_code');
    }
  });

  it.each(['number', 'date', 'datetime', 'string', 'percentage', 'money'])('refuses an invalid time_unit on type %s', (type) => {
    for (const unit of ['days', '', 'Seconds', 'AAA', 1000, ['hours'], {}, true]) {
      const extra = type === 'money' ? { currency_code: 'EUR' } : {};
      given([])
        .when(defineDataset('ds', oneField({ type, name: 'Value', ...extra, time_unit: unit })))
        .thenThrows('invalid', 'has an invalid time_unit', 'fields.value.time_unit');
    }
  });

  it('says which values an out-of-place key may take', () => {
    given([])
      .when(defineDataset('ds', oneField({ type: 'number', name: 'Value', time_unit: 'days' })))
      .thenThrows('invalid', 'Field "value" has an invalid time_unit "days": when given it must be one of milliseconds, seconds, minutes, hours (only type duration uses it)');
    given([])
      .when(defineDataset('ds', oneField({ type: 'date', name: 'Value', currency_code: 'usd' })))
      .thenThrows('invalid', 'Field "value" has an invalid currency_code "usd": when given it must be an upper-case ISO 4217 code such as "USD" (only type money uses it)');
  });
});

describe('unique_by', () => {
  const fields = {
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'At' },
    team: { type: 'string', name: 'Team' },
    count: { type: 'number', name: 'Count' },
    share: { type: 'percentage', name: 'Share' },
  };
  const stored = {
    day: field('date', 'Day'),
    at: field('datetime', 'At'),
    team: field('string', 'Team'),
    count: field('number', 'Count'),
    share: field('percentage', 'Share'),
  };

  it.each<[unknown, string[]]>([
    [['day'], ['day']],
    [['count'], ['count']],
    [['team', 'day'], ['team', 'day']],
    [['team', 'day', 'at'], ['team', 'day', 'at']],
    ['day', ['day']],
    [[], []],
    [null, []],
    [undefined, []],
  ])('reads unique_by %j as %j', (unique_by, expected) => {
    given([])
      .when(defineDataset('ds', { fields, unique_by }))
      .then([datasetDefined('ds', { fields: stored, unique_by: expected })]);
  });

  it('names an unknown key and lists the defined keys', () => {
    given([])
      .when(defineDataset('ds', { fields, unique_by: ['day', 'dya'] }))
      .thenThrows('invalid', '"unique_by" names the unknown field "dya"; the defined fields are day, at, team, count, share', 'unique_by[1]');
  });

  it.each(['toString', 'constructor', '__proto__', 'hasOwnProperty'])('does not take the prototype property %j for a defined field', (key) => {
    given([]).when(defineDataset('ds', { fields, unique_by: [key] })).thenThrows('invalid', `unknown field "${key}"`);
    given([]).when(defineDataset('ds', { fields, unique_by: ['day', key] })).thenThrows('invalid', `unknown field "${key}"`);
  });

  it('refuses a repeated key', () => {
    given([]).when(defineDataset('ds', { fields, unique_by: ['day', 'day'] })).thenThrows('invalid', 'lists the field "day" twice', 'unique_by[1]');
    given([]).when(defineDataset('ds', { fields, unique_by: ['team', 'day', 'team'] })).thenThrows('invalid', 'twice');
  });

  it.each([
    [['team', 'count'], 'count'],
    [['share', 'day'], 'share'],
    [['day', 'at', 'count'], 'count'],
  ])('with several fields, each must be string, date or datetime: %j', (unique_by, culprit) => {
    given([])
      .when(defineDataset('ds', { fields, unique_by }))
      .thenThrows('invalid', `each must be of type string, date or datetime; "${culprit}" is ${fields[culprit as keyof typeof fields].type}`, 'unique_by');
  });

  it('allows one field of any type', () => {
    for (const key of ['count', 'share']) {
      given([]).when(defineDataset('ds', { fields, unique_by: [key] })).then([datasetDefined('ds', { fields: stored, unique_by: [key] })]);
    }
  });

  it.each([5, { day: true }, true])('refuses unique_by %j that is neither an array nor a key', (unique_by) => {
    given([]).when(defineDataset('ds', { fields, unique_by })).thenThrows('invalid', '"unique_by" must be an array', 'unique_by');
  });

  it.each([[[5]], [[null]], [[['day']]]])('refuses the non-string key in %j', (unique_by) => {
    given([]).when(defineDataset('ds', { fields, unique_by })).thenThrows('invalid', 'must be a field key string', 'unique_by[0]');
  });
});

describe('same definition: found, or a 409-style conflict', () => {
  const base = {
    fields: {
      day: { type: 'date', name: 'Day' },
      team: { type: 'string', name: 'Team', optional: false },
      amount: { type: 'money', name: 'Amount', currency_code: 'USD' },
      took: { type: 'duration', name: 'Took', time_unit: 'seconds', optional: true },
    },
    unique_by: ['day', 'team'],
  };
  const existing = () => {
    const decision = decideDefine({ account: ACCOUNT, id: 'sales', body: base, at: AT, newIncarnation: 'inc-1' }, undefined, 0);
    if (decision.outcome !== 'created') throw new Error('expected created');
    return [decision.event];
  };
  const conflict = 'A dataset with different fields already exists with the ID "sales"';

  it.each<[string, unknown]>([
    ['the same body', base],
    [
      'fields in another key order',
      { fields: { took: base.fields.took, amount: base.fields.amount, team: base.fields.team, day: base.fields.day }, unique_by: ['day', 'team'] },
    ],
    ['unique_by in another order (a set)', { ...base, unique_by: ['team', 'day'] }],
    ['optional: false written out', { ...base, fields: { ...base.fields, day: { type: 'date', name: 'Day', optional: false } } }],
    ['optional: false left out', { ...base, fields: { ...base.fields, team: { type: 'string', name: 'Team' } } }],
    ['extra top-level keys', { ...base, id: 'sales', created_at: 'x', updated_at: 'y' }],
  ])('finds the dataset given %s', (_label, body) => {
    given(existing()).when(defineDataset('sales', body, { incarnation: 'inc-2' })).then([]);
  });

  it('treats a bare-string unique_by and [] like their list forms', () => {
    const events = [datasetDefined('one', { fields: { day: field('date', 'Day') }, unique_by: ['day'] })];
    given(events).when(defineDataset('one', { fields: { day: { type: 'date', name: 'Day' } }, unique_by: 'day' })).then([]);
    const none = [datasetDefined('none', { fields: { day: field('date', 'Day') }, unique_by: [] })];
    given(none).when(defineDataset('none', { fields: { day: { type: 'date', name: 'Day' } }, unique_by: [] })).then([]);
    given(none).when(defineDataset('none', { fields: { day: { type: 'date', name: 'Day' } } })).then([]);
  });

  it.each<[string, unknown, string]>([
    ['a changed type', { ...base, fields: { ...base.fields, day: { type: 'datetime', name: 'Day' } } }, 'field "day" type is "date", not "datetime"'],
    ['a changed name', { ...base, fields: { ...base.fields, day: { type: 'date', name: 'Date' } } }, 'field "day" name is "Day", not "Date"'],
    ['a changed optional', { ...base, fields: { ...base.fields, day: { type: 'date', name: 'Day', optional: true } } }, 'field "day" optional is false, not true'],
    [
      'optional true left out',
      { ...base, fields: { ...base.fields, took: { type: 'duration', name: 'Took', time_unit: 'seconds' } } },
      'field "took" optional is true, not false',
    ],
    [
      'a changed currency',
      { ...base, fields: { ...base.fields, amount: { type: 'money', name: 'Amount', currency_code: 'EUR' } } },
      'field "amount" currency_code is "USD", not "EUR"',
    ],
    [
      'a changed time unit',
      { ...base, fields: { ...base.fields, took: { type: 'duration', name: 'Took', time_unit: 'minutes', optional: true } } },
      'field "took" time_unit is "seconds", not "minutes"',
    ],
    ['an added field', { ...base, fields: { ...base.fields, extra: { type: 'number', name: 'Extra' } } }, 'field "extra" is not defined'],
    ['an added field named constructor', { ...base, fields: { ...base.fields, constructor: { type: 'number', name: 'C' } } }, 'field "constructor" is not defined'],
    [
      'a removed field',
      { fields: { day: base.fields.day, team: base.fields.team, amount: base.fields.amount }, unique_by: ['day', 'team'] },
      'field "took" is missing',
    ],
    ['another unique_by', { ...base, unique_by: ['day'] }, 'unique_by is ["day","team"], not ["day"]'],
    ['no unique_by', { fields: base.fields }, 'unique_by is ["day","team"], not []'],
  ])('refuses %s with the conflict message and what differs', (_label, body, difference) => {
    const err = given(existing()).when(defineDataset('sales', body)).thenThrows('conflict', conflict);
    expect(err.message.startsWith(conflict)).toBe(true);
    expect(err.message).toContain(difference);
  });

  it('lists every difference, separated by "; ", and names a property one side lacks as unset', () => {
    const err = given(existing())
      .when(defineDataset('sales', { ...base, fields: { ...base.fields, amount: { type: 'number', name: 'Amount' }, took: { type: 'money', name: 'Took', currency_code: 'EUR', optional: true } } }))
      .thenThrows('conflict', conflict);
    expect(err.message).toBe(
      `${conflict}: field "amount" type is "money", not "number"; field "amount" currency_code is "USD", not unset; ` +
        'field "took" type is "duration", not "money"; field "took" currency_code is unset, not "EUR"; field "took" time_unit is "seconds", not unset',
    );
  });

  it('refuses a unique_by of the same length that names other fields', () => {
    const one = [datasetDefined('one', { fields: { day: field('date', 'Day'), team: field('string', 'Team') }, unique_by: ['day'] })];
    const body = { fields: { day: { type: 'date', name: 'Day' }, team: { type: 'string', name: 'Team' } }, unique_by: ['team'] };
    given(one).when(defineDataset('one', body)).thenThrows('conflict', 'unique_by is ["day"], not ["team"]');
    const twoFields = { fields: { ...body.fields, at: { type: 'datetime', name: 'At' } }, unique_by: ['day', 'team'] };
    const two = [datasetDefined('two', parseDefinition(twoFields))];
    given(two).when(defineDataset('two', { ...twoFields, unique_by: ['day', 'at'] })).thenThrows('conflict', 'unique_by is ["day","team"], not ["day","at"]');
    given(two).when(defineDataset('two', { ...twoFields, unique_by: ['at', 'team'] })).thenThrows('conflict', 'unique_by is ["day","team"], not ["at","team"]');
  });

  it('checks an invalid definition before comparing', () => {
    given(existing())
      .when(defineDataset('sales', { ...base, fields: { ...base.fields, day: { type: 'date' } } }))
      .thenThrows('invalid', 'needs a name');
  });
});

describe('100 datasets per account', () => {
  const hundred = Array.from({ length: LIMITS.datasetsPerAccount }, (_, i) => datasetDefined(`ds-${i}`, sales, { incarnation: `inc-${i}` }));

  it('creates the 100th dataset', () => {
    given(hundred.slice(0, 99)).when(defineDataset('ds-99', salesBody)).then([datasetDefined('ds-99', sales)]);
  });

  it('refuses the 101st, naming the limit and saying that deleting makes room', () => {
    const err = given(hundred).when(defineDataset('one-more', salesBody)).thenThrows('dataset_limit', 'limit of 100 datasets');
    expect(err.message).toMatch(/[Dd]elete/);
  });

  it('still finds an existing dataset at the limit', () => {
    given(hundred).when(defineDataset('ds-42', salesBody)).then([]);
  });

  it('answers a different definition of an existing id at the limit with a conflict, not the limit', () => {
    given(hundred).when(defineDataset('ds-42', oneField({ type: 'number', name: 'V' }))).thenThrows('conflict', 'already exists');
  });

  it('makes room when a dataset is deleted', () => {
    given([...hundred, datasetDeleted('ds-7', { incarnation: 'inc-7' })])
      .when(defineDataset('one-more', salesBody, { incarnation: 'new' }))
      .then([datasetDefined('one-more', sales, { incarnation: 'new' })]);
  });

  it('counts per account: another account is not limited by this one', () => {
    given(hundred)
      .when(defineDataset('ds-1', salesBody, { account: 'globex' }))
      .then([datasetDefined('ds-1', sales, { account: 'globex' })]);
  });
});

describe('ids are per account; delete frees the id', () => {
  it('lets two accounts own the same id with different definitions', () => {
    const other = oneField({ type: 'number', name: 'V' });
    given([datasetDefined('sales.by.day', sales)])
      .when(defineDataset('sales.by.day', other, { account: 'globex' }))
      .then([datasetDefined('sales.by.day', { fields: { value: field('number', 'V') }, unique_by: [] }, { account: 'globex' })]);
  });

  it('re-creates a deleted id with another definition and a fresh incarnation', () => {
    const other = { fields: { value: field('number', 'V') }, unique_by: [] };
    given([datasetDefined('sales', sales), recordsAppended('sales', [{ day: '2024-01-01', amount: 5 }]), datasetDeleted('sales')])
      .when(defineDataset('sales', oneField({ type: 'number', name: 'V' }), { incarnation: 'inc-2', at: AT + 10 }))
      .then([datasetDefined('sales', other, { incarnation: 'inc-2', at: AT + 10 })]);
  });

  it('answers not found for writes to an id that does not exist or was deleted', () => {
    for (const events of [[], [datasetDefined('sales', sales), datasetDeleted('sales')], [datasetDefined('sales', sales, { account: 'globex' })]]) {
      given(events).when(appendRecords('sales', { data: [] })).thenThrows('not_found', 'Dataset not found');
      given(events).when(replaceRecords('sales', { data: [] })).thenThrows('not_found', 'Dataset not found');
      given(events).when(deleteDataset('sales')).thenThrows('not_found', 'Dataset not found');
    }
  });

  it('deletes the live incarnation', () => {
    given([datasetDefined('sales', sales, { incarnation: 'a' }), datasetDeleted('sales', { incarnation: 'a' }), datasetDefined('sales', sales, { incarnation: 'b' })])
      .when(deleteDataset('sales', { at: AT + 1 }))
      .then([datasetDeleted('sales', { incarnation: 'b', at: AT + 1 })]);
  });
});

import { TestServer } from '../helpers/server';
import { ANY_BODY, appendAll, createDataset, expectError, expectOk, field, listing, uid, UNLIMITED } from './support';

/*
 * Find or create, definitions, ids, delete, the 100-dataset limit, account isolation and the admin read side
 * (docs/api.md → Routes, Errors; docs/operations.md → The read side).
 */

const NOT_FOUND = 'Dataset not found';
const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const conflictPrefix = (id: string): string => `A dataset with different fields already exists with the ID "${id}"`;

let s: TestServer;
let acme: string;
let globex: string;
beforeAll(async () => {
  s = await new TestServer({ env: UNLIMITED }).start();
  acme = s.keys.acme!;
  globex = s.keys.globex!;
});
afterAll(async () => {
  await s.stop();
});

const put = (id: string, body: unknown, key = acme) => s.request('PUT', `/datasets/${id}`, { key, body });

describe('PUT /datasets/:id creates a dataset', () => {
  it('answers 201 with id, fields, created_at and updated_at; unique_by when given', async () => {
    const id = uid('sales');
    const fields = {
      day: field('date', 'Day'),
      amount: field('money', 'Amount', { currency_code: 'USD' }),
      rate: field('percentage', 'Rate', { optional: true }),
    };
    const res = await put(id, { fields, unique_by: ['day'] });
    expectOk(res, 201, ANY_BODY);
    expect(res.body).toEqual({
      id,
      fields: {
        day: expect.objectContaining({ type: 'date', name: 'Day' }),
        amount: expect.objectContaining({ type: 'money', name: 'Amount', currency_code: 'USD' }),
        rate: expect.objectContaining({ type: 'percentage', name: 'Rate', optional: true }),
      },
      unique_by: ['day'],
      created_at: expect.stringMatching(ISO_MILLIS),
      updated_at: expect.stringMatching(ISO_MILLIS),
    });
    expect(Math.abs(Date.parse(res.body.created_at) - Date.now())).toBeLessThan(60_000);
    for (const f of ['day', 'amount']) expect([undefined, false]).toContain(res.body.fields[f].optional);

    const listed = await listing(s, 'acme', id);
    // The listing's times are the dataset's own, as the create answered them.
    expect(listed).toEqual({ id, fields: res.body.fields, unique_by: ['day'], record_count: 0, created_at: res.body.created_at, updated_at: res.body.updated_at });
  });

  it('leaves unique_by out of the answer when none was given', async () => {
    const id = uid('plain');
    const res = await put(id, { fields: { n: field('number', 'N') } });
    expectOk(res, 201, ANY_BODY);
    expect(Object.keys(res.body).sort()).toEqual(['created_at', 'fields', 'id', 'updated_at']);
  });

  it('accepts every field type, 10 fields, and keys with digits and underscores', async () => {
    const fields = {
      d: field('date', 'Date'),
      dt: field('datetime', 'Datetime'),
      num: field('number', 'Number'),
      pct: field('percentage', 'Percentage'),
      str: field('string', 'String'),
      eur: field('money', 'Money', { currency_code: 'EUR' }),
      dur: field('duration', 'Duration', { time_unit: 'seconds' }),
      a1_b2: field('number', 'Digits and underscore'),
      x: field('number', 'X', { optional: false }),
      y: field('number', 'Y', { optional: true }),
    };
    const res = await put(uid('all'), { fields });
    expectOk(res, 201, ANY_BODY);
    expect(res.body.fields.dur).toEqual(expect.objectContaining({ type: 'duration', time_unit: 'seconds' }));
    expect(Object.keys(res.body.fields).sort()).toEqual(Object.keys(fields).sort());
  });

  it('reads a bare unique_by string as a one-element list', async () => {
    const id = uid('bare-unique');
    const res = await put(id, { fields: { ts: field('datetime', 'Time'), n: field('number', 'N') }, unique_by: 'ts' });
    expectOk(res, 201, ANY_BODY);
    expect(res.body.unique_by).toEqual(['ts']);
    expectOk(await put(id, { fields: { ts: field('datetime', 'Time'), n: field('number', 'N') }, unique_by: ['ts'] }), 200, ANY_BODY);
  });

  it('accepts unique_by with several string, date and datetime fields', async () => {
    const res = await put(uid('multi'), {
      fields: { day: field('date', 'Day'), at: field('datetime', 'At'), region: field('string', 'Region'), n: field('number', 'N') },
      unique_by: ['region', 'day', 'at'],
    });
    expectOk(res, 201, ANY_BODY);
    expect(res.body.unique_by).toEqual(['region', 'day', 'at']);
  });
});

describe('PUT /datasets/:id finds an existing dataset', () => {
  const fields = {
    day: field('date', 'Day'),
    region: field('string', 'Region'),
    amount: field('money', 'Amount', { currency_code: 'GBP' }),
    dur: field('duration', 'Duration', { time_unit: 'minutes' }),
    note: field('string', 'Note', { optional: true }),
  };
  let id: string;
  let created: any;
  beforeAll(async () => {
    id = uid('found');
    created = (await createDataset(s, acme, id, fields, ['day', 'region'])).body;
  });

  it('answers 200 with the stored definition for the same definition', async () => {
    const res = await put(id, { fields, unique_by: ['day', 'region'] });
    expectOk(res, 200, ANY_BODY);
    expect(res.body).toEqual(created);
  });

  it('ignores key order, optional absent vs false, and unique_by order', async () => {
    const reordered = {
      note: { optional: true, name: 'Note', type: 'string' },
      dur: { time_unit: 'minutes', type: 'duration', name: 'Duration', optional: false },
      amount: { currency_code: 'GBP', name: 'Amount', type: 'money', optional: false },
      region: { name: 'Region', type: 'string' },
      day: { optional: false, type: 'date', name: 'Day' },
    };
    const res = await put(id, { unique_by: ['region', 'day'], fields: reordered });
    expectOk(res, 200, ANY_BODY);
    expect(res.body).toEqual(created);
  });

  it('tolerates extra top-level keys that clients echo back', async () => {
    const res = await put(id, { id, fields, unique_by: ['day', 'region'], created_at: created.created_at, updated_at: '2001-01-01T00:00:00Z' });
    expectOk(res, 200, ANY_BODY);
    expect(res.body).toEqual(created);
  });

  const changes: [string, (f: any) => void, string | undefined][] = [
    ['a field of another type', (f) => (f.dur = field('number', 'Duration')), 'dur'],
    ['a unique_by field of another type', (f) => (f.region = field('datetime', 'Region')), 'region'],
    ['a field with another name', (f) => (f.region = field('string', 'Area')), 'region'],
    ['a field made optional', (f) => (f.region = field('string', 'Region', { optional: true })), 'region'],
    ['an optional field made required', (f) => (f.note = field('string', 'Note')), 'note'],
    ['another currency', (f) => (f.amount = field('money', 'Amount', { currency_code: 'USD' })), 'amount'],
    ['another time unit', (f) => (f.dur = field('duration', 'Duration', { time_unit: 'hours' })), 'dur'],
    ['an extra field', (f) => (f.extra = field('number', 'Extra')), 'extra'],
    ['a missing field', (f) => delete f.note, 'note'],
  ];
  it.each(changes)('answers 409 for %s, naming what differs', async (_name, change, named) => {
    const changed = structuredClone(fields) as Record<string, unknown>;
    change(changed);
    const res = await put(id, { fields: changed, unique_by: ['day', 'region'] });
    expectError(res, 409, new RegExp(`^${escape(conflictPrefix(id))}.+`));
    if (named !== undefined) expect(res.body.error.message.slice(conflictPrefix(id).length)).toContain(named);
  });

  it('answers 409 for another unique_by, and for none', async () => {
    const res = await put(id, { fields, unique_by: ['day'] });
    expectError(res, 409, new RegExp(`^${escape(conflictPrefix(id))}.+`));
    expect(res.body.error.message.slice(conflictPrefix(id).length)).toContain('unique_by');
    expectError(await put(id, { fields }), 409, new RegExp(`^${escape(conflictPrefix(id))}.+`));
  });

  it('still finds the dataset unchanged after the conflicts', async () => {
    const listed = await listing(s, 'acme', id);
    expect(listed).toEqual({ id, fields: created.fields, unique_by: ['day', 'region'], record_count: 0, created_at: created.created_at, updated_at: created.updated_at });
  });
});

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('invalid definitions are refused with 400 naming the rule', () => {
  const n = field('number', 'N');
  const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`f${i}`, field('number', `F${i}`)]));
  const cases: [string, unknown, RegExp][] = [
    ['a body that is not an object', [{ fields: { n } }], /.+/],
    ['a JSON string body', 'fields', /.+/],
    ['no fields', { unique_by: [] }, /fields/],
    ['fields that are not an object', { fields: [n] }, /fields/],
    ['no field at all', { fields: {} }, /fields|field/],
    ['11 fields', { fields: eleven }, /10/],
    ['an upper-case field key', { fields: { Amount: n } }, /Amount/],
    ['a field key starting with a digit', { fields: { '1st': n } }, /1st/],
    ['a field key with a hyphen', { fields: { 'a-b': n } }, /a-b/],
    ['a field key with a space', { fields: { 'a b': n } }, /a b/],
    ['a field key of 51 characters', { fields: { ['k'.repeat(51)]: n } }, /kkkk/],
    ['a field definition that is not an object', { fields: { n: 'number' } }, /"?n"?/],
    ['a field without a type', { fields: { amount: { name: 'Amount' } } }, /amount/],
    ['an unknown type', { fields: { amount: { type: 'integer', name: 'Amount' } } }, /amount|integer/],
    ['a field without a name', { fields: { amount: { type: 'number' } } }, /amount/],
    ['a field with an empty name', { fields: { amount: { type: 'number', name: '' } } }, /amount/],
    ['a field with a non-string name', { fields: { amount: { type: 'number', name: 5 } } }, /amount/],
    ['optional that is not a boolean', { fields: { amount: { type: 'number', name: 'A', optional: 'yes' } } }, /optional/],
    ['money without currency_code', { fields: { amount: { type: 'money', name: 'A' } } }, /currency_code/],
    ['a lower-case currency_code', { fields: { amount: { type: 'money', name: 'A', currency_code: 'usd' } } }, /currency_code/],
    ['a currency_code that does not exist', { fields: { amount: { type: 'money', name: 'A', currency_code: 'ABC' } } }, /currency_code/],
    ['a four-letter currency_code', { fields: { amount: { type: 'money', name: 'A', currency_code: 'USDD' } } }, /currency_code/],
    ['duration without time_unit', { fields: { d: { type: 'duration', name: 'D' } } }, /time_unit/],
    ['duration with an unknown time_unit', { fields: { d: { type: 'duration', name: 'D', time_unit: 'days' } } }, /time_unit/],
    ['unique_by naming an unknown field', { fields: { day: field('date', 'Day'), n }, unique_by: ['date'] }, /"?date"?[\s\S]*day[\s\S]*n|"?date"?[\s\S]*n[\s\S]*day/],
    ['unique_by naming a field twice', { fields: { day: field('date', 'Day'), n }, unique_by: ['day', 'day'] }, /day/],
    ['unique_by of several fields with a number', { fields: { day: field('date', 'Day'), n }, unique_by: ['day', 'n'] }, /string, date or datetime|"?n"?/],
    ['unique_by of several fields with money', { fields: { s: field('string', 'S'), m: field('money', 'M', { currency_code: 'USD' }) }, unique_by: ['s', 'm'] }, /m/],
    ['unique_by that is a number', { fields: { n }, unique_by: 5 }, /unique_by/],
    // An invalid currency_code or time_unit is refused on every type, not only the one that uses it.
    ['a number field with an invalid currency_code', { fields: { n: field('number', 'N', { currency_code: 'usd' }) } }, /"n" has an invalid currency_code "usd"/],
    ['a date field with an invalid time_unit', { fields: { d: field('date', 'D', { time_unit: 'AAA' }) } }, /"d" has an invalid time_unit "AAA"/],
    ['a money field with an invalid time_unit', { fields: { m: field('money', 'M', { currency_code: 'EUR', time_unit: 5 }) } }, /"m" has an invalid time_unit 5/],
    ['a duration field with an invalid currency_code', { fields: { d: field('duration', 'D', { time_unit: 'hours', currency_code: 'AAA' }) } }, /"d" has an invalid currency_code "AAA"/],
    ['unique_by holding a non-string', { fields: { n }, unique_by: [1] }, /unique_by/],
    ['a field name of 251 characters', { fields: { n: field('number', 'N'.repeat(251)) } }, /^Field "n" has a name longer than 250 characters: a field name is at most 250 characters \(Unicode code points\)$/],
    ['a field name of 251 emoji', { fields: { n: field('number', '😀'.repeat(251)) } }, /"n" has a name longer than 250 characters/],
    ['a field name holding a lone surrogate', { fields: { n: field('number', 'N\ud800') } }, /^Field "n": the name must be well-formed Unicode text, without a lone UTF-16 surrogate \(such as "\\ud800"\)$/],
  ];
  it.each(cases)('%s', async (_name, body, message) => {
    const id = uid('bad-def');
    expectError(await put(id, body), 400, message);
    expect(await listing(s, 'acme', id)).toBeUndefined();
  });

  it('takes a name of 250 characters, an emoji counting as one, and answers it unchanged', async () => {
    const names = { a: 'N'.repeat(250), b: '😀'.repeat(250) };
    const res = await put(uid('long-names'), { fields: { a: field('number', names.a), b: field('string', names.b) } });
    expectOk(res, 201, ANY_BODY);
    expect([res.body.fields.a.name, res.body.fields.b.name]).toEqual([names.a, names.b]);
  });

  it('refuses a 60 KB field name with 400 and the path of the name, and a 4 MB one with 413 (a definition is at most 64 KiB)', async () => {
    const id = uid('huge-name');
    const res = await put(id, { fields: { n: field('number', 'N'.repeat(60_000)) } });
    expectError(res, 400, /"n" has a name longer than 250 characters/);
    expect(res.body.error.path).toBe('fields.n.name');
    expectError(await put(id, { fields: { n: field('number', 'N'.repeat(4_000_000)) } }), 413, 'The request body is larger than the limit of 64 KiB');
    expect(await listing(s, 'acme', id)).toBeUndefined();
  });

  // The distributed gateway re-serialised the parsed body to forward it over gRPC, and JSON.stringify
  // overflowed the stack: a 500 there, while the embedded server took an ignored deep key (201).
  it('refuses a definition nested too deep with 400 wherever the nesting is, and a million levels with 413', async () => {
    expectError(await s.request('PUT', `/datasets/${uid('deep')}`, { key: acme, raw: `{"fields":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}` }), 413, /64 KiB/);
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    const id = uid('deep');
    for (const raw of [`{"fields":${deep}}`, `{"fields":{"n":{"type":"number","name":"N","x":${deep}}}}`, `{"fields":{"n":{"type":"number","name":"N"}},"id":${deep}}`]) {
      expectError(await s.request('PUT', `/datasets/${id}`, { key: acme, raw }), 400, 'The request body nests arrays and objects more than 32 levels deep; a valid body needs at most 3');
    }
    expect(await listing(s, 'acme', id)).toBeUndefined();
  });

  it('names the unknown unique_by key and lists the defined keys', async () => {
    const res = await put(uid('bad-unique'), { fields: { day: field('date', 'Day'), amount: field('number', 'Amount') }, unique_by: ['dya'] });
    expectError(res, 400, /dya/);
    expect(res.body.error.message).toContain('day');
    expect(res.body.error.message).toContain('amount');
  });

  it('tolerates a valid or null currency_code / time_unit on a type that does not use it, and does not store it', async () => {
    const fields = {
      n: field('number', 'N', { currency_code: 'USD', time_unit: null }),
      d: field('date', 'D', { time_unit: 'hours', currency_code: null }),
      m: field('money', 'M', { currency_code: 'EUR', time_unit: 'seconds' }),
    };
    const res = await put(uid('tolerated'), { fields });
    expectOk(res, 201, ANY_BODY);
    expect(res.body.fields).toEqual({
      n: { type: 'number', name: 'N', optional: false },
      d: { type: 'date', name: 'D', optional: false },
      m: { type: 'money', name: 'M', optional: false, currency_code: 'EUR' },
    });
  });

  it('allows a unique_by of one number field, and an empty unique_by', async () => {
    expectOk(await put(uid('num-unique'), { fields: { n: field('number', 'N') }, unique_by: ['n'] }), 201, ANY_BODY);
    const res = await put(uid('empty-unique'), { fields: { n: field('number', 'N') }, unique_by: [] });
    expectOk(res, 201, ANY_BODY);
    expect([undefined, []]).toContainEqual(res.body.unique_by);
  });
});

describe('dataset ids', () => {
  const body = { fields: { n: field('number', 'N') } };
  const badIds: [string, string][] = [
    ['upper case', 'Sales'],
    ['a leading dot', '.sales'],
    ['a trailing hyphen', 'sales-'],
    ['a leading underscore', '_sales'],
    ['101 characters', 'a'.repeat(101)],
    ['a space (encoded)', 'sales%20by%20day'],
    ['an encoded slash', 'sales%2Fday'],
    ['a colon', 'sales:day'],
    ['an encoded upper-case letter', 'sale%53'],
    ['a non-ASCII letter', 'caf%C3%A9'],
  ];
  it.each(badIds)('refuses %s with 400 on every endpoint', async (_name, id) => {
    expectError(await put(id, body), 400, /id/i);
    expectError(await s.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [] } }), 400, /id/i);
    expectError(await s.request('PUT', `/datasets/${id}/data`, { key: acme, body: { data: [] } }), 400, /id/i);
    expectError(await s.request('DELETE', `/datasets/${id}`, { key: acme }), 400, /id/i);
  });

  it('accepts ids of 1 and 100 characters of a-z 0-9 . _ -', async () => {
    const long = `z${uid('x').replace(/-/g, '_')}`.padEnd(100, '9');
    expect(long).toHaveLength(100);
    for (const id of ['q', long, `a.b_c-d.${uid('9')}`]) {
      const res = await put(id, body);
      expectOk(res, 201, ANY_BODY);
      expect(res.body.id).toBe(id);
    }
  });

  it('percent-decodes the id before validating it', async () => {
    const id = uid('sales.by.day');
    const encoded = id.replace(/\./g, '%2E').replace(/-/g, '%2D');
    const res = await put(encoded, body);
    expectOk(res, 201, ANY_BODY);
    expect(res.body.id).toBe(id);
    expectOk(await put(id, body), 200, ANY_BODY);
    expectOk(await s.request('POST', `/datasets/${encoded}/data`, { key: acme, body: { data: [{ n: 1 }] } }));
    expectOk(await s.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [{ n: 2 }] } }));
    expect(await s.records('acme', id)).toEqual([{ n: 1 }, { n: 2 }]);
    expectOk(await s.request('DELETE', `/datasets/${encoded}`, { key: acme }));
    expect(await listing(s, 'acme', id)).toBeUndefined();
  });
});

describe('concurrent creation of one id', () => {
  it('creates it once: the same definition is found, another one conflicts', async () => {
    const id = uid('race');
    const a = { fields: { n: field('number', 'N') } };
    const b = { fields: { label: field('string', 'Label') } };
    const results = await Promise.all([put(id, a), put(id, b), put(id, a), put(id, b), put(id, a)]);
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    const winner = created[0]!.body.fields.n === undefined ? b : a;
    results.forEach((r, i) => {
      const body = [a, b, a, b, a][i];
      if (r.status === 201) return;
      if (body === winner) expectOk(r, 200, ANY_BODY);
      else expectError(r, 409, new RegExp(`^${escape(conflictPrefix(id))}`));
    });
  });
});

describe('DELETE /datasets/:id', () => {
  it('answers 200 {}, and 404 for the dataset afterwards', async () => {
    const id = uid('gone');
    await createDataset(s, acme, id, { n: field('number', 'N') });
    await appendAll(s, acme, id, [{ n: 1 }]);
    expectOk(await s.request('DELETE', `/datasets/${id}`, { key: acme }), 200, {});
    expect(await listing(s, 'acme', id)).toBeUndefined();
    expectError(await s.request('DELETE', `/datasets/${id}`, { key: acme }), 404, NOT_FOUND);
    expectError(await s.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [{ n: 2 }] } }), 404, NOT_FOUND);
    expectError(await s.request('PUT', `/datasets/${id}/data`, { key: acme, body: { data: [{ n: 2 }] } }), 404, NOT_FOUND);
  });

  it('answers 404 for a dataset that never existed', async () => {
    const id = uid('never');
    expectError(await s.request('DELETE', `/datasets/${id}`, { key: acme }), 404, NOT_FOUND);
    expectError(await s.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [] } }), 404, NOT_FOUND);
    expectError(await s.request('PUT', `/datasets/${id}/data`, { key: acme, body: { data: [] } }), 404, NOT_FOUND);
  });

  it('frees the id: it may be re-created with another schema and the old data never reappears', async () => {
    const id = uid('reborn');
    await createDataset(s, acme, id, { day: field('date', 'Day'), n: field('number', 'N') }, ['day']);
    await appendAll(s, acme, id, [
      { day: '2024-01-01', n: 1 },
      { day: '2024-01-02', n: 2 },
    ]);
    expectOk(await s.request('DELETE', `/datasets/${id}`, { key: acme }));

    const res = await put(id, { fields: { label: field('string', 'Label'), n: field('number', 'N', { optional: true }) } });
    expectOk(res, 201, ANY_BODY);
    expect(res.body.unique_by).toBeUndefined();
    expect(await s.records('acme', id)).toEqual([]);
    expect((await listing(s, 'acme', id)).record_count).toBe(0);

    // The old schema is gone: its records no longer fit, the new ones do.
    expectError(await s.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [{ day: '2024-01-03', n: 3 }] } }), 400, /day/);
    await appendAll(s, acme, id, [{ label: 'a', n: 3 }, { label: 'b' }]);
    expect(await s.records('acme', id)).toEqual([
      { label: 'a', n: 3 },
      { label: 'b', n: null },
    ]);

    // Delete and re-create with the first schema: still nothing of the first incarnation.
    expectOk(await s.request('DELETE', `/datasets/${id}`, { key: acme }));
    expectOk(await put(id, { fields: { day: field('date', 'Day'), n: field('number', 'N') }, unique_by: ['day'] }), 201, ANY_BODY);
    expect(await s.records('acme', id)).toEqual([]);
  });
});

describe('100 datasets per account', () => {
  it('refuses the 101st with 400 naming the limit and deleting; finding one still works; deleting makes room', async () => {
    const keys = { lim: 'key-limit-account-0123456789', free: 'key-free-account-0123456789' };
    const t = await new TestServer({ env: UNLIMITED, keys }).start();
    try {
      const body = (i: number) => ({ fields: { n: field('number', `N${i}`) } });
      for (let i = 0; i < 98; i++) expectOk(await t.request('PUT', `/datasets/ds-${i}`, { key: keys.lim, body: body(i) }), 201, ANY_BODY);
      // Five creations racing for the last two places: exactly two win.
      const racing = await Promise.all([98, 99, 100, 101, 102].map((i) => t.request('PUT', `/datasets/ds-${i}`, { key: keys.lim, body: body(i) })));
      expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 400, 400, 400]);
      for (const r of racing.filter((x) => x.status === 400)) expectError(r, 400, /\b100\b/);

      const refused = await t.request('PUT', '/datasets/ds-200', { key: keys.lim, body: body(200) });
      expectError(refused, 400, /\b100\b/);
      expect(refused.body.error.message).toMatch(/delet/i);
      const listed = await t.admin('/admin/accounts/lim/datasets');
      expect(listed.body.datasets).toHaveLength(100);
      expect(listed.body.datasets.map((d: any) => d.id)).not.toContain('ds-200');

      // At the limit an existing dataset is still found, and a conflicting definition is still a 409.
      expectOk(await t.request('PUT', '/datasets/ds-42', { key: keys.lim, body: body(42) }), 200, ANY_BODY);
      expectError(await t.request('PUT', '/datasets/ds-42', { key: keys.lim, body: body(43) }), 409, /^A dataset with different fields already exists with the ID "ds-42"/);
      // Writes to existing datasets are unaffected.
      expectOk(await t.request('POST', '/datasets/ds-42/data', { key: keys.lim, body: { data: [{ n: 1 }] } }));
      // The limit is per account: another account still creates.
      expectOk(await t.request('PUT', '/datasets/ds-200', { key: keys.free, body: body(200) }), 201, ANY_BODY);

      expectOk(await t.request('DELETE', '/datasets/ds-7', { key: keys.lim }));
      expectOk(await t.request('PUT', '/datasets/ds-200', { key: keys.lim, body: body(200) }), 201, ANY_BODY);
      expectError(await t.request('PUT', '/datasets/ds-201', { key: keys.lim, body: body(201) }), 400, /\b100\b/);
    } finally {
      await t.stop();
    }
  });
});

describe('accounts are isolated', () => {
  it('lets two accounts own the same id independently', async () => {
    const id = uid('shared.id');
    const a = await put(id, { fields: { n: field('number', 'N') } }, acme);
    const g = await put(id, { fields: { label: field('string', 'Label') }, unique_by: ['label'] }, globex);
    expectOk(a, 201, ANY_BODY);
    expectOk(g, 201, ANY_BODY);

    await appendAll(s, acme, id, [{ n: 1 }, { n: 2 }]);
    await appendAll(s, globex, id, [{ label: 'x' }]);
    expect(await s.records('acme', id)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await s.records('globex', id)).toEqual([{ label: 'x' }]);

    // Each account finds its own definition, not the other's.
    expectOk(await put(id, { fields: { n: field('number', 'N') } }, acme), 200, ANY_BODY);
    expectError(await put(id, { fields: { n: field('number', 'N') } }, globex), 409, /^A dataset with different fields already exists/);

    // A replace or delete in one account leaves the other's alone.
    expectOk(await s.request('PUT', `/datasets/${id}/data`, { key: globex, body: { data: [] } }));
    expect(await s.records('acme', id)).toEqual([{ n: 1 }, { n: 2 }]);
    expectOk(await s.request('DELETE', `/datasets/${id}`, { key: acme }));
    expect(await listing(s, 'acme', id)).toBeUndefined();
    expect(await listing(s, 'globex', id)).toEqual(expect.objectContaining({ id, record_count: 0, unique_by: ['label'] }));
  });

  it('does not let one account see or touch the datasets of another', async () => {
    const id = uid('private');
    await createDataset(s, acme, id, { n: field('number', 'N') });
    await appendAll(s, acme, id, [{ n: 7 }]);

    expectError(await s.request('POST', `/datasets/${id}/data`, { key: globex, body: { data: [{ n: 8 }] } }), 404, NOT_FOUND);
    expectError(await s.request('PUT', `/datasets/${id}/data`, { key: globex, body: { data: [] } }), 404, NOT_FOUND);
    expectError(await s.request('DELETE', `/datasets/${id}`, { key: globex }), 404, NOT_FOUND);
    expect(await listing(s, 'globex', id)).toBeUndefined();
    expect(await s.records('acme', id)).toEqual([{ n: 7 }]);

    // globex creating the same id makes its own, empty dataset.
    expectOk(await put(id, { fields: { n: field('number', 'N') } }, globex), 201, ANY_BODY);
    expect(await s.records('globex', id)).toEqual([]);
    expect(await s.records('acme', id)).toEqual([{ n: 7 }]);
  });
});

describe('admin read side', () => {
  it('refuses requests without or with a wrong bearer token with 401', async () => {
    const none = await s.admin('/admin/accounts/acme/datasets', '');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: expect.objectContaining({ message: expect.any(String) }) });
    const wrong = await s.admin('/admin/accounts/acme/datasets', `${s.adminToken}x`);
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: expect.objectContaining({ message: expect.any(String) }) });
    const records = await s.admin('/admin/accounts/acme/datasets/x/records', 'not-the-token');
    expect(records.status).toBe(401);
  });

  it('lists the datasets of an account with their record counts', async () => {
    const id = uid('listed');
    await createDataset(s, acme, id, { label: field('string', 'Label') }, ['label']);
    await appendAll(s, acme, id, [{ label: 'a' }, { label: 'b' }, { label: 'a' }]);
    const res = await s.admin('/admin/accounts/acme/datasets');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ datasets: expect.any(Array) });
    expect(res.body.datasets.find((d: any) => d.id === id)).toEqual({
      id,
      fields: { label: expect.objectContaining({ type: 'string', name: 'Label' }) },
      unique_by: ['label'],
      record_count: 2,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    const empty = await s.admin('/admin/accounts/nobody-here/datasets');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ datasets: [] });
  });

  it('answers 404 for the records of a missing dataset', async () => {
    const res = await s.admin(`/admin/accounts/acme/datasets/${uid('missing')}/records`);
    expect(res.status).toBe(404);
  });
});

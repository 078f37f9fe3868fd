import { EVENT_SCHEMA_VERSION } from '@pushbase/domain';
import { encodeSchemaIntent, schemaIntentKey, type SchemaChangeEvent } from '@pushbase/redis';
import { connectTestRedis } from '../helpers/redis';
import { TestServer } from '../helpers/server';
import { ANY_BODY, appendAll, createDataset, day, expectError, expectOk, field, uid, UNLIMITED } from './support';

/*
 * Append, replace and clear; unique_by merges; record validation of every type; delete_by validation
 * (docs/api.md → Routes, Fields and values).
 */

let s: TestServer;
let key: string;
beforeAll(async () => {
  s = await new TestServer({ env: UNLIMITED }).start();
  key = s.keys.acme!;
});
afterAll(async () => {
  await s.stop();
});

const append = (id: string, body: unknown) => s.request('POST', `/datasets/${id}/data`, { key, body });
const replace = (id: string, body: unknown) => s.request('PUT', `/datasets/${id}/data`, { key, body });
const records = (id: string) => s.records('acme', id);
const byDay = (rows: any[]): any[] => [...rows].sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : 0));

describe('append without unique_by', () => {
  it('answers 200 {} and adds every record to the existing contents, oldest first', async () => {
    const id = uid('plain');
    await createDataset(s, key, id, { label: field('string', 'Label'), n: field('number', 'N') });
    expectOk(await append(id, { data: [{ label: 'a', n: 1 }, { label: 'b', n: 2 }] }), 200, {});
    expectOk(await append(id, { data: [{ label: 'a', n: 1 }] }), 200, {});
    expect(await records(id)).toEqual([
      { label: 'a', n: 1 },
      { label: 'b', n: 2 },
      { label: 'a', n: 1 },
    ]);
  });

  it('treats unique_by: [] as no unique key', async () => {
    const id = uid('empty-unique');
    const res = await s.request('PUT', `/datasets/${id}`, { key, body: { fields: { label: field('string', 'Label') }, unique_by: [] } });
    expectOk(res, 201, ANY_BODY);
    expectOk(await s.request('PUT', `/datasets/${id}`, { key, body: { fields: { label: field('string', 'Label') } } }), 200, ANY_BODY);
    await appendAll(s, key, id, [{ label: 'a' }, { label: 'a' }]);
    await appendAll(s, key, id, [{ label: 'a' }]);
    expect(await records(id)).toEqual([{ label: 'a' }, { label: 'a' }, { label: 'a' }]);
  });

  it('treats an empty data array as a no-op', async () => {
    const id = uid('noop');
    await createDataset(s, key, id, { n: field('number', 'N') });
    await appendAll(s, key, id, [{ n: 1 }]);
    expectOk(await append(id, { data: [] }), 200, {});
    expect(await records(id)).toEqual([{ n: 1 }]);
  });

  it('accepts exactly 500 records and refuses 501 with 400 naming 500, storing nothing', async () => {
    const id = uid('per-request');
    await createDataset(s, key, id, { n: field('number', 'N') });
    const many = (count: number) => Array.from({ length: count }, (_, n) => ({ n }));
    const refused = await append(id, { data: many(501) });
    expectError(refused, 400, /\b500\b/);
    expect(await records(id)).toEqual([]);
    expectOk(await append(id, { data: many(500) }));
    expect(await records(id)).toEqual(many(500));
    expectError(await replace(id, { data: many(501) }), 400, /\b500\b/);
    expect(await records(id)).toEqual(many(500));
  });

  it('refuses a body without an array of records', async () => {
    const id = uid('shape');
    await createDataset(s, key, id, { n: field('number', 'N') });
    expectError(await append(id, {}), 400, /data/);
    expectError(await append(id, { data: { n: 1 } }), 400, /data/);
    expectError(await append(id, { data: null }), 400, /data/);
    expectError(await append(id, { data: 'n' }), 400, /data/);
    expectError(await append(id, [{ n: 1 }]), 400, /.+/);
    expectError(await append(id, null), 400, /.+/);
    expectError(await s.request('POST', `/datasets/${id}/data`, { key, raw: '' }), 400, /.+/);
    expectError(await s.request('PUT', `/datasets/${uid('empty-body')}`, { key, raw: '' }), 400, /.+/);
    expectError(await replace(id, {}), 400, /data/);
    expectError(await replace(id, { data: { n: 1 } }), 400, /data/);
    expect(await records(id)).toEqual([]);
  });
});

describe('append with unique_by', () => {
  it('merges a conflicting record into the stored one, which becomes the newest (d1→1, d2→2; d1→10)', async () => {
    const id = uid('merge');
    await createDataset(s, key, id, { day: field('date', 'Day'), n: field('number', 'N') }, ['day']);
    await appendAll(s, key, id, [
      { day: '2024-01-01', n: 1 },
      { day: '2024-01-02', n: 2 },
    ]);
    expectOk(await append(id, { data: [{ day: '2024-01-01', n: 10 }] }));
    expect(await records(id)).toEqual([
      { day: '2024-01-02', n: 2 },
      { day: '2024-01-01', n: 10 },
    ]);
  });

  it('keeps the later of duplicates within one request: four records with one duplicate pair leave three', async () => {
    const id = uid('dupes');
    await createDataset(s, key, id, { day: field('date', 'Day'), n: field('number', 'N') }, ['day']);
    expectOk(
      await append(id, {
        data: [
          { day: '2024-01-01', n: 1 },
          { day: '2024-01-02', n: 2 },
          { day: '2024-01-01', n: 3 },
          { day: '2024-01-03', n: 4 },
        ],
      }),
    );
    const rows = await records(id);
    expect(rows).toHaveLength(3);
    // Oldest first, as docs/api.md → Append records says: the later d1 wins in the first d1's place.
    expect(rows).toEqual([
      { day: '2024-01-01', n: 3 },
      { day: '2024-01-02', n: 2 },
      { day: '2024-01-03', n: 4 },
    ]);
  });

  it('replaces the stored record whole: omitted optional fields become null', async () => {
    const id = uid('whole');
    await createDataset(
      s,
      key,
      id,
      { label: field('string', 'Label'), n: field('number', 'N', { optional: true }), note: field('string', 'Note', { optional: true }) },
      ['label'],
    );
    await appendAll(s, key, id, [{ label: 'a', n: 1, note: 'first' }]);
    await appendAll(s, key, id, [{ label: 'a', n: 2 }]);
    expect(await records(id)).toEqual([{ label: 'a', n: 2, note: null }]);
  });

  it('merges on the combination of several unique_by fields', async () => {
    const id = uid('multi');
    await createDataset(
      s,
      key,
      id,
      { region: field('string', 'Region'), day: field('date', 'Day'), at: field('datetime', 'At'), n: field('number', 'N') },
      ['region', 'day', 'at'],
    );
    await appendAll(s, key, id, [
      { region: 'eu', day: '2024-01-01', at: '2024-01-01T10:00:00Z', n: 1 },
      { region: 'us', day: '2024-01-01', at: '2024-01-01T10:00:00Z', n: 2 },
      { region: 'eu', day: '2024-01-02', at: '2024-01-01T10:00:00Z', n: 3 },
      { region: 'eu', day: '2024-01-01', at: '2024-01-01T10:00:00.001Z', n: 4 },
    ]);
    expect(await records(id)).toHaveLength(4);
    // Same three values (the instant written another way) → merged; differing in one → a new record.
    await appendAll(s, key, id, [
      { region: 'eu', day: '2024-01-01', at: '2024-01-01T11:00:00+01:00', n: 10 },
      { region: 'EU', day: '2024-01-01', at: '2024-01-01T10:00:00Z', n: 5 },
    ]);
    expect(await records(id)).toEqual([
      { region: 'us', day: '2024-01-01', at: '2024-01-01T10:00:00.000Z', n: 2 },
      { region: 'eu', day: '2024-01-02', at: '2024-01-01T10:00:00.000Z', n: 3 },
      { region: 'eu', day: '2024-01-01', at: '2024-01-01T10:00:00.001Z', n: 4 },
      { region: 'eu', day: '2024-01-01', at: '2024-01-01T10:00:00.000Z', n: 10 },
      { region: 'EU', day: '2024-01-01', at: '2024-01-01T10:00:00.000Z', n: 5 },
    ]);
  });

  it('merges on a unique number field', async () => {
    const id = uid('num-key');
    await createDataset(s, key, id, { n: field('number', 'N'), label: field('string', 'Label') }, ['n']);
    await appendAll(s, key, id, [
      { n: 1, label: 'a' },
      { n: 2, label: 'b' },
    ]);
    await appendAll(s, key, id, [{ n: 1, label: 'c' }]);
    expect(await records(id)).toEqual([
      { n: 2, label: 'b' },
      { n: 1, label: 'c' },
    ]);
  });
});

describe('replace', () => {
  it('leaves exactly the supplied records: 7 with one duplicate pair → 6, the later duplicate kept', async () => {
    const id = uid('replace');
    await createDataset(s, key, id, { day: field('date', 'Day'), n: field('number', 'N') }, ['day']);
    await appendAll(s, key, id, [
      { day: '2023-12-01', n: 100 },
      { day: '2024-01-01', n: 101 },
    ]);
    const data = [
      { day: '2024-01-01', n: 1 },
      { day: '2024-01-02', n: 2 },
      { day: '2024-01-03', n: 3 },
      { day: '2024-01-04', n: 4 },
      { day: '2024-01-02', n: 5 },
      { day: '2024-01-05', n: 6 },
      { day: '2024-01-06', n: 7 },
    ];
    expectOk(await replace(id, { data }), 200, {});
    const rows = await records(id);
    expect(rows).toHaveLength(6);
    expect(byDay(rows)).toEqual([
      { day: '2024-01-01', n: 1 },
      { day: '2024-01-02', n: 5 },
      { day: '2024-01-03', n: 3 },
      { day: '2024-01-04', n: 4 },
      { day: '2024-01-05', n: 6 },
      { day: '2024-01-06', n: 7 },
    ]);
  });

  it('replaces the contents of a dataset without unique_by, keeping duplicates', async () => {
    const id = uid('replace-plain');
    await createDataset(s, key, id, { n: field('number', 'N') });
    await appendAll(s, key, id, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    expectOk(await replace(id, { data: [{ n: 9 }, { n: 9 }] }));
    expect(await records(id)).toEqual([{ n: 9 }, { n: 9 }]);
    await appendAll(s, key, id, [{ n: 10 }]);
    expect(await records(id)).toEqual([{ n: 9 }, { n: 9 }, { n: 10 }]);
  });

  it('clears the dataset with data: [] and keeps the schema', async () => {
    const id = uid('clear');
    const fields = { day: field('date', 'Day'), n: field('number', 'N') };
    await createDataset(s, key, id, fields, ['day']);
    await appendAll(s, key, id, [
      { day: '2024-01-01', n: 1 },
      { day: '2024-01-02', n: 2 },
    ]);
    expectOk(await replace(id, { data: [] }), 200, {});
    expect(await records(id)).toEqual([]);
    const found = await s.request('PUT', `/datasets/${id}`, { key, body: { fields, unique_by: ['day'] } });
    expect(found.status).toBe(200);
    // The schema (and its unique_by) still applies.
    await appendAll(s, key, id, [
      { day: '2024-01-01', n: 3 },
      { day: '2024-01-01', n: 4 },
    ]);
    expect(await records(id)).toEqual([{ day: '2024-01-01', n: 4 }]);
    expectError(await append(id, { data: [{ day: '2024-01-01' }] }), 400, /n/);
  });

  it('stores nothing and keeps the old records when a record is invalid', async () => {
    const id = uid('replace-bad');
    await createDataset(s, key, id, { n: field('number', 'N') });
    await appendAll(s, key, id, [{ n: 1 }, { n: 2 }]);
    const res = await replace(id, { data: [{ n: 3 }, { n: 'four' }] });
    expectError(res, 400, /\b1\b/);
    expect(res.body.error.message).toContain('n');
    expect(await records(id)).toEqual([{ n: 1 }, { n: 2 }]);
  });
});

describe('record validation (400 naming the record index and field; nothing stored)', () => {
  const fields = {
    num: field('number', 'Number', { optional: true }),
    pct: field('percentage', 'Percentage', { optional: true }),
    cash: field('money', 'Money', { currency_code: 'USD', optional: true }),
    str: field('string', 'String', { optional: true }),
    day: field('date', 'Date', { optional: true }),
    at: field('datetime', 'Datetime', { optional: true }),
    dur: field('duration', 'Duration', { time_unit: 'milliseconds', optional: true }),
    req: field('number', 'Required'),
  };
  // A dataset per test, so that one wrongly stored record cannot fail the tests after it.
  let id: string;
  beforeEach(async () => {
    id = uid('types');
    await createDataset(s, key, id, fields);
  });

  // Each bad record is sent third, after two good ones, so the message must name index 2.
  const bad: [string, Record<string, unknown>, string][] = [
    ['a string in a number field', { num: '5' }, 'num'],
    ['a boolean in a number field', { num: true }, 'num'],
    ['an object in a number field', { num: { v: 1 } }, 'num'],
    ['a string in a percentage field', { pct: '50%' }, 'pct'],
    ['a fraction in a money field', { cash: 795.5 }, 'cash'],
    ['a string in a money field', { cash: '1000' }, 'cash'],
    ['money beyond 2^53', { cash: 2 ** 53 + 2 }, 'cash'],
    ['money below -2^53', { cash: -(2 ** 53) - 2 }, 'cash'],
    ['a string of 101 characters', { str: 'x'.repeat(101) }, 'str'],
    ['101 code points', { str: '😀'.repeat(101) }, 'str'],
    ['a number in a string field', { str: 5 }, 'str'],
    ['a date that does not exist', { day: '2024-02-30' }, 'day'],
    ['29 February of a common year', { day: '2023-02-29' }, 'day'],
    ['month 13', { day: '2024-13-01' }, 'day'],
    ['a date without zero padding', { day: '2024-1-5' }, 'day'],
    ['a date-time in a date field', { day: '2024-01-05T00:00:00Z' }, 'day'],
    ['a number in a date field', { day: 20240105 }, 'day'],
    ['a number in a datetime field', { at: 1704067200000 }, 'at'],
    ['text in a datetime field', { at: 'yesterday' }, 'at'],
    ['a datetime with month 13', { at: '2024-13-01T00:00:00Z' }, 'at'],
    ['a datetime at hour 25', { at: '2024-01-01T25:00:00Z' }, 'at'],
    ['a string in a duration field', { dur: '10s' }, 'dur'],
    ['null in a required field', { req: null }, 'req'],
    ['a missing required field', { req: undefined }, 'req'],
    ['an unknown field', { other: 1 }, 'other'],
    ['an upper-case variant of a field', { NUM: 1 }, 'NUM'],
  ];
  it.each(bad)('refuses %s', async (_name, change, named) => {
    const record: Record<string, unknown> = { req: 1, ...change };
    if (change.req === undefined && 'req' in change) delete record.req;
    const res = await append(id, { data: [{ req: 1 }, { req: 2, num: 1 }, record, { req: 4 }] });
    expectError(res, 400, /\b2\b/);
    expect(res.body.error.message).toContain(named);
    expect(await records(id)).toEqual([]);
    // Replace validates the same way and keeps nothing either.
    expectError(await replace(id, { data: [{ req: 1 }, { req: 2 }, record] }), 400, /\b2\b/);
    expect(await records(id)).toEqual([]);
  });

  it('refuses a record that is not an object, naming its index', async () => {
    for (const notRecord of [[1], 'req', 7, null]) {
      expectError(await append(id, { data: [{ req: 1 }, notRecord] }), 400, /\b1\b/);
    }
    expect(await records(id)).toEqual([]);
  });

  it('names the first failing record', async () => {
    const res = await append(id, { data: [{ req: 0 }, { req: 1, num: 'x' }, { req: 2 }, { req: 3, str: 9 }] });
    expectError(res, 400, /\b1\b/);
    expect(res.body.error.message).toContain('num');
    expect(res.body.error.message).not.toMatch(/\b3\b/);
  });

  it('accepts and normalises valid values of every type', async () => {
    const ok = id;
    const data = [
      { num: -1.5, pct: 1.5, cash: 1000, str: '', day: '2024-02-29', at: '2024-01-31T12:00:00Z', dur: 1500, req: 0 },
      { num: 0, pct: 0, cash: -(2 ** 53), str: 'x'.repeat(100), day: '2000-01-01', at: '2024-01-31T12:00:00+01:00', dur: 0.5, req: 1e20 },
      { num: null, pct: null, cash: 2 ** 53, str: '😀'.repeat(100), day: null, at: '2024-01-31T12:00:00.123456Z', dur: null, req: 2 },
      { at: '2024-01-31T12:00:00', req: 3 },
      { at: '2024-01-31T23:30:00-02:30', req: 4 },
    ];
    expectOk(await append(ok, { data }));
    // money "795.0" is an integer in JSON terms.
    expectOk(await s.request('POST', `/datasets/${ok}/data`, { key, raw: '{"data":[{"cash":795.0,"req":5}]}' }));
    const nulls = { num: null, pct: null, cash: null, str: null, day: null, at: null, dur: null };
    expect(await records(ok)).toEqual([
      { num: -1.5, pct: 1.5, cash: 1000, str: '', day: '2024-02-29', at: '2024-01-31T12:00:00.000Z', dur: 1500, req: 0 },
      { num: 0, pct: 0, cash: -(2 ** 53), str: 'x'.repeat(100), day: '2000-01-01', at: '2024-01-31T11:00:00.000Z', dur: 0.5, req: 1e20 },
      { ...nulls, cash: 2 ** 53, str: '😀'.repeat(100), at: '2024-01-31T12:00:00.123Z', req: 2 },
      { ...nulls, at: '2024-01-31T12:00:00.000Z', req: 3 },
      { ...nulls, at: '2024-02-01T02:00:00.000Z', req: 4 },
      { ...nulls, cash: 795, req: 5 },
    ]);
  });
});

describe('delete_by', () => {
  let id: string;
  beforeAll(async () => {
    id = uid('delete-by');
    await createDataset(s, key, id, {
      day: field('date', 'Day'),
      at: field('datetime', 'At'),
      label: field('string', 'Label'),
      n: field('number', 'N'),
    });
  });
  const rec = { day: day(0), at: '2024-01-01T00:00:00Z', label: 'a', n: 1 };

  it('accepts a date or datetime field, as delete_by, deleteBy or a one-element array', async () => {
    for (const extra of [{ delete_by: 'day' }, { delete_by: 'at' }, { deleteBy: 'day' }, { deleteBy: 'at' }, { delete_by: ['day'] }, { deleteBy: ['at'] }]) {
      expectOk(await append(id, { data: [rec], ...extra }));
    }
    expect(await records(id)).toHaveLength(6);
  });

  const badDeleteBy: [string, unknown, RegExp][] = [
    ['an unknown field', 'dya', /delete_?by|dya/i],
    ['a string field', 'label', /delete_?by|label/i],
    ['a number field', 'n', /delete_?by|\bn\b/i],
    ['a number', 5, /delete_?by/i],
    ['an object', { field: 'day' }, /delete_?by/i],
    ['a two-element array', ['day', 'at'], /delete_?by/i],
  ];
  it.each(badDeleteBy)('refuses %s with 400 and stores nothing', async (_name, value, message) => {
    const before = (await records(id)).length;
    expectError(await append(id, { data: [rec], delete_by: value }), 400, message);
    expectError(await append(id, { data: [rec], deleteBy: value }), 400, message);
    expect(await records(id)).toHaveLength(before);
  });

  // The review's finding: a malformed deleteBy beside a valid delete_by was dropped silently.
  it.each(badDeleteBy)('refuses %s as deleteBy beside a valid delete_by, with the path deleteBy', async (_name, value) => {
    const before = (await records(id)).length;
    for (const delete_by of ['day', ['at'], '']) {
      const res = await append(id, { data: [rec], delete_by, deleteBy: value });
      expectError(res, 400, /deleteBy/);
      expect(res.body.error.path).toBe('deleteBy');
    }
    expect(await records(id)).toHaveLength(before);
  });

  it('refuses delete_by and deleteBy naming different fields, takes them naming the same one', async () => {
    const before = (await records(id)).length;
    expectError(await append(id, { data: [rec], delete_by: 'day', deleteBy: 'at' }), 400, '"delete_by" and "deleteBy" name different fields ("day" and "at"); send one of them');
    expectOk(await append(id, { data: [rec], delete_by: 'day', deleteBy: ['day'] }));
    expect(await records(id)).toHaveLength(before + 1);
  });

  it('answers 404 rather than 400 when the dataset does not exist', async () => {
    expectError(await append(uid('no-such'), { data: [rec], delete_by: 'day' }), 404, 'Dataset not found');
  });
});

describe('malformed input: the same 400 in both modes, whatever the state of the dataset', () => {
  const NOT_WELL_FORMED = 'must be well-formed Unicode text, without a lone UTF-16 surrogate (such as "\\ud800")';
  const deep = (levels: number): string => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  // ClickHouse keeps text as UTF-8, where "\ud800" and "\ud801" both became U+FFFD: two unique keys, one row.
  it('refuses a string value holding a lone surrogate, naming the record and field', async () => {
    const id = uid('surrogate');
    await createDataset(s, key, id, { s: field('string', 'S') }, ['s']);
    for (const [i, lone] of ['\ud800', '\ud801', 'a\udc00'].entries()) {
      const res = await append(id, { data: [{ s: '😀' }, { s: lone }] });
      expectError(res, 400, `Record 1 (data[1]): the field "s" ${NOT_WELL_FORMED}; got ${JSON.stringify(lone)}`);
      expect([i, res.body.error.path]).toEqual([i, 'data[1].s']);
      expectError(await replace(id, { data: [{ s: lone }] }), 400, /well-formed Unicode/);
    }
    expectOk(await append(id, { data: [{ s: '😀' }, { s: '\ud83d\ude01' }] }));
    expect(await records(id)).toEqual([{ s: '😀' }, { s: '😁' }]);
  });

  it('names an unknown key holding a lone surrogate as well-formed text (gRPC carries the message as UTF-8)', async () => {
    const id = uid('surrogate-key');
    await createDataset(s, key, id, { s: field('string', 'S') });
    const res = await append(id, { data: [{ s: 'a', '\ud800': 1 }] });
    expectError(res, 400, 'Record 0 (data[0]) has the unknown field "\ufffd"; the dataset defines s');
    expect(res.body.error.path).toBe('data[0].\ufffd');
  });

  it('refuses a body nested a million levels deep, wherever the nesting is', async () => {
    const id = uid('deep');
    await createDataset(s, key, id, { s: field('string', 'S') });
    const message = 'The request body nests arrays and objects more than 32 levels deep; a valid body needs at most 3';
    for (const raw of [`{"data":[{"s":${deep(1_000_000)}}]}`, `{"data":[],"x":${deep(1_000_000)}}`, `{"data":${deep(33)}}`]) {
      expectError(await s.request('POST', `/datasets/${id}/data`, { key, raw }), 400, message);
      expectError(await s.request('PUT', `/datasets/${id}/data`, { key, raw }), 400, message);
    }
    expect(await records(id)).toEqual([]);
  });

  it('refuses a malformed body 400 even when the dataset does not exist, and 404 only a well-formed one', async () => {
    const id = uid('missing');
    const refused = await append(id, { data: 0, delete_by: 'day' });
    expectError(refused, 400, '"data" must be an array of records, not number');
    expect(refused.body.error.path).toBe('data');
    expectError(await replace(id, { data: [{ n: 1 }, 'n'] }), 400, 'Record 1 (data[1]) must be an object, not string');
    expectError(await append(id, { data: [], deleteBy: 5 }), 400, /"deleteBy" must be the key of a date or datetime field/);
    expectError(await append(id, { data: [{ n: 1 }], delete_by: 'day' }), 404, 'Dataset not found');
  });

  it('refuses a malformed body 400, not 503, while a change of its dataset is pending (distributed: a schema service died mid-change)', async () => {
    const id = uid('pending');
    await createDataset(s, key, id, { day: field('date', 'Day') });
    const settle = s.distributed ? await leaveChangePending('acme', id) : () => Promise.resolve();
    try {
      expectError(await append(id, { data: 0, delete_by: 'day' }), 400, '"data" must be an array of records, not number');
      expectError(await replace(id, { data: [5] }), 400, 'Record 0 (data[0]) must be an object, not number');
      const wellFormed = await append(id, { data: [{ day: '2024-01-01' }], delete_by: 'day' });
      if (s.distributed) expectError(wellFormed, 503, /.+/);
      else expectOk(wellFormed);
    } finally {
      await settle();
    }
  });
});

/**
 * What a schema service that died between Kafka and Redis while re-creating `id` leaves in Redis: the
 * account's intent and its lease, held by nobody alive (so the sweep cannot roll the intent forward).
 * Resolves to the function that removes both, as if the change had never begun.
 */
async function leaveChangePending(account: string, id: string): Promise<() => Promise<void>> {
  const prefix = s.names!.redisPrefix;
  const redis = await connectTestRedis();
  const keys = [schemaIntentKey(prefix, account), `${prefix}schema-lock:${account}`];
  const definition = { fields: { day: { type: 'date', name: 'Day', optional: false } }, unique_by: [] } as const;
  const event: SchemaChangeEvent = { type: 'DatasetDefined', schema_version: EVENT_SCHEMA_VERSION, account, dataset: id, incarnation: 'e2e-pending', at: Date.now(), definition };
  await redis.set(keys[1]!, 'dead-holder', 'PX', 120_000);
  await redis.set(keys[0]!, encodeSchemaIntent({ token: 'dead-holder', event }));
  return async () => {
    await redis.del(...keys);
    redis.disconnect();
  };
}

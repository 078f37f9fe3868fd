/*
 * Fuzzing the public API over loopback, bounded in count: arbitrary (mostly almost-valid) definitions,
 * records and raw bodies. Whatever comes in, the server answers with a status docs/api.md → Errors lists for the
 * operation — never a 500 — in the shape docs/openapi.yaml documents, and a refused write changes nothing.
 */
import fc from 'fast-check';
import { validateResponse } from '../helpers/openapi';
import { TestServer } from '../helpers/server';

jest.setTimeout(120_000);

const s = new TestServer({ env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: '1000000' } });
beforeAll(async () => {
  await s.start();
});
afterAll(async () => {
  await s.stop();
});

// Mostly valid input with a chaotic minority, so both the accepting and the refusing paths are exercised.
const mostly = <T, U>(valid: fc.Arbitrary<T>, chaos: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
  fc.oneof({ arbitrary: valid, weight: 5 }, { arbitrary: chaos, weight: 1 });

const VALID_TYPES = ['date', 'datetime', 'number', 'percentage', 'string', 'money', 'duration'] as const;
const keyArb = mostly(fc.constantFrom('day', 'at', 'n', 'amount', 'label', 'x_1'), fc.string({ maxLength: 8 }));
const validFieldArb = fc.constantFrom(...VALID_TYPES).chain((type) =>
  fc.record({
    type: fc.constant(type),
    name: fc.string({ minLength: 1, maxLength: 10 }),
    optional: fc.boolean(),
    ...(type === 'money' ? { currency_code: fc.constantFrom('USD', 'EUR', 'JPY') } : {}),
    ...(type === 'duration' ? { time_unit: fc.constantFrom('seconds', 'hours') } : {}),
  }),
);
const chaoticFieldArb = fc.record(
  {
    type: fc.oneof(fc.constantFrom('text', 'Number', '', 'money'), fc.anything()),
    name: fc.anything(),
    optional: fc.anything(),
    currency_code: fc.oneof(fc.constantFrom('usd', 'XXX', 'ZZZ'), fc.anything()),
    time_unit: fc.constantFrom('seconds', 'days'),
  },
  { requiredKeys: [] },
);
const fieldsArb = fc.dictionary(keyArb, mostly(validFieldArb, chaoticFieldArb), { minKeys: 1, maxKeys: 11 });
const definitionArb = fc
  .record({
    fields: mostly(fieldsArb, fc.anything()),
    id: fc.string(),
  })
  .chain((d) => {
    const keys = typeof d.fields === 'object' && d.fields !== null ? Object.keys(d.fields) : [];
    const unique = keys.length === 0 ? fc.constant([] as string[]) : fc.subarray(keys, { maxLength: Math.min(3, keys.length) });
    return fc.record({
      fields: fc.constant(d.fields),
      id: fc.constant(d.id),
      unique_by: mostly(unique, fc.oneof(keyArb, fc.anything())),
    });
  });
const valueArb = fc.oneof(
  { arbitrary: fc.constantFrom('2024-02-29', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00.123+05:30', 'short text'), weight: 3 },
  { arbitrary: fc.integer({ min: -1_000_000, max: 1_000_000 }), weight: 3 },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: fc.constantFrom('2023-02-29', '2024-01-01T25:00:00Z', ''), weight: 1 },
  { arbitrary: fc.oneof(fc.double(), fc.string({ maxLength: 120 }), fc.anything({ maxDepth: 3 })), weight: 1 },
);
const REC_FIELDS = { day: 'date', at: 'datetime', n: 'number', amount: 'money', label: 'string' } as const;
const validValue = (type: string): fc.Arbitrary<unknown> =>
  type === 'date'
    ? fc.constantFrom('2024-02-29', '2024-03-01', '2024-12-31')
    : type === 'datetime'
      ? fc.constantFrom('2024-01-01T00:00:00Z', '2024-01-01T00:00:00.123+05:30', '2024-06-30T23:59:59.999Z')
      : type === 'string'
        ? fc.string({ maxLength: 100 })
        : fc.integer({ min: -1_000_000, max: 1_000_000 });
const validRecordArb = fc.record(
  Object.fromEntries(Object.entries(REC_FIELDS).map(([k, t]) => [k, fc.option(validValue(t), { nil: null })])),
  { requiredKeys: [] },
);
const recordArb = mostly(validRecordArb, fc.dictionary(keyArb, valueArb, { maxKeys: 6 }));
const writeBodyArb = fc.record(
  {
    data: mostly(fc.array(recordArb, { maxLength: 8 }), fc.anything()),
    delete_by: mostly(fc.constantFrom('day', 'at'), fc.oneof(keyArb, fc.array(keyArb, { maxLength: 2 }), fc.anything())),
  },
  { requiredKeys: ['data'] },
);
const idArb = mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,10}[a-z0-9]$/), fc.oneof(fc.constantFrom('fz%2Fd', 'FZ', '-fz', 'fz.'), fc.stringMatching(/^[a-z0-9._%-]{1,12}$/)));

const ALLOWED: Record<string, number[]> = {
  'PUT /datasets/{id}': [200, 201, 400, 409],
  'POST /datasets/{id}/data': [200, 400, 404],
  'PUT /datasets/{id}/data': [200, 400, 404],
  'DELETE /datasets/{id}': [200, 400, 404],
};

describe('fuzzing the public API', () => {
  const key = (): string => s.keys.acme!;
  const problems: string[] = [];
  beforeEach(() => problems.splice(0)); // each test reports its own

  const check = async (method: string, template: string, id: string, opts: { body?: unknown; raw?: string }): Promise<number> => {
    const path = template.replace('{id}', id);
    const res = await s.request(method, path, { key: key(), ...opts });
    const op = `${method} ${template}`;
    if (!ALLOWED[op]!.includes(res.status)) problems.push(`${op} ${path} → ${res.status} ${res.text.slice(0, 200)} for ${JSON.stringify(opts).slice(0, 300)}`);
    const errors = validateResponse(method, template, res.status, res.headers, res.body ?? res.text);
    if (errors.length > 0) problems.push(`${op} ${path} → ${res.status}: ${errors.join('; ')}`);
    counts[`${op} ${res.status}`] = (counts[`${op} ${res.status}`] ?? 0) + 1;
    return res.status;
  };
  const counts: Record<string, number> = {};


  it('answers every definition with a documented status and shape', async () => {
    await fc.assert(
      fc.asyncProperty(idArb, definitionArb, async (id, body) => {
        const status = await check('PUT', '/datasets/{id}', id, { body });
        if (status === 201) await check('DELETE', '/datasets/{id}', id, {}); // keep under the 100-dataset limit
      }),
      { numRuns: 250 },
    );
    expect(problems).toEqual([]);
  });

  it('answers every append and replace with a documented status, and a refused write changes nothing', async () => {
    const definition = {
      fields: {
        day: { type: 'date', name: 'Day', optional: true },
        at: { type: 'datetime', name: 'At', optional: true },
        n: { type: 'number', name: 'N', optional: true },
        amount: { type: 'money', name: 'Amount', currency_code: 'USD', optional: true },
        label: { type: 'string', name: 'Label', optional: true },
      },
    };
    expect((await s.request('PUT', '/datasets/fz.rec', { key: key(), body: definition })).status).toBe(201);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('POST', 'PUT'), writeBodyArb, async (method, body) => {
        const before = await s.records('acme', 'fz.rec');
        const status = await check(method, '/datasets/{id}/data', 'fz.rec', { body });
        if (status !== 200) expect(await s.records('acme', 'fz.rec')).toEqual(before);
      }),
      { numRuns: 300 },
    );
    expect(problems).toEqual([]);
  });

  it('answers raw, malformed bodies with 400, never 500', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 200 }), fc.json().map((j) => j.slice(0, -1)), fc.constantFrom('[', '{"data":', '{"data":[{]}', '\u0000', '{"fields":{"a":{"type":"number","name":"A"}}}}')), async (raw) => {
        await check('POST', '/datasets/{id}/data', 'fz.rec', { raw });
        await check('PUT', '/datasets/{id}', 'fz.raw', { raw });
      }),
      { numRuns: 150 },
    );
    expect(problems).toEqual([]);
  });

  it('exercised both the accepting and the refusing paths of every operation', () => {
    for (const op of ['PUT /datasets/{id} 201', 'PUT /datasets/{id} 400', 'POST /datasets/{id}/data 200', 'POST /datasets/{id}/data 400', 'PUT /datasets/{id}/data 200', 'PUT /datasets/{id}/data 400']) {
      expect([op, counts[op] ?? 0]).toEqual([op, expect.any(Number)]);
      expect(counts[op]).toBeGreaterThan(5);
    }
  });
});

/*
 * The response validator of test/helpers/openapi.ts, against hand-made responses: it accepts what the
 * document describes and — the point of these tests — rejects what it does not.
 */
import { validateRequestBody, validateResponse, type HttpHeaders } from '../helpers/openapi';

const json = { 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': 'req-1' };
const ok: HttpHeaders = { ...json, 'RateLimit-Limit': '60', 'RateLimit-Remaining': '59', 'RateLimit-Reset': '42' };
const at = '2024-01-31T12:00:00.000Z';
const dataset = {
  id: 'sales.by.day',
  fields: {
    day: { type: 'date', name: 'Day', optional: false },
    amount: { type: 'money', name: 'Amount', optional: true, currency_code: 'USD' },
    took: { type: 'duration', name: 'Took', optional: false, time_unit: 'seconds' },
  },
  unique_by: ['day'],
  created_at: at,
  updated_at: at,
};
const error = (message: string, extra: Record<string, unknown> = {}): unknown => ({ error: { message, ...extra } });

/** Asserts at least one error, and that one of them mentions `fragment`. */
function expectError(errors: string[], fragment: string | RegExp): void {
  expect(errors.length).toBeGreaterThan(0);
  expect(errors).toEqual(expect.arrayContaining([expect.stringMatching(fragment)]));
}

describe('validateResponse: success responses', () => {
  it('accepts the documented empty object of ping, delete, append and replace', () => {
    expect(validateResponse('GET', '/', 200, ok, {})).toEqual([]);
    expect(validateResponse('DELETE', '/datasets/{id}', 200, ok, {})).toEqual([]);
    expect(validateResponse('post', '/datasets/{id}/data', 200, ok, {})).toEqual([]);
    expect(validateResponse('PUT', '/datasets/{id}/data', 200, ok, {})).toEqual([]);
  });

  it('accepts a created and a found dataset, with or without unique_by', () => {
    expect(validateResponse('PUT', '/datasets/{id}', 201, ok, dataset)).toEqual([]);
    const { unique_by: _omitted, ...withoutUnique } = dataset;
    expect(validateResponse('PUT', '/datasets/{id}', 200, ok, withoutUnique)).toEqual([]);
  });

  it('matches concrete paths to their templates and header names case-insensitively', () => {
    const lower: HttpHeaders = Object.fromEntries(Object.entries(ok).map(([k, v]) => [k.toLowerCase(), v]));
    expect(validateResponse('POST', '/datasets/sales.by.day/data', 200, lower, {})).toEqual([]);
    expect(validateResponse('PUT', '/datasets/abc', 201, { ...lower, 'x-request-id': ['r1'] }, dataset)).toEqual([]);
  });

  it('rejects a success body that is not exactly {}', () => {
    expectError(validateResponse('GET', '/', 200, ok, { ok: true }), /body must NOT have additional properties/);
    expectError(validateResponse('DELETE', '/datasets/{id}', 200, ok, []), /body must be object/);
    expectError(validateResponse('DELETE', '/datasets/{id}', 200, ok, undefined), /body must be object/);
  });

  it('rejects missing or malformed headers', () => {
    const { 'X-Request-Id': _id, ...noId } = ok;
    expectError(validateResponse('GET', '/', 200, noId, {}), /header X-Request-Id is required but missing/);
    const { 'RateLimit-Reset': _reset, ...noReset } = ok;
    expectError(validateResponse('GET', '/', 200, noReset, {}), /header RateLimit-Reset is required/);
    expectError(validateResponse('GET', '/', 200, { ...ok, 'RateLimit-Remaining': '-1' }, {}), /RateLimit-Remaining "-1" must be >= 0/);
    expectError(validateResponse('GET', '/', 200, { ...ok, 'RateLimit-Limit': 'sixty' }, {}), /RateLimit-Limit "sixty" must be integer/);
    const { 'Content-Type': _ct, ...noType } = ok;
    expectError(validateResponse('GET', '/', 200, noType, {}), /Content-Type is missing/);
    expectError(validateResponse('GET', '/', 200, { ...ok, 'Content-Type': 'text/html' }, {}), /Content-Type text\/html is not documented/);
  });

  it('rejects datasets that break the schema', () => {
    const { created_at: _c, ...noCreated } = dataset;
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, noCreated), /required property 'created_at'/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, { ...dataset, created_at: 1706702400000 }), /created_at must be string/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, { ...dataset, updated_at: '2024-01-31T12:00:00Z' }), /updated_at must match pattern/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, { ...dataset, account: 'acme' }), /additionalProperty":"account"/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, { ...dataset, id: 'Sales' }), /body\/id must match pattern/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, { ...dataset, unique_by: ['day', 'day'] }), /unique_by must NOT have duplicate items/);
    const fields = (f: Record<string, unknown>): unknown => ({ ...dataset, fields: f, unique_by: [] });
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, fields({})), /fields must NOT have fewer than 1 properties/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, fields({ Day: { type: 'date', name: 'Day', optional: false } })), /property name must be valid/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, fields({ day: { type: 'date', name: 'Day' } })), /required property 'optional'/);
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, fields({ m: { type: 'money', name: 'M', optional: false } })), /required property 'currency_code'/);
    expectError(
      validateResponse('PUT', '/datasets/{id}', 201, ok, fields({ n: { type: 'number', name: 'N', optional: false, currency_code: 'USD' } })),
      /additionalProperty":"currency_code"/,
    );
    expectError(validateResponse('PUT', '/datasets/{id}', 201, ok, fields({ n: { type: 'boolean', name: 'N', optional: false } })), /oneOf/);
  });
});

describe('validateResponse: error responses', () => {
  it('accepts the documented errors, with extra keys inside error', () => {
    expect(validateResponse('GET', '/', 401, json, error('Your API key is invalid'))).toEqual([]);
    expect(validateResponse('GET', '/', 401, json, error('Your API key is invalid', { code: 'unauthorized' }))).toEqual([]);
    expect(validateResponse('POST', '/datasets/{id}/data', 400, json, error('data[3].amount: must be an integer', { code: 'invalid', path: 'data[3].amount' }))).toEqual([]);
    expect(validateResponse('POST', '/datasets/{id}/data', 404, json, error('Dataset not found'))).toEqual([]);
    expect(
      validateResponse('PUT', '/datasets/{id}', 409, json, error('A dataset with different fields already exists with the ID "x": field "a" is missing')),
    ).toEqual([]);
    expect(validateResponse('PUT', '/datasets/{id}/data', 413, json, error('Request body too large'))).toEqual([]);
    expect(
      validateResponse('GET', '/', 429, { ...json, 'Retry-After': '17' }, error('You have exceeded the API rate limit of 60 requests per minute. Try sending data less frequently.')),
    ).toEqual([]);
    expect(validateResponse('DELETE', '/datasets/{id}', 500, json, error('Internal error', { request_id: 'req-1' }))).toEqual([]);
    expect(validateResponse('DELETE', '/datasets/{id}', 503, json, error('The event log is unavailable'))).toEqual([]);
  });

  it('rejects error bodies that break the shape or the fixed messages', () => {
    expectError(validateResponse('GET', '/', 401, json, { message: 'Your API key is invalid' }), /required property 'error'/);
    expectError(validateResponse('GET', '/', 401, json, { error: 'Your API key is invalid' }), /body\/error must be object/);
    expectError(validateResponse('GET', '/', 401, json, { error: { message: '' } }), /message must NOT have fewer than 1 characters/);
    expectError(validateResponse('GET', '/', 401, json, { ...(error('Your API key is invalid') as object), stack: 'at x' }), /additionalProperty":"stack"/);
    expectError(validateResponse('GET', '/', 401, json, error('Unauthorized')), /message must be equal to constant/);
    expectError(validateResponse('DELETE', '/datasets/{id}', 404, json, error('Not Found')), /message must be equal to constant/);
    expectError(validateResponse('PUT', '/datasets/{id}', 409, json, error('Conflict')), /message must match pattern/);
    expectError(validateResponse('POST', '/datasets/{id}/data', 422, json, error('Unprocessable')), /message must match pattern/);
    expectError(validateResponse('POST', '/datasets/{id}/data', 409, json, error('Conflict')), /message must match pattern/);
    expectError(validateResponse('GET', '/', 500, json, error('Internal error')), /required property 'request_id'/);
  });

  it('rejects a 429 without Retry-After, or with a bad one', () => {
    expectError(validateResponse('GET', '/', 429, json, error('slow down')), /header Retry-After is required but missing/);
    expectError(validateResponse('GET', '/', 429, { ...json, 'Retry-After': '0' }, error('slow down')), /Retry-After "0" must be >= 1/);
  });

  it('rejects statuses the operation does not document', () => {
    expectError(validateResponse('DELETE', '/datasets/{id}', 204, ok, undefined), /status 204 is not documented/);
    expectError(validateResponse('PUT', '/datasets/{id}', 404, json, error('Dataset not found')), /status 404 is not documented/);
    expectError(validateResponse('GET', '/', 409, json, error('bad')), /status 409 is not documented/);
  });

  it('checks unknown routes and wrong methods against x-unrouted-responses', () => {
    expect(validateResponse('GET', '/nope', 404, json, error('Not found'))).toEqual([]);
    expect(validateResponse('GET', '/datasets/{id}', 405, { ...json, Allow: 'PUT, DELETE' }, error('Method not allowed'))).toEqual([]);
    expect(validateResponse('PATCH', '/datasets/abc/data', 405, { ...json, Allow: 'POST, PUT' }, error('Method not allowed'))).toEqual([]);
    expectError(validateResponse('GET', '/datasets/{id}', 405, json, error('Method not allowed')), /header Allow is required/);
    expect(validateResponse('PUT', '/', 401, json, error('Your API key is invalid'))).toEqual([]);
    expect(validateResponse('GET', '/nope', 429, { ...json, 'Retry-After': '3' }, error('slow down'))).toEqual([]);
    expectError(validateResponse('GET', '/nope', 200, ok, {}), /no such operation in the document/);
    expectError(validateResponse('GET', '/datasets/{id}', 409, json, error('bad')), /no such operation in the document/);
    expectError(validateResponse('GET', '/nope', 404, json, 'Not Found'), /body must be object/);
  });
});

describe('validateRequestBody', () => {
  it('accepts the bodies real clients send', () => {
    expect(
      validateRequestBody('PUT', '/datasets/{id}', {
        id: 'sales',
        fields: {
          day: { type: 'date', name: 'Day' },
          amount: { type: 'money', name: 'Amount', currency_code: 'EUR', optional: true },
          took: { type: 'duration', name: 'Took', time_unit: 'minutes' },
        },
        unique_by: 'day',
        created_at: at,
      }),
    ).toEqual([]);
    expect(validateRequestBody('POST', '/datasets/{id}/data', { data: [{ day: '2024-01-31', amount: 795, took: null }], deleteBy: ['day'] })).toEqual([]);
    expect(validateRequestBody('PUT', '/datasets/{id}/data', { data: [] })).toEqual([]);
  });

  it('rejects bodies that break the documented rules', () => {
    expectError(validateRequestBody('PUT', '/datasets/{id}', { fields: { amount: { type: 'money', name: 'A' } } }), /required property 'currency_code'/);
    expectError(validateRequestBody('PUT', '/datasets/{id}', { fields: { took: { type: 'duration', name: 'T' } } }), /required property 'time_unit'/);
    expectError(validateRequestBody('PUT', '/datasets/{id}', { fields: { a: { type: 'string', name: '' } } }), /name must NOT have fewer than 1 characters/);
    expectError(validateRequestBody('PUT', '/datasets/{id}', { fields: {} }), /fewer than 1 properties/);
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`f${i}`, { type: 'number', name: `F${i}` }]));
    expectError(validateRequestBody('PUT', '/datasets/{id}', { fields: eleven }), /more than 10 properties/);
    expectError(validateRequestBody('POST', '/datasets/{id}/data', {}), /required property 'data'/);
    expectError(validateRequestBody('POST', '/datasets/{id}/data', { data: Array.from({ length: 501 }, () => ({ n: 1 })) }), /more than 500 items/);
    expectError(validateRequestBody('POST', '/datasets/{id}/data', { data: [{ s: 'x'.repeat(101) }] }), /more than 100 characters/);
    expectError(validateRequestBody('PUT', '/datasets/{id}/data', { data: [{ ok: true }] }), /must be string,number,null/);
    expectError(validateRequestBody('GET', '/', {}), /no request body is documented/);
  });
});

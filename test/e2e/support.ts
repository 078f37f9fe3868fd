import { randomBytes } from 'node:crypto';
import type { Response, TestServer } from '../helpers/server';

/** Shared checks for the e2e suites: every rule here comes from docs/api.md → Errors. */

/** A dataset id no other test uses. */
export const uid = (prefix: string): string => `${prefix}-${randomBytes(4).toString('hex')}`;

/** A server that lets the suite send as many requests as it needs (the 60/minute rule has its own test). */
export const UNLIMITED = { PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000' } as const;

const isJson = (res: Response): boolean => /^application\/json\b/.test(String(res.headers['content-type']));

/** Every response carries a request id; every body is JSON. */
function expectCommon(res: Response): void {
  expect(typeof res.headers['x-request-id']).toBe('string');
  expect(String(res.headers['x-request-id']).length).toBeGreaterThan(0);
  expect(isJson(res)).toBe(true);
}

/**
 * An error answer: the exact status, `{"error":{"message"}}` as JSON, a request id, and a message that is
 * exactly `message` (a string) or matches it (a RegExp).
 */
export function expectError(res: Response, status: number, message: string | RegExp): void {
  const detail = `${res.status} ${res.text.slice(0, 400)}`;
  expect({ status: res.status, detail }).toEqual({ status, detail });
  expectCommon(res);
  expect(res.body).toEqual({ error: expect.objectContaining({ message: expect.any(String) }) });
  const got: string = res.body.error.message;
  if (typeof message === 'string') expect(got).toBe(message);
  else expect(got).toMatch(message);
}

/** Passed as `body` to expectOk to skip the body comparison. */
export const ANY_BODY = Symbol('any body');

/** A success answer: the exact status, a JSON body (`{}` unless given), a request id and the rate-limit headers. */
export function expectOk(res: Response, status = 200, body: unknown = {}): void {
  const detail = `${res.status} ${res.text.slice(0, 400)}`;
  expect({ status: res.status, detail }).toEqual({ status, detail });
  expectCommon(res);
  for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
    expect(String(res.headers[h])).toMatch(/^\d+$/);
  }
  if (body !== ANY_BODY) expect(res.body).toEqual(body);
}

/** A field definition, as clients write them. */
export const field = (type: string, name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ type, name, ...extra });

/** Creates a dataset and asserts the 201. */
export async function createDataset(
  s: TestServer,
  key: string,
  id: string,
  fields: Record<string, unknown>,
  unique_by?: string[],
): Promise<Response> {
  const res = await s.request('PUT', `/datasets/${id}`, { key, body: unique_by === undefined ? { fields } : { fields, unique_by } });
  expectOk(res, 201, ANY_BODY);
  return res;
}

/** Appends records in requests of at most 500 (docs/api.md → Limits), asserting each 200. */
export async function appendAll(s: TestServer, key: string, id: string, records: readonly unknown[], extra: Record<string, unknown> = {}): Promise<void> {
  for (let i = 0; i < records.length; i += 500) {
    const res = await s.request('POST', `/datasets/${id}/data`, { key, body: { data: records.slice(i, i + 500), ...extra } });
    expectOk(res);
  }
}

/** `YYYY-MM-DD` of the day `n` days after 2020-01-01 (so later n is a later day). */
export const day = (n: number): string => new Date(Date.UTC(2020, 0, 1 + n)).toISOString().slice(0, 10);

/** The admin listing of one dataset, or undefined. */
export async function listing(s: TestServer, account: string, id: string): Promise<any> {
  const res = await s.admin(`/admin/accounts/${account}/datasets`);
  expect(res.status).toBe(200);
  return (res.body.datasets as any[]).find((d) => d.id === id);
}

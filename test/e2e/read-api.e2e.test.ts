import path from 'node:path';
import { loadOpenApiDocument, OpenApiValidator } from '../helpers/openapi';
import { TestServer } from '../helpers/server';
import { appendAll, createDataset, expectError, field, uid, UNLIMITED } from './support';

/*
 * The read API for widgets over HTTP (docs/read-api.md), in the embedded mode and (the e2e-distributed
 * project) the four services with ClickHouse behind the read side: records pushed through the public API
 * come back paged, sorted and filtered, and as the aggregates a number, line, bar or leaderboard widget
 * asks for. Only exact answers are checked; the property tests (test/contract/read-api.contract.ts) cover
 * the space of datasets and queries.
 */

let s: TestServer;
let acme: string;
beforeAll(async () => {
  s = await new TestServer({ env: UNLIMITED }).start();
  acme = s.keys.acme!;
});
afterAll(async () => {
  await s.stop();
});

const documented = new OpenApiValidator(loadOpenApiDocument(path.resolve(__dirname, '../../docs/read-api.yaml')));

/** A read, its answer checked against docs/read-api.yaml whatever its status. */
async function read(route: string, token?: string) {
  const url = `/read/v1/accounts/${route}`;
  const res = await s.admin(url, token);
  expect(documented.validateResponse('GET', url, res.status, res.headers, res.body)).toEqual([]);
  return res;
}

describe('read API', () => {
  const id = uid('sales');
  beforeAll(async () => {
    await createDataset(s, acme, id, {
      team: field('string', 'Team'),
      amount: field('money', 'Amount', { currency_code: 'EUR' }),
      rate: field('percentage', 'Rate', { optional: true }),
      at: field('datetime', 'At'),
    });
    await appendAll(s, acme, id, [
      { team: 'red', amount: 100, rate: 0.5, at: '2024-03-03T23:30:00Z' },
      { team: 'blue', amount: 250, rate: null, at: '2024-03-04T00:30:00+01:00' },
      { team: 'red', amount: -50, rate: 0.25, at: '2024-03-04T12:00:00Z' },
      { team: 'green', amount: 100, at: '2024-04-01T00:00:00Z' },
    ]);
  });

  it('lists the account’s datasets with record counts and times, and one dataset', async () => {
    const res = await read('acme/datasets');
    expect(res.status).toBe(200);
    const listed = (res.body.datasets as any[]).find((d) => d.id === id);
    expect(listed).toMatchObject({ id, record_count: 4, unique_by: [] });
    expect(Date.parse(listed.updated_at)).toBeGreaterThanOrEqual(Date.parse(listed.created_at));
    const one = await read(`acme/datasets/${id}`);
    expect(one.body).toEqual(listed);
    expectError(await read('acme/datasets/no-such-dataset'), 404, 'Dataset not found: no-such-dataset');
  });

  it('pages records sorted by a field, nulls last, ties in insertion order', async () => {
    const first = await read(`acme/datasets/${id}/records?sort=amount&order=desc&limit=2`);
    expect(first.status).toBe(200);
    expect(first.headers['cache-control']).toBe('no-store');
    expect(first.body).toEqual({
      records: [
        { team: 'blue', amount: 250, rate: null, at: '2024-03-03T23:30:00.000Z' },
        { team: 'red', amount: 100, rate: 0.5, at: '2024-03-03T23:30:00.000Z' },
      ],
      total: 4,
      offset: 0,
      limit: 2,
      next_offset: 2,
    });
    const last = await read(`acme/datasets/${id}/records?sort=amount&order=desc&limit=2&offset=2`);
    expect(last.body.records.map((r: any) => r.team)).toEqual(['green', 'red']);
    expect(last.body.next_offset).toBeNull();
    const byRate = await read(`acme/datasets/${id}/records?sort=rate&order=desc`);
    expect(byRate.body.records.map((r: any) => r.rate)).toEqual([0.5, 0.25, null, null]);
  });

  it('filters by equality, ranges (datetimes with offsets) and nulls', async () => {
    const red = await read(`acme/datasets/${id}/records?filter.team=red`);
    expect(red.body.records.map((r: any) => r.amount)).toEqual([100, -50]);
    const march4 = await read(`acme/datasets/${id}/records?filter.at.gte=${encodeURIComponent('2024-03-04T01:00:00+01:00')}&filter.at.lt=2024-03-05T00:00:00Z`);
    expect(march4.body.records.map((r: any) => r.team)).toEqual(['red']);
    const noRate = await read(`acme/datasets/${id}/records?filter.rate.null=true`);
    expect(noRate.body.total).toBe(2);
  });

  it('aggregates: a number, a leaderboard by string, a line by week and month', async () => {
    expect((await read(`acme/datasets/${id}/aggregate?op=sum&field=amount`)).body).toEqual({ op: 'sum', field: 'amount', group_by: null, bucket: null, value: 400 });
    expect((await read(`acme/datasets/${id}/aggregate?op=avg&field=rate`)).body.value).toBe(0.375);
    expect((await read(`acme/datasets/${id}/aggregate?op=count`)).body.value).toBe(4);
    expect((await read(`acme/datasets/${id}/aggregate?op=max&field=amount&group_by=team`)).body.groups).toEqual([
      { key: 'blue', value: 250 },
      { key: 'green', value: 100 },
      { key: 'red', value: 100 },
    ]);
    // 2024-03-03 is a Sunday: its record belongs to the week of Monday 2024-02-26.
    expect((await read(`acme/datasets/${id}/aggregate?op=sum&field=amount&group_by=at&bucket=week`)).body.groups).toEqual([
      { key: '2024-02-26', value: 350 },
      { key: '2024-03-04', value: -50 },
      { key: '2024-04-01', value: 100 },
    ]);
    expect((await read(`acme/datasets/${id}/aggregate?op=min&field=rate&group_by=at&bucket=month&filter.team=red`)).body.groups).toEqual([{ key: '2024-03-01', value: 0.25 }]);
  });

  it('refuses bad queries with a JSON 400 naming the parameter, and needs the admin token', async () => {
    expectError(await read(`acme/datasets/${id}/records?sort=nope`), 400, /^sort names "nope", which is not a field/);
    expectError(await read(`acme/datasets/${id}/records?filter.amount.gte=lots`), 400, /^filter\.amount\.gte must be a number/);
    expectError(await read(`acme/datasets/${id}/aggregate?op=sum&field=team`), 400, /needs a number, money, percentage or duration field/);
    const bad = await read(`acme/datasets/${id}/aggregate?op=sum&field=amount&group_by=at`);
    expectError(bad, 400, /needs bucket/);
    expect(bad.body.error.path).toBe('bucket');
    expectError(await read('bad%20account!/datasets'), 400, /^An account name is 1 to 100 of/);
    expect((await read('acme/datasets', 'not-the-token')).status).toBe(401);
  });
});

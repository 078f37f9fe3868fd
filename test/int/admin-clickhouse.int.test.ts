import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryProjection } from '@pushbase/app';
import { EVENT_SCHEMA_VERSION, initialState, type DatasetEvent, type State } from '@pushbase/domain';
import { createAdminApp } from '@pushbase/gateway';
import { connectClickHouse } from '../../services/clickhouse/src/client';
import { ClickHouseReadModel } from '../../services/clickhouse/src/read-model';
import { emptyBatch, projectEvent, testDatabase, writeBatch, type TestDatabase } from '../../services/clickhouse/test/support';

/*
 * The admin read routes (docs/operations.md → The read side) and the read API (docs/read-api.md) served from the
 * ClickHouse projection: the same answers, errors included, byte for byte, as the embedded memory
 * projection gives for the same events; and a ClickHouse that cannot be reached is a 503 JSON error, never
 * a 500 or an empty list.
 */
const TOKEN = 'admin-token-for-tests-0123456789';

const base = (dataset: string, incarnation: string) => ({ schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION, account: 'acme', dataset, incarnation, at: 1_700_000_000_000 });
const EVENTS: DatasetEvent[] = [
  { ...base('sales', 'i1'), type: 'DatasetDefined', definition: { fields: { day: { type: 'date', name: 'Day', optional: false }, n: { type: 'number', name: 'N', optional: true } }, unique_by: ['day'] } },
  { ...base('sales', 'i1'), type: 'RecordsAppended', records: [{ day: '2024-01-01', n: 1 }, { day: '2024-01-02', n: null }], delete_by: null },
  { ...base('sales', 'i1'), type: 'RecordsAppended', records: [{ day: '2024-01-01', n: 10 }], delete_by: null },
  { ...base('visits', 'i2'), type: 'DatasetDefined', definition: { fields: { at: { type: 'datetime', name: 'At', optional: false } }, unique_by: [] } },
  { ...base('visits', 'i2'), type: 'RecordsAppended', records: [{ at: '2024-01-01T00:00:00.000Z' }, { at: '2024-01-01T00:00:00.000Z' }], delete_by: null },
];

async function serve(app: ReturnType<typeof createAdminApp>): Promise<{ server: Server; url: string }> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const get = async (url: string): Promise<{ status: number; body: unknown }> => {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: await res.json() };
};

describe('admin read routes over the ClickHouse projection', () => {
  let db: TestDatabase;
  let clickhouse: { server: Server; url: string };
  let memory: { server: Server; url: string };
  beforeAll(async () => {
    db = await testDatabase();
    const batch = emptyBatch();
    let state: State = initialState();
    EVENTS.forEach((e, offset) => (state = projectEvent(state, e, { partition: 0, offset }, batch)));
    await writeBatch(db.store, batch);
    const reference = new MemoryProjection();
    reference.apply(EVENTS);
    clickhouse = await serve(createAdminApp({ readModel: db.readModel, token: TOKEN }));
    memory = await serve(createAdminApp({ readModel: reference, token: TOKEN }));
  });
  afterAll(async () => {
    for (const s of [clickhouse, memory]) await new Promise((r) => s.server.close(r));
    await db.drop();
  });

  it.each([
    '/admin/accounts/acme/datasets',
    '/admin/accounts/acme/datasets/sales/records',
    '/admin/accounts/acme/datasets/visits/records',
    '/admin/accounts/acme/datasets/none/records',
    '/admin/accounts/nobody/datasets',
    // The read API (docs/read-api.md): answers and errors alike.
    '/read/v1/accounts/acme/datasets',
    '/read/v1/accounts/acme/datasets/sales',
    '/read/v1/accounts/acme/datasets/sales/records?sort=n&order=desc&limit=1',
    '/read/v1/accounts/acme/datasets/sales/records?filter.n.null=true',
    '/read/v1/accounts/acme/datasets/visits/records?filter.at=2024-01-01T01:00:00%2B01:00&offset=1',
    '/read/v1/accounts/acme/datasets/sales/aggregate?op=sum&field=n&group_by=day&bucket=month',
    '/read/v1/accounts/acme/datasets/visits/aggregate?op=count&group_by=at&bucket=week',
    '/read/v1/accounts/acme/datasets/none/aggregate?op=count',
    '/read/v1/accounts/acme/datasets/sales/records?sort=nope',
    '/read/v1/accounts/acme/datasets/sales/aggregate?op=avg&field=day',
    '/read/v1/accounts/bad%20account/datasets',
  ])(
    'answers %s as the memory projection does',
    async (route) => {
      const [fromClickHouse, fromMemory] = await Promise.all([get(clickhouse.url + route), get(memory.url + route)]);
      expect(fromClickHouse.status).toBe(fromMemory.status);
      // The request id differs per request; everything else must not.
      const strip = (b: unknown): unknown => JSON.parse(JSON.stringify(b, (k, v: unknown) => (k === 'request_id' ? undefined : v)));
      expect(strip(fromClickHouse.body)).toEqual(strip(fromMemory.body));
    },
  );

  it('lists the records oldest insertion first, a merged one as the newest', async () => {
    await expect(get(`${clickhouse.url}/admin/accounts/acme/datasets/sales/records`)).resolves.toEqual({
      status: 200,
      body: { records: [{ day: '2024-01-02', n: null }, { day: '2024-01-01', n: 10 }] },
    });
  });

  it('answers 503 with a JSON error when ClickHouse cannot be reached, naming neither its address nor its password', async () => {
    const conn = connectClickHouse('http://pushbase:s3cret-pw@127.0.0.1:1', { requestTimeoutMs: 2000 });
    const down = await serve(createAdminApp({ readModel: new ClickHouseReadModel(conn, db.database), token: TOKEN }));
    try {
      for (const route of ['/admin/accounts/acme/datasets', '/read/v1/accounts/acme/datasets/sales/records', '/read/v1/accounts/acme/datasets/sales/aggregate?op=count']) {
        const res = await get(`${down.url}${route}`);
        expect({ route, status: res.status }).toEqual({ route, status: 503 });
        expect(res.body).toMatchObject({ error: { message: expect.any(String) as unknown, code: 'unavailable' } });
        expect(JSON.stringify(res.body)).not.toMatch(/s3cret|pushbase:|127\.0\.0\.1|ECONNREFUSED|ClickHouse/);
      }
    } finally {
      await new Promise((r) => down.server.close(r));
      await conn.close();
    }
  });
});

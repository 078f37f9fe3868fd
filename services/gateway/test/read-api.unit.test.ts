import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import type { ReadModel } from '@pushbase/contracts';
import { MemoryProjection } from '@pushbase/app';
import { EVENT_SCHEMA_VERSION, parseDefinition } from '@pushbase/domain';
import { createReadApi, errorMiddleware, HttpError, type ReadAccess } from '../src';

/*
 * The read API's access seam: every route asks `access` for its account before reading anything, so a
 * read-scope key can later be admitted for its own account only. Here an access that opens one account.
 */

const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'sales', incarnation: 'i1', at: 0 } as const;

describe('read API access', () => {
  const projection = new MemoryProjection();
  projection.apply([
    { ...base, type: 'DatasetDefined', definition: parseDefinition({ fields: { n: { type: 'number', name: 'N' } } }) },
    { ...base, type: 'RecordsAppended', records: [{ n: 1 }, { n: 2 }], delete_by: null },
  ]);
  const reads: string[] = [];
  // Counts what reaches the read model: a refused request must read nothing.
  const readModel: ReadModel = {
    listDatasets: (a) => (reads.push('listDatasets'), projection.listDatasets(a)),
    listRecords: (a, id) => (reads.push('listRecords'), projection.listRecords(a, id)),
    queryRecords: (a, id, q) => (reads.push('queryRecords'), projection.queryRecords(a, id, q)),
    aggregate: (a, id, q) => (reads.push('aggregate'), projection.aggregate(a, id, q)),
  };
  const onlyAcme: ReadAccess = (_ctx, account) => {
    if (account !== 'acme') throw new HttpError(403, 'This key reads only its own account', 'forbidden');
  };
  let server: Server;
  let url: string;
  beforeAll(async () => {
    const app = new Koa();
    app.use(errorMiddleware(() => undefined));
    app.use(createReadApi({ readModel, access: onlyAcme }));
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/read/v1/accounts`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('reads the account access allows', async () => {
    const res = await fetch(`${url}/acme/datasets/sales/aggregate?op=sum&field=n`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ op: 'sum', field: 'n', group_by: null, bucket: null, value: 3 });
  });

  it.each(['/globex/datasets', '/globex/datasets/sales', '/globex/datasets/sales/records', '/globex/datasets/sales/aggregate?op=count'])(
    'refuses %s before reading anything',
    async (route) => {
      reads.length = 0;
      const res = await fetch(`${url}${route}`);
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ error: expect.objectContaining({ message: 'This key reads only its own account', code: 'forbidden' }) });
      expect(reads).toEqual([]);
    },
  );

  it('checks the account before the query: a bad query for another account is 403, not 400', async () => {
    expect((await fetch(`${url}/globex/datasets/sales/records?limit=0`)).status).toBe(403);
    expect((await fetch(`${url}/acme/datasets/sales/records?limit=0`)).status).toBe(400);
  });
});

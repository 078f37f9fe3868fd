import type { Context, Middleware } from 'koa';
import Router from '@koa/router';
import type { ReadModel } from '@pushbase/contracts';
import { parseAccountName, parseAggregateQuery, parseDatasetId, parseRecordQuery } from '@pushbase/domain';
import { HttpError } from './errors';

/*
 * The read API for widgets (docs/read-api.md, docs/read-api.yaml): one account's datasets, a
 * dataset's records paged, sorted and filtered, and aggregates. JSON in the public API's error shape.
 * Every route names its account, and asks `access` whether the request may read it. read-side.ts mounts it
 * on both listeners with `sessionReadAccess`: the admin token reads every account, a key its own only.
 */

/** Throws (an HttpError 401/403/404) unless the request may read `account`'s datasets. */
export type ReadAccess = (ctx: Context, account: string) => Promise<void> | void;

/** On the admin listener the bearer token was checked before any route: every account is open to it. */
export const adminReadAccess: ReadAccess = () => undefined;

export const READ_API_PREFIX = '/read/v1';

export interface ReadApiDeps {
  readonly readModel: ReadModel;
  readonly access?: ReadAccess;
}

type Params = Readonly<Record<string, string | undefined>>;

function accountOf(params: Params): string {
  // The domain's account names (ACCOUNT_NAME): refused alike in both modes, and by every store.
  return parseAccountName(params.account ?? '');
}

const notFound = (id: string): HttpError => new HttpError(404, `Dataset not found: ${id}`, 'not_found');

/** The read API's routes, to mount on a listener that already runs the error middleware. */
export function createReadApi({ readModel, access = adminReadAccess }: ReadApiDeps): Middleware {
  const router = new Router({ prefix: READ_API_PREFIX });
  const scope = async (ctx: Context, params: Params): Promise<{ account: string; id: string }> => {
    const account = accountOf(params);
    await access(ctx, account);
    ctx.set('Cache-Control', 'no-store');
    return { account, id: params.id === undefined ? '' : parseDatasetId(params.id) };
  };
  router.get('/accounts/:account/datasets', async (ctx) => {
    const { account } = await scope(ctx, ctx.params);
    ctx.body = { datasets: await readModel.listDatasets(account) };
  });
  router.get('/accounts/:account/datasets/:id', async (ctx) => {
    const { account, id } = await scope(ctx, ctx.params);
    const dataset = (await readModel.listDatasets(account)).find((d) => d.id === id);
    if (dataset === undefined) throw notFound(id);
    ctx.body = dataset;
  });
  router.get('/accounts/:account/datasets/:id/records', async (ctx) => {
    const { account, id } = await scope(ctx, ctx.params);
    const page = await readModel.queryRecords(account, id, parseRecordQuery(ctx.query));
    if (page === undefined) throw notFound(id);
    ctx.body = page;
  });
  router.get('/accounts/:account/datasets/:id/aggregate', async (ctx) => {
    const { account, id } = await scope(ctx, ctx.params);
    const query = parseAggregateQuery(ctx.query);
    const result = await readModel.aggregate(account, id, query);
    if (result === undefined) throw notFound(id);
    ctx.body = { op: query.op, field: query.field, group_by: query.groupBy, bucket: query.bucket, ...result };
  });
  return router.routes() as Middleware;
}

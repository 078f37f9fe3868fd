import type { Context, Middleware, Next } from 'koa';
import type { KeyStore, Principal, ReadModel } from '@pushbase/contracts';
import type { KeyScope } from '@pushbase/domain';
import { HttpError } from './errors';
import { createReadApi, READ_API_PREFIX, type ReadAccess } from './read-api';
import { uiMiddleware } from './ui';

/*
 * The read side a user reaches (docs/read-api.md, docs/browser.md): the read API and the dataset browser page, mounted on both
 * listeners with the same routes and different credentials:
 * - the public listener (HTTPS, the address users already push to): an API key of the account, read or
 *   write scope, sent as the push API sends it (Basic, the key as user name), reads its own account only;
 * - the admin listener: the admin token (every account), or a key as above.
 * A read-only key is what a widget embed or a person at the page should hold: it can read and never write
 * (the gateway refuses it every method but GET and HEAD, app.ts).
 */

/** Who is reading: an account's key (account and scope), or the admin token (any account). */
export interface ReadSession {
  readonly account: string | null;
  readonly admin: boolean;
  readonly scope: KeyScope | null;
}

export const keySession = (p: Principal): ReadSession => ({ account: p.account, admin: false, scope: p.scope });
export const ADMIN_SESSION: ReadSession = { account: null, admin: true, scope: null };

const sessionOf = (ctx: Context): ReadSession => {
  const s = ctx.state.readSession as ReadSession | undefined;
  // The listeners set a session before any read route runs; reaching here without one is a wiring bug.
  if (s === undefined) throw new HttpError(401, 'A read-only key or the admin token is required', 'unauthorized');
  return s;
};

/** A key reads its own account; the admin token any. */
export const sessionReadAccess: ReadAccess = (ctx, account) => {
  const s = sessionOf(ctx);
  if (!s.admin && s.account !== account) throw new HttpError(403, "This key reads only its own account's datasets", 'other_account');
};

/** Whether a path is the read API's: without regard to case, as @koa/router matches the routes it leads to. */
export const isReadPath = (path: string): boolean => {
  const p = path.toLowerCase();
  return p === READ_API_PREFIX || p.startsWith(`${READ_API_PREFIX}/`);
};

export interface ReadSideDeps {
  readonly readModel: ReadModel;
  /** dist/ui (ui.ts findUiDir); undefined: the page answers 404 saying how to build it. */
  readonly uiDir: string | undefined;
  /**
   * Public listener: read requests per minute per key, counted apart from the push API's limit (the page
   * polls once a second, and reads must not use up a key's writes). 600 unless configured.
   */
  readonly ratePerMinute?: number;
}

/** `GET /read/v1/session` (who the page signed in as) and the read API's routes. */
export function readRoutes(readModel: ReadModel): Middleware {
  const api = createReadApi({ readModel, access: sessionReadAccess });
  return async (ctx: Context, next: Next) => {
    if (ctx.path.toLowerCase() === `${READ_API_PREFIX}/session` && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      ctx.set('Cache-Control', 'no-store');
      ctx.body = sessionOf(ctx);
      return;
    }
    await api(ctx, next);
  };
}

/** The page's files, served before authentication (they hold no data; the page signs in through the API). */
export const pageRoutes = (uiDir: string | undefined, options: { readonly redirectRoot?: boolean } = {}): Middleware => uiMiddleware(uiDir, options) as Middleware;

/** On the admin listener: a key (Basic or Bearer) opens the read routes only, for its own account. */
export async function keyReadSession(keys: KeyStore | undefined, presented: string | undefined): Promise<ReadSession | undefined> {
  if (keys === undefined || presented === undefined) return undefined;
  const p = await keys.resolve(presented);
  return p === undefined ? undefined : keySession(p);
}

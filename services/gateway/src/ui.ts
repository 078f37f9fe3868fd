import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Context, Next } from 'koa';

/*
 * The dataset browser page (docs/browser.md), served by both listeners beside the read API it calls (read-side.ts):
 * the files scripts/build.js puts in dist/ui (index.html, styles.css, app.js with chart.js bundled in, its
 * source map and licence notes). Written here rather than with a static-file middleware on purpose: the
 * set of files is fixed at build time, so they are read once into memory and matched by exact name — no
 * request path ever reaches the file system, so there is no traversal to guard against — and each answer
 * carries the page's own Content-Security-Policy (everything from this origin only; no CDN, no inline script).
 */

export const UI_PATH = '/ui/';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

// Chart.js sizes its canvas through the style property (CSSOM), which style-src does not govern.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

/** Where the built page is: beside the bundle (dist/pushbase.js → dist/ui), or the repository's dist/ui when run from source. */
export function findUiDir(explicit?: string): string | undefined {
  const candidates = explicit !== undefined ? [explicit] : [path.join(__dirname, 'ui'), path.resolve(__dirname, '../../../dist/ui')];
  return candidates.find((dir) => existsSync(path.join(dir, 'index.html')));
}

export function loadUiAssets(dir: string): ReadonlyMap<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[path.extname(name)];
    if (type === undefined) continue;
    const body = readFileSync(path.join(dir, name));
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return assets;
}

/**
 * Koa middleware: GET/HEAD of `/ui` (and of `/` with `redirectRoot`: not on the public listener, where `/`
 * is the API's ping) redirect to `/ui/`; `/ui/<name>` serves a built file; anything else passes on. Without
 * a built page (`dir` undefined) `/ui/` answers 404 saying how to build it.
 */
export function uiMiddleware(dir: string | undefined, options: { readonly redirectRoot?: boolean } = {}): (ctx: Context, next: Next) => Promise<void> {
  const assets = dir === undefined ? new Map<string, Asset>() : loadUiAssets(dir);
  return async (ctx, next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      await next();
      return;
    }
    if (ctx.path === '/ui' || (options.redirectRoot === true && ctx.path === '/')) {
      ctx.redirect(UI_PATH);
      return;
    }
    if (!ctx.path.startsWith(UI_PATH)) {
      await next();
      return;
    }
    const name = ctx.path === UI_PATH ? 'index.html' : ctx.path.slice(UI_PATH.length);
    const asset = assets.get(name);
    if (asset === undefined) {
      ctx.status = 404;
      ctx.body = { error: { message: dir === undefined ? 'The page is not built: run `npm run build`' : `No such file: ${ctx.path}` } };
      return;
    }
    ctx.set('Content-Security-Policy', CSP);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('ETag', asset.etag);
    if (ctx.get('If-None-Match') === asset.etag) {
      ctx.status = 304;
      return;
    }
    ctx.type = asset.type;
    ctx.body = asset.body;
  };
}

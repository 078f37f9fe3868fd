import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import Koa from 'koa';
import { findUiDir, uiMiddleware } from '../src/ui';

describe('the page files (ui.ts)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pb-ui-'));
  writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>t</title>');
  writeFileSync(path.join(dir, 'app.js'), 'console.log(1)');
  writeFileSync(path.join(dir, 'notes.exe'), 'not served');
  let server: Server;
  let base: string;
  const serve = async (ui: Koa.Middleware): Promise<void> => {
    const app = new Koa();
    app.use(ui);
    app.use((ctx) => {
      ctx.body = { passed: ctx.path };
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  afterEach(() => server.close());
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('serves the built files from memory with the page CSP, revalidated by ETag', async () => {
    await serve(uiMiddleware(dir, { redirectRoot: true }));
    const index = await fetch(`${base}/ui/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(index.headers.get('x-content-type-options')).toBe('nosniff');
    const js = await fetch(`${base}/ui/app.js`);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const again = await fetch(`${base}/ui/app.js`, { headers: { 'If-None-Match': js.headers.get('etag') ?? '' } });
    expect(again.status).toBe(304);
  });

  it('serves only the built files by exact name: no other file, no path outside', async () => {
    await serve(uiMiddleware(dir));
    // (A client normalises /ui/../x to /x itself; an encoded slash reaches the server as it is.)
    for (const p of ['/ui/notes.exe', '/ui/..%2F..%2Fetc%2Fpasswd', '/ui/..%2Fapp.js', '/ui/sub/app.js']) {
      expect({ p, status: (await fetch(`${base}${p}`)).status }).toEqual({ p, status: 404 });
    }
  });

  it('redirects /ui (and / where asked) to /ui/, and passes every other path and method on', async () => {
    await serve(uiMiddleware(dir));
    expect((await fetch(`${base}/ui`, { redirect: 'manual' })).headers.get('location')).toBe('/ui/');
    expect(await (await fetch(`${base}/`)).json()).toEqual({ passed: '/' });
    expect(await (await fetch(`${base}/ui/`, { method: 'POST' })).json()).toEqual({ passed: '/ui/' });
    server.close();
    await serve(uiMiddleware(dir, { redirectRoot: true }));
    expect((await fetch(`${base}/`, { redirect: 'manual' })).headers.get('location')).toBe('/ui/');
  });

  it('says how to build the page when it is not built', async () => {
    await serve(uiMiddleware(undefined));
    const res = await fetch(`${base}/ui/`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { message: 'The page is not built: run `npm run build`' } });
    expect(findUiDir(path.join(dir, 'nowhere'))).toBeUndefined();
    expect(findUiDir(dir)).toBe(dir);
  });
});

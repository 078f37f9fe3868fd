import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { PageFunction } from 'playwright-core/types/structs';
import { adminRequest, E2E_MODE, ROOT, TestServer, type Response } from '../helpers/server';
import { appendAll, createDataset, field, uid, UNLIMITED } from './support';
import { eventually } from '../helpers/eventually';

/*
 * The dataset browser page (docs/browser.md) in a real headless Chromium (Debian's, driven by playwright-core
 * through its path: scripts/ensure-chromium.js), in both modes (the e2e-distributed project runs this file
 * against the four services with ClickHouse behind the read side): a user signs in on the public port with a
 * read-only key, opens a dataset with the keyboard, sees the newest records and the chart's values, pushes
 * more and sees them appear without a reload; an operator signs in on the admin listener with the admin
 * token. At a phone's size, with no console error (the page's CSP included). Screenshots go to
 * test-output/browser/ for a person to look at.
 */

const SHOTS = path.join(ROOT, 'test-output', 'browser');

let s: TestServer;
let browser: Browser;
const account = uid('viewer');
let readKey: string;
let writeKey: string;

const adminCall = (method: string, route: string, body?: unknown): Promise<Response> => adminRequest(s, method, route, body);

beforeAll(async () => {
  const executablePath = process.env.PUSHBASE_CHROMIUM;
  if (executablePath === undefined) throw new Error(`no Chromium for this suite: ${process.env.PUSHBASE_CHROMIUM_ERROR ?? 'PUSHBASE_CHROMIUM is unset (test/global-setup.js sets it)'}`);
  mkdirSync(SHOTS, { recursive: true });
  s = await new TestServer({ env: UNLIMITED }).start();
  expect((await adminCall('POST', '/admin/accounts', { account })).status).toBe(201);
  const read = await adminCall('POST', `/admin/accounts/${account}/keys`, { scope: 'read', label: 'browser test' });
  const write = await adminCall('POST', `/admin/accounts/${account}/keys`, { scope: 'write', label: 'browser test pushes' });
  expect([read.status, write.status]).toEqual([201, 201]);
  readKey = read.body.key;
  writeKey = write.body.key;
  // --no-sandbox: the tests may run as root (CI machines here do), where Chromium's sandbox refuses to start.
  browser = await chromium.launch({ executablePath, args: ['--no-sandbox'], headless: true });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

interface Watched {
  readonly context: BrowserContext;
  readonly page: Page;
  readonly problems: string[];
  navigations: number;
}

/** A phone-sized page that records console errors, page errors and navigations. */
async function phonePage(): Promise<Watched> {
  // The public port's certificate is the self-signed one the server generated.
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true, ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const w: Watched = { context, page, problems: [], navigations: 0 };
  page.on('console', (m) => {
    if (m.type() === 'error') w.problems.push(`console: ${m.text()} at ${m.location().url}`);
  });
  page.on('pageerror', (e) => w.problems.push(`page error: ${e.message}`));
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) w.navigations++;
  });
  return w;
}

/*
 * What runs in the page is given as text: the test project's TypeScript has Node's types, not the DOM's
 * (the page's own code is checked with the DOM types in services/ui).
 */

/** The visible rows of a table body as text cells. */
const rowsOf = (page: Page, table: string): Promise<string[][]> =>
  page.evaluate(`[...document.querySelectorAll('#${table} tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim()))`);

/**
 * Waits until `predicate(arg)`, run in the page, is true. A function, not text: waitForFunction evaluates text
 * with eval, which the page's CSP forbids (as it should); `document` is reached through globalThis.
 */
const until = <A>(page: Page, predicate: (arg: A) => unknown, arg: A, timeout = 30_000): Promise<unknown> => page.waitForFunction(predicate as PageFunction<A, unknown>, arg, { timeout });

describe(`the dataset browser page (${E2E_MODE})`, () => {
  const id = uid('sales');

  beforeAll(async () => {
    await createDataset(s, writeKey, id, { day: field('date', 'Day'), team: field('string', 'Team'), amount: field('number', 'Amount') });
    await appendAll(s, writeKey, id, [
      { day: '2024-03-01', team: 'red', amount: 10 },
      { day: '2024-03-01', team: 'blue', amount: 5 },
      { day: '2024-03-02', team: 'red', amount: 7 },
    ]);
    await s.caughtUp();
  });

  it('signs in with a read-only key, shows the table and the chart, and follows pushes without a reload', async () => {
    const w = await phonePage();
    const { page } = w;
    const first = await page.goto(`${s.baseUrl}/ui/`);
    expect(first?.status()).toBe(200);
    expect(first?.headers()['content-security-policy']).toMatch(/default-src 'none'/);

    // Keyboard only: the label names the field, Enter submits.
    await page.getByLabel('Key or admin token').fill(readKey);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`#datasets-table tbody tr[data-id="${id}"]`);
    expect(await page.textContent('#who')).toContain(`Read-only key · account ${account}`);
    const listed = await rowsOf(page, 'datasets-table');
    expect(listed).toContainEqual([id, '3', expect.any(String)]);

    await page.focus(`#datasets-table tbody tr[data-id="${id}"]`);
    await page.keyboard.press('Enter');
    await until(page, (want) => (globalThis as any).document.querySelector('#dataset-title')?.textContent === want, id);
    await until(page, () => (globalThis as any).document.querySelectorAll('#records-table tbody tr').length === 3, undefined);
    // Newest first; columns in definition order (Day, Team, Amount).
    expect(await rowsOf(page, 'records-table')).toEqual([
      ['2024-03-02', 'red', '7'],
      ['2024-03-01', 'blue', '5'],
      ['2024-03-01', 'red', '10'],
    ]);
    // The chart: the sum of Amount per day, drawn on the canvas and given as a table beside it. It is drawn
    // from a read of its own after the records table (in distributed mode a ClickHouse query later).
    await until(page, () => (globalThis as any).document.querySelector('#chart')?.getAttribute('aria-label') !== null, undefined, 10_000);
    expect(await page.getAttribute('#chart', 'aria-label')).toBe('Line chart: sum of Amount by Day per day, 2 points');
    expect(await rowsOf(page, 'chart-table')).toEqual([
      ['2024-03-01', '15'],
      ['2024-03-02', '7'],
    ]);
    expect(await page.evaluate(`document.querySelector('#chart').width > 0 && document.querySelector('#chart').height > 0`)).toBe(true);
    // Usable on a phone: nothing wider than the screen but the tables' own scroll boxes.
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await page.screenshot({ path: path.join(SHOTS, `dataset-${E2E_MODE}-before.png`), fullPage: true });

    // A push lands on the page by itself, within about a second (plus the projector in distributed mode).
    const navigations = w.navigations;
    const pushed = Date.now();
    await appendAll(s, writeKey, id, [{ day: '2024-03-03', team: 'green', amount: 4 }]);
    await until(page, () => (globalThis as any).document.querySelector('#records-table tbody tr td')?.textContent === '2024-03-03', undefined, 15_000);
    const seenAfterMs = Date.now() - pushed;
    // The chart is redrawn from its own read, a moment after the table.
    await until(page, () => (globalThis as any).document.querySelectorAll('#chart-table tbody tr').length === 3, undefined, 5_000);
    expect(await rowsOf(page, 'chart-table')).toEqual([
      ['2024-03-01', '15'],
      ['2024-03-02', '7'],
      ['2024-03-03', '4'],
    ]);
    expect(w.navigations).toBe(navigations);
    process.stderr.write(`browser page (${E2E_MODE}): a push showed after ${seenAfterMs} ms\n`);

    // Another grouping, chosen with the form: a bar chart of Amount per Team.
    await page.selectOption('#chart-by', 'team');
    await until(page, () => (globalThis as any).document.querySelector('#chart')?.getAttribute('aria-label')?.startsWith('Bar chart'), undefined);
    await eventually(async () => {
      const rows = await rowsOf(page, 'chart-table');
      return JSON.stringify(rows) === JSON.stringify([['blue', '5'], ['green', '4'], ['red', '17']]) ? rows : undefined;
    });
    await page.screenshot({ path: path.join(SHOTS, `dataset-${E2E_MODE}-after.png`), fullPage: true });
    expect(w.problems).toEqual([]);
    await w.context.close();
  }, 120_000);

  it('refuses a wrong key on the sign-in form, and a key reads only its own account', async () => {
    const w = await phonePage();
    await w.page.goto(`${s.baseUrl}/ui/`);
    await w.page.getByLabel('Key or admin token').fill('not-a-key-of-anyone');
    await w.page.keyboard.press('Enter');
    await until(w.page, () => ((globalThis as any).document.querySelector('#sign-in-error')?.textContent ?? '') !== '', undefined);
    expect(await w.page.textContent('#sign-in-error')).toBe('That is not a valid key or admin token.');
    const other = await w.page.evaluate(`fetch('/read/v1/accounts/someone-else/datasets', { credentials: 'omit', headers: { Authorization: 'Basic ' + btoa(${JSON.stringify(readKey)} + ':') } }).then((r) => r.status)`);
    expect(other).toBe(403);
    // The browser reports each refused request (the sign-in's 401s, the other account's 403) and nothing else.
    expect(w.problems.filter((p) => !/status of 40[13]/.test(p))).toEqual([]);
    await w.context.close();
  }, 60_000);

  it('signs an operator in on the admin listener with the admin token and an account', async () => {
    const w = await phonePage();
    const res = await w.page.goto(`http://127.0.0.1:${s.adminPort}/`);
    expect(new URL(w.page.url()).pathname).toBe('/ui/');
    expect(res?.status()).toBe(200);
    await w.page.getByLabel('Key or admin token').fill(s.adminToken);
    await w.page.getByLabel(/^Account/).fill(account);
    await w.page.keyboard.press('Enter');
    await w.page.waitForSelector(`#datasets-table tbody tr[data-id="${id}"]`);
    expect(await w.page.textContent('#who')).toContain(`Admin token · account ${account}`);
    await w.page.screenshot({ path: path.join(SHOTS, `datasets-${E2E_MODE}-admin.png`), fullPage: true });
    expect(w.problems.filter((p) => !/401/.test(p))).toEqual([]);
    await w.context.close();
  }, 60_000);
});

/*
 * The official `geckoboard` npm client (v2), unchanged, against the real server over HTTPS.
 *
 * How it is pointed: the client reads GECKOBOARD_API_HOST in its constructor (not at load time), so the
 * variable is set before each `new Geckoboard(key)`.
 * How it is trusted: the client calls `fetch` from the `undici` package, which uses undici's global
 * dispatcher. In this process that dispatcher is replaced by an Agent that trusts exactly the server's
 * self-signed certificate (`ca`), so verification stays on. A second test runs the client in a child
 * `node` with NODE_EXTRA_CA_CERTS=<the printed cert file> — what an operator would do — and checks that
 * without it the certificate is refused (so nothing here passes by switching verification off).
 */
import { spawn } from 'node:child_process';
import { Geckoboard } from 'geckoboard';
import { Agent, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import { ROOT, TestServer } from '../helpers/server';

const ACCOUNT = 'acme';

let s: TestServer;
let agent: Agent;
let previousDispatcher: Dispatcher;
const previousHost = process.env.GECKOBOARD_API_HOST;

beforeAll(async () => {
  s = await new TestServer().start();
  previousDispatcher = getGlobalDispatcher();
  agent = new Agent({ connect: { ca: s.ca } });
  setGlobalDispatcher(agent);
  process.env.GECKOBOARD_API_HOST = s.baseUrl;
});

afterAll(async () => {
  if (previousHost === undefined) delete process.env.GECKOBOARD_API_HOST;
  else process.env.GECKOBOARD_API_HOST = previousHost;
  if (previousDispatcher !== undefined) setGlobalDispatcher(previousDispatcher);
  await agent?.close();
  await s?.stop();
});

const client = (key: string = s.keys[ACCOUNT]!): Geckoboard => new Geckoboard(key);

/** The datasets of an account as the admin read side lists them. */
async function listing(account: string): Promise<{ id: string; record_count: number }[]> {
  const res = await s.admin(`/admin/accounts/${account}/datasets`);
  expect(res.status).toBe(200);
  return res.body.datasets as { id: string; record_count: number }[];
}

const DAY0 = Date.UTC(2024, 0, 1);
const isoDay = (offset: number): string => new Date(DAY0 + offset * 86_400_000).toISOString().slice(0, 10);

test('the client is pointed at pushbase by GECKOBOARD_API_HOST', () => {
  expect(client().apiHost).toBe(s.baseUrl);
});

test('ping succeeds with a valid key', async () => {
  await expect(client().ping()).resolves.toBeUndefined();
});

test('a bad key surfaces our message "Your API key is invalid"', async () => {
  await expect(new Geckoboard('not-a-real-key').ping()).rejects.toThrow(new Error('Your API key is invalid'));
  await expect(
    new Geckoboard('not-a-real-key').defineDataset({ id: 'never.created', fields: { n: { type: 'number', name: 'N' } }, uniqueBy: [] }).create(),
  ).rejects.toThrow(new Error('Your API key is invalid'));
});

test('create, create again (found), append with deleteBy, replace, delete', async () => {
  const gb = client();
  const fields = {
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'At', optional: true },
    n: { type: 'number', name: 'N' },
    label: { type: 'string', name: 'Label', optional: true },
    amount: { type: 'money', name: 'Amount', currency_code: 'USD', optional: true },
  } as const;
  const id = 'client.sales.by_day';
  const dataset = gb.defineDataset({ id, fields, uniqueBy: [] });

  await dataset.create();
  expect(await listing(ACCOUNT)).toContainEqual(expect.objectContaining({ id, record_count: 0 }));

  // 5000 records in ten appends of 500. Insertion order runs against time order: record n has day
  // 49 - floor(n / 100), so the first records inserted carry the newest days and the oldest day
  // (2024-01-01) holds the 100 records inserted last.
  for (let batch = 0; batch < 10; batch++) {
    const items = Array.from({ length: 500 }, (_, i) => {
      const n = batch * 500 + i;
      return { day: isoDay(49 - Math.floor(n / 100)), n };
    });
    await dataset.append(items);
  }
  let stored = await s.records(ACCOUNT, id);
  expect(stored).toHaveLength(5000);
  expect(stored[0]).toEqual({ day: isoDay(49), at: null, n: 0, label: null, amount: null });

  // Creating it again finds it: no error, and the records are still there.
  await expect(gb.defineDataset({ id, fields, uniqueBy: [] }).create()).resolves.toBeUndefined();
  expect((await listing(ACCOUNT)).filter((d) => d.id === id)).toEqual([expect.objectContaining({ id, record_count: 5000 })]);
  // The same call create() makes, through the client's public request(), to see the status: 200 = found.
  const again = await gb.request('PUT', `/datasets/${id}`, { fields, unique_by: [] });
  expect(again.status).toBe(200);
  expect(await again.json()).toMatchObject({ id, fields: { day: { type: 'date', name: 'Day' } } });

  // Creating it with another definition is refused, and the client surfaces our message.
  await expect(gb.defineDataset({ id, fields: { n: { type: 'number', name: 'N' } }, uniqueBy: [] }).create()).rejects.toThrow(
    `A dataset with different fields already exists with the ID "${id}"`,
  );

  // The client sends `deleteBy` (camelCase). Date objects are turned into strings by the client.
  // One record too many → by day, the oldest day goes whole (100 records) → 4901 remain. Insertion-order
  // truncation would instead have dropped record 0 (the newest day) and kept 5000.
  await dataset.append([{ day: new Date(Date.UTC(2024, 2, 1)), at: new Date(Date.UTC(2024, 2, 1, 12, 30, 0, 250)), n: 5000, label: 'late', amount: 1999 }], 'day');
  stored = await s.records(ACCOUNT, id);
  expect(stored).toHaveLength(4901);
  expect(stored.filter((r) => r.day === isoDay(0))).toEqual([]);
  expect(stored.filter((r) => r.day === isoDay(1))).toHaveLength(100);
  expect(stored[0]).toEqual({ day: isoDay(49), at: null, n: 0, label: null, amount: null });
  expect(stored[stored.length - 1]).toEqual({ day: '2024-03-01', at: '2024-03-01T12:30:00.250Z', n: 5000, label: 'late', amount: 1999 });

  // Replace: exactly the given records remain.
  await dataset.replace([
    { day: '2024-04-01', n: 1, label: 'first' },
    { day: new Date(Date.UTC(2024, 3, 2)), at: '2024-04-02T08:00:00+02:00', n: 2, amount: 0 },
  ]);
  expect(await s.records(ACCOUNT, id)).toEqual([
    { day: '2024-04-01', at: null, n: 1, label: 'first', amount: null },
    { day: '2024-04-02', at: '2024-04-02T06:00:00.000Z', n: 2, label: null, amount: 0 },
  ]);

  // A record that breaks the schema is refused whole, with a message that names it.
  await expect(dataset.append([{ day: '2024-04-03', n: 3 }, { day: 'yesterday', n: 4 }])).rejects.toThrow(/Record 1 .*"day"/);
  expect(await s.records(ACCOUNT, id)).toHaveLength(2);

  // Replace with nothing clears the records and keeps the schema.
  await dataset.replace([]);
  expect(await s.records(ACCOUNT, id)).toEqual([]);

  await dataset.delete();
  expect((await listing(ACCOUNT)).map((d) => d.id)).not.toContain(id);
  expect((await s.admin(`/admin/accounts/${ACCOUNT}/datasets/${id}/records`)).status).toBe(404);
  await expect(dataset.append([{ day: '2024-04-03', n: 3 }])).rejects.toThrow(new Error('Dataset not found'));
  await expect(dataset.delete()).rejects.toThrow(new Error('Dataset not found'));
});

test('uniqueBy through the client merges records', async () => {
  const dataset = client().defineDataset({
    id: 'client.unique',
    fields: { day: { type: 'date', name: 'Day' }, visits: { type: 'number', name: 'Visits' } },
    uniqueBy: ['day'],
  });
  await dataset.create();
  await dataset.append([
    { day: '2024-01-01', visits: 1 },
    { day: '2024-01-02', visits: 2 },
  ]);
  await dataset.append([{ day: '2024-01-01', visits: 10 }]);
  expect(await s.records(ACCOUNT, 'client.unique')).toEqual([
    { day: '2024-01-02', visits: 2 },
    { day: '2024-01-01', visits: 10 },
  ]);
});

/** Runs the unchanged client in a child node, which trusts the server only through NODE_EXTRA_CA_CERTS. */
function runClientInChild(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const script = `
    const { Geckoboard } = require('geckoboard');
    const gb = new Geckoboard(process.env.GB_KEY);
    const ds = gb.defineDataset({ id: 'child.dataset', fields: { n: { type: 'number', name: 'N' } }, uniqueBy: [] });
    gb.ping()
      .then(() => ds.create())
      .then(() => ds.append([{ n: 1 }, { n: 2 }]))
      .then(() => console.log(JSON.stringify({ ok: true })))
      .catch((e) => console.log(JSON.stringify({ ok: false, message: e.message, cause: e.cause && e.cause.code })));
  `;
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'NODE_EXTRA_CA_CERTS' && k !== 'NODE_TLS_REJECT_UNAUTHORIZED') base[k] = v;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, out }));
  });
}

test('in a child process the client trusts the server through NODE_EXTRA_CA_CERTS, and only then', async () => {
  expect(s.certFile).not.toBe('');
  const env = { GECKOBOARD_API_HOST: s.baseUrl, GB_KEY: s.keys.globex! };

  const untrusted = await runClientInChild(env);
  expect(untrusted.code).toBe(0);
  expect(JSON.parse(untrusted.out.trim())).toEqual({ ok: false, message: 'fetch failed', cause: expect.stringMatching(/SELF_SIGNED|UNABLE_TO_VERIFY/) });

  const trusted = await runClientInChild({ ...env, NODE_EXTRA_CA_CERTS: s.certFile });
  expect(trusted.code).toBe(0);
  expect(JSON.parse(trusted.out.trim())).toEqual({ ok: true });
  expect(await s.records('globex', 'child.dataset')).toEqual([{ n: 1 }, { n: 2 }]);
});

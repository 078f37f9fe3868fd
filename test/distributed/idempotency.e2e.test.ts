import type { ServiceProcess } from '../../services/cli/src/distributed';
import { samples, scrape } from '../helpers/metrics';
import { requestTo, startRecordsReplica, startSecondGateway, TestServer, type Response } from '../helpers/server';

/*
 * Idempotency-Keys across the distributed services' own failures: the attempts of one write sent to two
 * gateways; the records service killed (kill -9) between the attempts, and killed during the first attempt
 * (its claim then outlives it and is settled from the log once its lease is over, never guessed); and two
 * records processes: the second gateway balances over both (PUSHBASE_RECORDS_ADDRESS with two entries),
 * so a write cut by the death of one is retried on the other while the first stays dead; and the schema
 * service killed during keyed creates and deletes.
 */

jest.setTimeout(300_000);

const DEFINITION = { fields: { n: { type: 'number', name: 'N' } } };
// A 3 s append deadline makes a killed attempt's lease about 19 s (services/records/src/config.ts); the
// schema service's is its lock's TTL, append deadline and sweep plus 5 s, here 15 s (services/schema/src/config.ts).
const ENV = {
  PUSHBASE_RATE_LIMIT_PER_MINUTE: '100000',
  PUSHBASE_RECORDS_APPEND_TIMEOUT_MS: '3000',
  PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS: '3000',
  PUSHBASE_SCHEMA_LOCK_TTL_MS: '6000',
  PUSHBASE_SCHEMA_SWEEP_MS: '1000',
};

type Gateway = { readonly port: number; readonly ca: string; readonly plainHttp: boolean };

let stack: TestServer;
/** A second records process (records #2); the stack's own is records #1, the only one `stack`'s gateway dials. */
let replica: ServiceProcess;
/** A second gateway, over both records processes. */
let second: ServiceProcess;
let other: Gateway;

beforeAll(async () => {
  stack = await new TestServer({ mode: 'distributed', env: ENV }).start();
  replica = await startRecordsReplica(stack);
  second = await startSecondGateway(stack, { PUSHBASE_RECORDS_ADDRESS: `${stack.stack!.addresses.records},127.0.0.1:${String(replica.ready.grpc_port)}` });
  other = { port: Number(second.ready.port), ca: stack.ca, plainHttp: false };
}, 240_000);

afterAll(async () => {
  await second?.signal('SIGTERM', 30_000);
  await replica?.signal('SIGTERM', 30_000);
  await stack?.stop();
}, 120_000);

/** Appends a records process has answered, by its metrics. */
const appendsServed = async (metricsPort: number): Promise<number> =>
  samples(await scrape(metricsPort), 'pushbase_grpc_server_handling_seconds_count')
    .filter((s) => s.labels.method === 'Append')
    .reduce((n, s) => n + s.value, 0);

let n = 0;
async function createDataset(): Promise<string> {
  const id = `idem-${process.pid}-${n++}`;
  expect((await stack.request('PUT', `/datasets/${id}`, { key: stack.keys.acme!, body: DEFINITION })).status).toBe(201);
  return id;
}
const append = (gateway: Gateway, id: string, key: string, records = 1): Promise<Response> =>
  requestTo(gateway, 'POST', `/datasets/${id}/data`, { key: stack.keys.acme!, body: { data: Array.from({ length: records }, (_, i) => ({ n: i })) }, headers: { 'Idempotency-Key': key } });
async function untilAnswered(send: () => Promise<Response>, deadlineMs = 120_000): Promise<{ res: Response; conflicts: number }> {
  const until = Date.now() + deadlineMs;
  let conflicts = 0;
  for (;;) {
    const res: Response = await send().catch((e: unknown) => ({ status: 0, headers: {}, text: String(e), body: undefined }));
    // 409: an attempt holds the key; 0 or 503: the records service is restarting (nothing was applied).
    if (![0, 409, 503].includes(res.status) || Date.now() > until) return { res, conflicts };
    if (res.status === 409) conflicts += 1;
    await new Promise((r) => setTimeout(r, Number(res.headers['retry-after'] ?? '1') * 1000));
  }
}

it('applies once the attempts of a write sent to two gateways', async () => {
  const id = await createDataset();
  const answers = await Promise.all([append(stack, id, 'two-gateways'), append(other, id, 'two-gateways')]);
  // Both at once: one is applied, the other replays it or is told the key is in flight.
  expect(answers.map((a) => a.status).sort()).toEqual(expect.arrayContaining([200]));
  for (const a of answers) expect([200, 409]).toContain(a.status);
  for (const gateway of [other, stack]) expect((await append(gateway, id, 'two-gateways')).headers['idempotent-replayed']).toBe('true');
  expect(await stack.records('acme', id)).toHaveLength(1);
});

it('replays after kill -9 of the records service between the attempts', async () => {
  const id = await createDataset();
  expect((await append(stack, id, 'records-killed')).status).toBe(200);
  await stack.stack!.kill('records');
  await stack.stack!.restart('records');
  const { res } = await untilAnswered(() => append(other, id, 'records-killed'));
  expect({ status: res.status, replayed: res.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: 'true' });
  expect(await stack.records('acme', id)).toHaveLength(1);
});

it('settles attempts cut by kill -9 of the records service: applied exactly once after the lease', async () => {
  const id = await createDataset();
  // 300 records each (3600 in all, inside the window), so that the kill finds some of them between their claim and their answer.
  const keys = Array.from({ length: 12 }, (_, i) => `records-died-${i}`);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const first = await Promise.all([
    // Staggered across the moment of the kill: some answered, some never sent on, some cut mid-attempt.
    ...keys.map((key, i) => sleep(i * 15).then(() => append(stack, id, key, 300).catch(() => undefined))),
    sleep(100).then(() => stack.stack!.kill('records')),
  ]);
  const cut = first.slice(0, keys.length).filter((a) => a === undefined || (a as Response).status !== 200).length;
  await stack.stack!.restart('records');
  let conflicts = 0;
  for (const key of keys) {
    const answered = await untilAnswered(() => append(key.endsWith('0') ? stack : other, id, key, 300));
    expect(answered.res.status).toBe(200);
    conflicts += answered.conflicts;
  }
  expect(await stack.records('acme', id)).toHaveLength(keys.length * 300);
  process.stderr.write(`first attempts cut by the kill: ${cut}; retries told 409 while a lease ran: ${conflicts}\n`);
});

it('two records processes: a keyed append cut by kill -9 of records #1 is retried on records #2, applied exactly once', async () => {
  const id = await createDataset();
  const replicaMetrics = Number(replica.ready.metrics_port);
  // The second gateway spreads calls over both records processes.
  const ownMetrics = stack.stack!.metricsPort('records')!;
  const [own0, replica0] = [await appendsServed(ownMetrics), await appendsServed(replicaMetrics)];
  for (let i = 0; i < 6; i++) expect((await append(other, id, `spread-${i}`)).status).toBe(200);
  expect({ own: (await appendsServed(ownMetrics)) - own0, replica: (await appendsServed(replicaMetrics)) - replica0 }).toEqual({ own: 3, replica: 3 });

  // Every first attempt goes to records #1 (the first gateway dials only it), staggered across its kill.
  const keys = Array.from({ length: 12 }, (_, i) => `replica-${i}`);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const first = await Promise.all([
    ...keys.map((key, i) => sleep(i * 15).then(() => append(stack, id, key, 300).catch(() => undefined))),
    sleep(100).then(() => stack.stack!.kill('records')),
  ]);
  // 500 outcome_unknown: cut mid-flight; 503: refused after the kill, never sent; none: the connection cut.
  const statuses = first.slice(0, keys.length).map((a) => (a === undefined ? 'none' : String((a as Response).status)));
  const cut = statuses.filter((a) => a !== '200').length;
  try {
    // Records #1 stays dead: every answer from here on is records #2's.
    const served = await appendsServed(replicaMetrics);
    let conflicts = 0;
    for (const key of keys) {
      const answered = await untilAnswered(() => append(other, id, key, 300));
      expect(answered.res.status).toBe(200);
      conflicts += answered.conflicts;
    }
    expect(stack.stack!.pid('records')).toBeUndefined();
    expect(await appendsServed(replicaMetrics)).toBeGreaterThanOrEqual(served + keys.length);
    expect(await stack.records('acme', id)).toHaveLength(6 + keys.length * 300);
    process.stderr.write(`two records processes: first attempts on #1 cut by its kill: ${cut} (answers: ${statuses.join(' ')}); retries on #2 told 409 while a lease ran: ${conflicts}\n`);
  } finally {
    await stack.stack!.restart('records');
  }
});

it('kill -9 of the schema service during keyed creates and deletes: each retry gets the first outcome, applied once', async () => {
  const acme = stack.keys.acme!;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const created = Array.from({ length: 8 }, () => `idem-create-${process.pid}-${n++}`);
  const doomed: string[] = [];
  for (let i = 0; i < 8; i++) doomed.push(await createDataset());
  // A 503 (nothing sent) while the gateway reconnects to a records process restarted by an earlier test.
  for (const id of doomed) expect((await untilAnswered(() => append(stack, id, `before-delete-${id}`))).res.status).toBe(200);
  const create = (gateway: Gateway, id: string) => requestTo(gateway, 'PUT', `/datasets/${id}`, { key: acme, body: DEFINITION, headers: { 'Idempotency-Key': `create-${id}` } });
  const remove = (gateway: Gateway, id: string) => requestTo(gateway, 'DELETE', `/datasets/${id}`, { key: acme, headers: { 'Idempotency-Key': `delete-${id}` } });

  // Creates and deletes staggered across the kill: some answered, some cut in the schema service, some refused.
  const first = await Promise.all([
    ...created.map((id, i) => sleep(i * 30).then(() => create(stack, id).catch(() => undefined))),
    ...doomed.map((id, i) => sleep(15 + i * 30).then(() => remove(stack, id).catch(() => undefined))),
    sleep(150).then(() => stack.stack!.kill('schema')),
  ]);
  const statuses = first.slice(0, created.length + doomed.length).map((a) => (a === undefined ? 'none' : String((a as Response).status)));
  await stack.stack!.restart('schema');

  // A retry is refused (409 in flight, 503) until the first attempt is settled; then it gets its outcome:
  // a create's 201 (a create run twice would find the dataset and answer 200), a delete's 200 (twice: 404).
  let conflicts = 0;
  const bodies = new Map<string, unknown>();
  for (const [i, id] of created.entries()) {
    const { res, conflicts: c } = await untilAnswered(() => create(i % 2 === 0 ? stack : other, id));
    conflicts += c;
    expect({ id, status: res.status, name: res.body?.id, fields: Object.keys(res.body?.fields ?? {}) }).toEqual({ id, status: 201, name: id, fields: ['n'] });
    bodies.set(id, res.body);
  }
  for (const [i, id] of doomed.entries()) {
    const { res, conflicts: c } = await untilAnswered(() => remove(i % 2 === 0 ? stack : other, id));
    conflicts += c;
    expect({ id, status: res.status }).toEqual({ id, status: 200 });
  }
  // Settled: every attempt from now on is a replay of that outcome, through either gateway.
  for (const id of created) {
    const res = await create(other, id);
    // The whole first body again, its definition included (the key keeps none: parsed from this body).
    expect({ status: res.status, replayed: res.headers['idempotent-replayed'], body: res.body }).toEqual({ status: 201, replayed: 'true', body: bodies.get(id) });
  }
  for (const id of doomed) {
    const res = await remove(other, id);
    expect({ status: res.status, replayed: res.headers['idempotent-replayed'] }).toEqual({ status: 200, replayed: 'true' });
  }
  // One dataset per create, none of the deleted left, and the read side agrees.
  const res = await stack.admin('/admin/accounts/acme/datasets');
  expect(res.status).toBe(200);
  const ids = (res.body.datasets as { id: string }[]).map((d) => d.id);
  for (const id of created) expect(ids.filter((x) => x === id)).toEqual([id]);
  for (const id of doomed) expect(ids).not.toContain(id);
  for (const id of doomed) expect((await stack.request('POST', `/datasets/${id}/data`, { key: acme, body: { data: [{ n: 1 }] } })).status).toBe(404);
  process.stderr.write(`schema killed: first answers (8 creates, 8 deletes): ${statuses.join(' ')}; retries told 409 while a lease ran: ${conflicts}\n`);
});

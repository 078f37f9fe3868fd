import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { createKafka, defaultAccountsTopic, parseBrokers } from '@pushbase/kafka';
import type { Redis } from 'ioredis';
import type { ServiceProcess } from '../../services/cli/src/distributed';
import { connectTestRedis, deleteUnder, dumpUnder, keysUnder } from '../helpers/redis';
import { sha } from '../helpers/api-keys';
import { adminRequest, BUNDLE, ROOT, requestTo, startSecondGateway, TestServer, type Response } from '../helpers/server';

/*
 * Accounts and keys in the distributed mode, over real processes (docs/operations.md → Accounts and API keys): two gateways on one
 * stack; an account and a key made through gateway A's admin listener; a push with that key through A; the
 * key revoked through gateway B; both gateways refuse it within 5 seconds (measured, asserted); the account
 * deleted, and its datasets gone from the ClickHouse read side and from Redis; Redis wiped and
 * `pushbase replay` run: accounts, keys and revocations are back, from the accounts topic alone. The key
 * itself is never in Redis or in Kafka, only its SHA-256.
 */

const REVOCATION_BOUND_MS = 5000;

let stack: TestServer;
let second: ServiceProcess;
let gatewayB: { port: number; adminPort: number; ca: string; plainHttp: boolean };
let redis: Redis;

beforeAll(async () => {
  stack = await new TestServer({ mode: 'distributed' }).start();
  second = await startSecondGateway(stack);
  gatewayB = { port: Number(second.ready.port), adminPort: Number(second.ready.admin_port), ca: stack.ca, plainHttp: false };
  redis = await connectTestRedis();
}, 240_000);

afterAll(async () => {
  await second?.signal('SIGTERM', 30_000);
  await stack?.stop();
  redis?.disconnect();
}, 120_000);

/** A call of an admin listener (either gateway's) with the stack's token. */
const admin = (adminPort: number, method: string, urlPath: string, body?: unknown): Promise<Response> => adminRequest(stack, method, urlPath, body, adminPort);

const ok = (res: Response, status: number): Response => {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
  return res;
};
const ping = (gateway: { port: number; ca: string; plainHttp: boolean }, key: string): Promise<number> => requestTo(gateway, 'GET', '/', { key }).then((r) => r.status);

/** Every message value of the stack's accounts topic, as text. */
async function accountsTopicText(): Promise<string> {
  const kafka = createKafka({ brokers: parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'), clientId: 'pushbase-e2e-accounts' });
  const topic = defaultAccountsTopic(stack.names!.topic);
  const kAdmin = kafka.admin();
  await kAdmin.connect();
  const [end] = await kAdmin.fetchTopicOffsets(topic);
  await kAdmin.disconnect();
  const groupId = `pb-e2e-accounts-read-${Date.now()}`;
  const consumer = kafka.consumer({ groupId });
  const values: string[] = [];
  let last = -1;
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    eachMessage: ({ message }) => {
      values.push(message.value?.toString('utf8') ?? '');
      last = Number(message.offset);
      return Promise.resolve();
    },
  });
  const deadline = Date.now() + 30_000;
  // The end counts the last transaction's marker.
  while (last < Number(end!.high) - 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await consumer.disconnect();
  // A partial read would let the not.toContain(key) checks pass on what was never read.
  if (last < Number(end!.high) - 2) throw new Error(`the accounts topic ${topic} was read up to offset ${last} of ${Number(end!.high) - 2} within 30 s`);
  return values.join('\n');
}

it('creates, uses, revokes (on every gateway within 5 s), deletes, and replays accounts and keys; keys only as hashes', async () => {
  const A = { port: stack.port, ca: stack.ca, plainHttp: false };
  const adminA = stack.adminPort;
  const adminB = gatewayB.adminPort;
  // An account PUSHBASE_API_KEYS names is not deleted: no deletion could revoke its configured key.
  expect(ok(await admin(adminA, 'DELETE', `/admin/accounts/${Object.keys(stack.keys)[0]!}`), 409).body.error.code).toBe('account_has_configured_key');

  // ── An account and two keys through gateway A's admin listener; a second account to survive the replay. ──
  const created = ok(await admin(adminA, 'POST', '/admin/accounts', { account: 'tenant-x', quotas: { datasets: 3 } }), 201).body;
  expect(created).toMatchObject({ account: 'tenant-x', quotas: { datasets: 3, requests_per_minute: null }, effective_quotas: { datasets: 3, requests_per_minute: 60 }, key_count: 0 });
  const key1 = ok(await admin(adminA, 'POST', '/admin/accounts/tenant-x/keys', { label: 'ci' }), 201).body as { key: string; key_id: string };
  ok(await admin(adminA, 'POST', '/admin/accounts', { account: 'tenant-y' }), 201);
  const keepY = ok(await admin(adminA, 'POST', '/admin/accounts/tenant-y/keys', { scope: 'write' }), 201).body as { key: string; key_id: string };
  const revokedY = ok(await admin(adminB, 'POST', '/admin/accounts/tenant-y/keys', { label: 'to revoke' }), 201).body as { key: string; key_id: string };
  ok(await admin(adminB, 'DELETE', `/admin/accounts/tenant-y/keys/${revokedY.key_id}`), 204);
  // Both gateways list the same state (one store).
  expect(ok(await admin(adminB, 'GET', '/admin/accounts/tenant-x/keys'), 200).body.keys).toEqual([expect.objectContaining({ key_id: key1.key_id, label: 'ci', scope: 'write' })]);

  // ── Push with the key through gateway A (and it works on B too). ──
  const fields = { fields: { n: { type: 'number', name: 'N' } } };
  expect((await requestTo(A, 'PUT', '/datasets/ds.one', { key: key1.key, body: fields })).status).toBe(201);
  expect((await requestTo(A, 'POST', '/datasets/ds.one/data', { key: key1.key, body: { data: [{ n: 1 }, { n: 2 }] } })).status).toBe(200);
  expect((await requestTo(gatewayB, 'PUT', '/datasets/ds.two', { key: key1.key, body: fields })).status).toBe(201);
  // The account's dataset quota (3) is the schema service's limit for it.
  expect((await requestTo(A, 'PUT', '/datasets/ds.three', { key: key1.key, body: fields })).status).toBe(201);
  const fourth = await requestTo(A, 'PUT', '/datasets/ds.four', { key: key1.key, body: fields });
  expect(fourth.status).toBe(400);
  expect((await stack.admin('/admin/accounts/tenant-x/datasets')).body.datasets.map((d: { id: string }) => d.id).sort()).toEqual(['ds.one', 'ds.three', 'ds.two']);
  expect(await stack.records('tenant-x', 'ds.one')).toHaveLength(2);

  // ── Revoke through gateway B: both gateways refuse the key within the bound. ──
  expect(await ping(A, key1.key)).toBe(200);
  expect(await ping(gatewayB, key1.key)).toBe(200);
  const revokedAt = Date.now();
  ok(await admin(adminB, 'DELETE', `/admin/accounts/tenant-x/keys/${key1.key_id}`), 204);
  const refusedAfter: Record<string, number> = {};
  for (;;) {
    const [a, b] = await Promise.all([ping(A, key1.key), ping(gatewayB, key1.key)]);
    const now = Date.now() - revokedAt;
    if (a === 401) refusedAfter.A ??= now;
    if (b === 401) refusedAfter.B ??= now;
    if (refusedAfter.A !== undefined && refusedAfter.B !== undefined) break;
    if (now > REVOCATION_BOUND_MS) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  process.stdout.write(`revocation in force after: gateway A ${refusedAfter.A} ms, gateway B ${refusedAfter.B} ms (counted from before the revoke call)\n`);
  expect(refusedAfter.A).toBeLessThanOrEqual(REVOCATION_BOUND_MS);
  expect(refusedAfter.B).toBeLessThanOrEqual(REVOCATION_BOUND_MS);
  // And it stays refused.
  expect(await ping(A, key1.key)).toBe(401);
  expect(await ping(gatewayB, key1.key)).toBe(401);

  // ── Delete the account: its datasets go (events, so ClickHouse and Redis follow), then its keys. ──
  const key2 = ok(await admin(adminA, 'POST', '/admin/accounts/tenant-x/keys', {}), 201).body as { key: string; key_id: string };
  expect(await ping(gatewayB, key2.key)).toBe(200);
  expect(ok(await admin(adminB, 'DELETE', '/admin/accounts/tenant-x'), 200).body).toEqual({ datasets_deleted: 3 });
  expect(await ping(A, key2.key)).toBe(401);
  expect(await ping(gatewayB, key2.key)).toBe(401);
  expect(ok(await admin(adminA, 'GET', '/admin/accounts/tenant-x'), 404).status).toBe(404);
  expect((await stack.admin('/admin/accounts/tenant-x/datasets')).body.datasets).toEqual([]);
  const prefix = stack.names!.redisPrefix;
  const tenantKeys = (await keysUnder(redis, prefix)).map((k) => k.slice(prefix.length)).filter((k) => k.includes('tenant-x'));
  // Only the record of how far its events were applied stays (and the dataset incarnations known dead).
  expect(tenantKeys.filter((k) => !k.startsWith('schema:dead:')).sort()).toEqual(['accounts:position:tenant-x']);

  // ── The key is a hash everywhere it is stored. ──
  const redisDump = await dumpUnder(redis, prefix);
  const topicText = await accountsTopicText();
  for (const key of [key1.key, key2.key, keepY.key, revokedY.key]) {
    expect(redisDump).not.toContain(key);
    expect(topicText).not.toContain(key);
  }
  expect(redisDump).toContain(sha(keepY.key));
  expect(topicText).toContain(sha(key1.key));

  // ── Wipe Redis and replay: accounts, keys and revocations come back from the accounts topic alone. ──
  await stack.stack!.signal('projector', 'SIGTERM');
  await deleteUnder(redis, prefix);
  // The gateway finds the stores' state gone (it looks at most once a second) and refuses until the replay.
  const deadline = Date.now() + 5000;
  let status = await ping(A, keepY.key);
  while (status !== 503 && Date.now() < deadline) {
    expect(status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 100));
    status = await ping(A, keepY.key);
  }
  expect(status).toBe(503);
  const replay = await new Promise<{ code: number; out: string }>((resolve) =>
    execFile(process.execPath, [BUNDLE, 'replay', '--no-progress'], { cwd: ROOT, env: { ...process.env, ...stack.stack!.env }, timeout: 240_000 }, (err, out, errOut) =>
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out: `${out}${errOut}` }),
    ),
  );
  expect(replay).toMatchObject({ code: 0 });
  expect(replay.out).toMatch(/replay: \d+ account events/);
  // Before any projector runs again (its follower would restore them too): replay alone brought them back,
  // once the gateways looked at the new state (at most a second after the swap).
  for (const gateway of [A, gatewayB]) {
    const until = Date.now() + 3000;
    while ((await ping(gateway, keepY.key)) === 503 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await ping(gateway, keepY.key)).toBe(200);
  }
  expect(await ping(A, revokedY.key)).toBe(401);
  expect(await ping(gatewayB, key1.key)).toBe(401);
  expect(await ping(gatewayB, key2.key)).toBe(401);
  const accounts = ok(await admin(adminB, 'GET', '/admin/accounts'), 200).body.accounts as { account: string; key_count: number }[];
  expect(accounts.filter((a) => a.account.startsWith('tenant-'))).toEqual([expect.objectContaining({ account: 'tenant-y', key_count: 1 })]);
  // The CLI says the same through the other gateway's admin listener: it is the same HTTP client in both modes.
  const cli = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [BUNDLE, 'keys', 'list', 'tenant-y', '--admin-url', `http://127.0.0.1:${adminB}`, '--token', stack.adminToken, '--json'],
      { cwd: ROOT, timeout: 60_000 },
      (err, out, errOut) => (err === null ? resolve(out) : reject(new Error(`${err.message}\n${errOut}`))),
    ),
  );
  expect((JSON.parse(cli) as { keys: { key_id: string }[] }).keys.map((k) => k.key_id)).toEqual([keepY.key_id]);
  // The bootstrap keys of PUSHBASE_API_KEYS are configuration: they work after it as before.
  expect(await ping(A, stack.keys.acme!)).toBe(200);
  await stack.stack!.restart('projector');
  expect(await ping(gatewayB, keepY.key)).toBe(200);
  expect(await ping(gatewayB, revokedY.key)).toBe(401);
}, 600_000);

it('a first start without configured keys makes the account default and one key as events, shown once; a restart makes none', async () => {
  const fresh = await new TestServer({ mode: 'distributed', keys: {} }).start();
  try {
    const lines = fresh.output.flatMap((l): { msg?: string; file?: string; key_id?: string }[] => {
      try {
        return [JSON.parse(l) as { msg?: string }];
      } catch {
        return [];
      }
    });
    const generated = lines.filter((m) => m.msg?.startsWith('generated an API key'));
    expect(generated).toHaveLength(1);
    // Not in the log (the gateway's stdout is no terminal here): in a file only its user can read.
    expect(generated[0]!.file).toBe(path.join(path.resolve(fresh.dataDir), 'initial-api-key'));
    expect(statSync(generated[0]!.file!).mode & 0o777).toBe(0o600);
    const key = readFileSync(generated[0]!.file!, 'utf8').trim();
    expect(key).toMatch(/^pb_[A-Za-z0-9_-]{43}$/);
    expect(fresh.output.join('\n')).not.toContain(key);
    expect(await ping({ port: fresh.port, ca: fresh.ca, plainHttp: false }, key)).toBe(200);
    // An account of the log, listed like any other; its key only as a hash in Redis.
    expect(ok(await adminRequest(fresh, 'GET', '/admin/accounts/default/keys'), 200).body.keys).toEqual([expect.objectContaining({ key_id: generated[0]!.key_id, label: 'first start' })]);
    const dump = await dumpUnder(redis, fresh.names!.redisPrefix);
    expect(dump).not.toContain(key);
    expect(dump).toContain(sha(key));
    await fresh.stack!.restart('gateway');
    expect(fresh.output.filter((l) => l.includes('generated an API key'))).toHaveLength(1);
  } finally {
    await fresh.stop();
  }
}, 300_000);

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { openRedis } from '@pushbase/redis';
import { defaultKafkaJarsDir, startPrivateServers, type PrivateServers } from '../../deploy/local/private-servers';
import { TestStack } from '../helpers/distributed-stack';
import { FAULT_ANSWERS, FaultWorkload, type Tally } from '../helpers/fault-workload';
import { BUNDLE, ROOT } from '../helpers/server';

/*
 * Fault tests of the distributed stack (CONTRIBUTING.md → Tests): the four services as processes on a PRIVATE Kafka,
 * ClickHouse and Redis (free loopback ports, a temporary folder; the shared servers are never touched),
 * under the fault workload (test/helpers/fault-workload.ts). Each test kills or stops one thing in the middle
 * of the load, brings it back, and ends with the visible state (the admin listener, over ClickHouse) equal
 * to the pure fold of the acknowledged requests: nothing acknowledged lost, nothing refused applied,
 * nothing applied twice — and a third of the datasets send every request with an Idempotency-Key and again
 * with it until its outcome is known, each then applied exactly once. Afterwards `pushbase replay --verify-only` rebuilds the topic into scratch tables
 * and finds them equal to the live ones; and with the applied keys wiped from Redis, `pushbase replay`
 * records them again from the events, so every keyed request sent again is replayed, not applied.
 *
 * Bounded: a handful of accounts and datasets per test, every wait with a deadline.
 */

jest.setTimeout(300_000);

// Accounts of their own for each test's workload: an account's listing then holds only that workload's datasets.
const TESTS = 7;
const groups = Array.from({ length: TESTS }, (_, t) =>
  Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`fault-${t}-${i}-${randomBytes(3).toString('hex')}`, `key-${randomBytes(12).toString('hex')}`])),
);
const keys = Object.assign({}, ...groups) as Record<string, string>;
let servers: PrivateServers | undefined;
let stack: TestStack | undefined;
const workloads: FaultWorkload[] = [];

beforeAll(async () => {
  servers = await startPrivateServers({ parentDir: process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), kafkaJarsDir: defaultKafkaJarsDir(process.env, ROOT) });
  stack = new TestStack({
    keys,
    servers: servers.urls,
    env: {
      PUSHBASE_RATE_LIMIT_PER_MINUTE: '1000000',
      // Writes reach ClickHouse sooner than the default second, so each test's wait is shorter.
      PUSHBASE_PROJECTOR_FLUSH_MS: '200',
    },
  });
  await stack.start();
}, 600_000);

afterAll(async () => {
  for (const w of workloads) await w.stop();
  await stack?.stop();
  await servers?.close();
}, 180_000);

/** A fresh workload on fresh datasets of the stack's accounts, started. */
function load(): FaultWorkload {
  const group = groups[workloads.length];
  if (group === undefined) throw new Error(`more workloads than the ${TESTS} groups of accounts`);
  const w = new FaultWorkload({ target: stack!, keys: group, datasetsPerAccount: 4, requestTimeoutMs: 30_000 });
  workloads.push(w);
  w.start();
  return w;
}

const acked = (w: FaultWorkload, n: number, what: string): Promise<Tally> => w.waitFor((t) => t.acknowledged >= n, 120_000, what);
const answered = (t: Tally, prefix: string): number => Object.entries(t.answers).reduce((n, [k, c]) => n + (k.startsWith(prefix) ? c : 0), 0);

/** `pushbase replay` with `flags` on the stack's names (the projector must be stopped). */
const replay = (...flags: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, [BUNDLE, 'replay', ...flags, '--no-progress'], { cwd: ROOT, env: { ...process.env, ...stack!.env }, timeout: 240_000 }, (err, out, errOut) =>
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout: out, stderr: errOut }),
    );
  });

/** Counts (or deletes) the stack's applied Idempotency-Keys in its Redis (services/redis/src/idempotency.ts). */
async function appliedKeys(what: 'count' | 'delete'): Promise<number> {
  const redis = await openRedis(servers!.urls.PUSHBASE_REDIS_URL);
  try {
    let cursor = '0';
    let n = 0;
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${stack!.names.redisPrefix}idem:applied:*`, 'COUNT', 1000);
      cursor = next;
      n += found.length;
      if (what === 'delete' && found.length > 0) await redis.del(...found);
    } while (cursor !== '0');
    return n;
  } finally {
    redis.disconnect();
  }
}

/** Stops the load, then waits for the read side to show exactly the fold of what was acknowledged. */
async function settle(w: FaultWorkload): Promise<Tally> {
  await w.stop();
  const tally = w.tally();
  try {
    await w.verify(90_000);
  } catch (e) {
    throw new Error(`${(e as Error).message}\nanswers: ${JSON.stringify(tally.answers)}\nlast service lines:\n${stack!.output.slice(-30).join('\n')}`);
  }
  expect(Object.keys(tally.answers).filter((k) => !FAULT_ANSWERS.test(k))).toEqual([]);
  // Keyed requests sent again with their key are held to exactly once by verify; none was taken for another.
  expect(tally.keyMismatches).toBe(0);
  expect(stack!.unexpectedExits).toEqual([]);
  return tally;
}

describe('distributed stack under faults', () => {
  it('kill -9 of the records service during load, then a restart', async () => {
    const w = load();
    const before = await acked(w, 100, '100 acknowledged before the kill');
    await stack!.kill('records');
    const down = w.tally().requests;
    // Writes are refused (nothing listens) or unknown (cut mid-call) while it is gone; none is acknowledged.
    await w.waitFor((t) => t.requests >= down + 16, 60_000, 'requests while records is down');
    await stack!.restart('records');
    await acked(w, before.acknowledged + 150, '150 more acknowledged after the restart');
    const tally = await settle(w);
    // The kill cut keyed requests: they were sent again with their keys, and settled.
    expect(tally.retried).toBeGreaterThan(0);
  });

  it('kill -9 of the schema service during load (creates, deletes, appends), then a restart: nothing answered from a change it left half done', async () => {
    const w = load();
    // Schema changes come every few requests of each dataset (a delete every 37, then a create): with all
    // datasets running, some are in flight at the kill, and one cut between Kafka and Redis leaves its
    // intent and a lease nobody will release. Writes to that dataset are refused (503) and its find or get
    // waits until the lease expires and the intent is rolled forward; the state must end as the fold.
    const before = await acked(w, 100, '100 acknowledged before the kill');
    await stack!.kill('schema');
    const down = w.tally();
    // Creates and deletes are refused (the gateway cannot reach the schema service) while appends go on.
    await w.waitFor((t) => answered(t, '503 ') >= answered(down, '503 ') + 5, 60_000, 'creates or deletes refused while schema is down');
    await stack!.restart('schema');
    await acked(w, before.acknowledged + 150, '150 more acknowledged after the restart');
    // The restarted service decides again: datasets are created anew after their deletes.
    const after = w.tally();
    await w.waitFor((t) => answered(t, '201') > answered(after, '201'), 120_000, 'a dataset created after the restart');
    await settle(w);
  });

  it('kill -9 of the projector during load, then a restart: it resumes from its committed offsets', async () => {
    const w = load();
    const before = await acked(w, 100, '100 acknowledged before the kill');
    await stack!.kill('projector');
    // Writes go on being acknowledged while nothing projects them.
    await acked(w, before.acknowledged + 100, '100 more acknowledged while the projector is down');
    await stack!.restart('projector');
    const after = w.tally().acknowledged;
    await acked(w, after + 100, '100 more acknowledged after the restart');
    await settle(w);
  });

  it('Kafka stopped during requests: writes are refused with 503, and succeed again once it is back', async () => {
    const w = load();
    const before = await acked(w, 100, '100 acknowledged before Kafka stops');
    await servers!.stop('kafka', 'SIGKILL');
    const stopped = w.tally();
    const during = await w.waitFor((t) => answered(t, '503 unavailable') >= answered(stopped, '503 unavailable') + 20, 120_000, '503 answers while Kafka is down');
    // Only requests already in flight when it died (one per dataset at most) can have been acknowledged.
    expect(during.acknowledged - stopped.acknowledged).toBeLessThanOrEqual(w.datasets.length);
    expect(before.acknowledged).toBeGreaterThan(0);
    await servers!.start('kafka');
    await acked(w, w.tally().acknowledged + 150, '150 more acknowledged after Kafka is back');
    await settle(w);
  });

  it('ClickHouse stopped and started again: writes go on, and the projector catches up', async () => {
    const w = load();
    const before = await acked(w, 100, '100 acknowledged before ClickHouse stops');
    await servers!.stop('clickhouse', 'SIGKILL');
    // The read side is ClickHouse: the admin listener says so with a 503.
    const account = Object.keys(groups[workloads.length - 1]!)[0]!;
    expect((await w.admin(`/admin/accounts/${account}/datasets`)).status).toBe(503);
    // The write path does not need ClickHouse: acknowledgements go on.
    await acked(w, before.acknowledged + 100, '100 more acknowledged while ClickHouse is down');
    expect((await w.admin(`/admin/accounts/${account}/datasets`)).status).toBe(503);
    await servers!.start('clickhouse');
    await acked(w, w.tally().acknowledged + 50, '50 more acknowledged after ClickHouse is back');
    await settle(w);
  });

  it('Redis restarted: the gateway answers 503 while it is down, and recovers', async () => {
    const w = load();
    await acked(w, 100, '100 acknowledged before Redis stops');
    await servers!.stop('redis', 'SIGKILL');
    const stopped = w.tally();
    await w.waitFor((t) => answered(t, '503 unavailable') >= answered(stopped, '503 unavailable') + 20, 60_000, '503 answers while Redis is down');
    await servers!.start('redis');
    await acked(w, w.tally().acknowledged + 150, '150 more acknowledged after Redis is back');
    await settle(w);
  });

  it('after every fault, all the workloads still show their folds, and replaying the topic gives the live state', async () => {
    for (const w of workloads) await w.verify(60_000);
    // replay rebuilds with the projector's own code and refuses to run beside a live projector.
    await stack!.signal('projector', 'SIGTERM');
    const { code, stdout, stderr } = await replay('--verify-only');
    expect({ code, stdout, stderr: stderr.slice(-2000) }).toEqual({ code: 0, stdout: expect.stringMatching(/the rebuilt state equals the live one/), stderr: expect.any(String) });
    await stack!.restart('projector');
  });

  it('replay keeps the Idempotency-Keys: wiped from Redis, they come back from the events, and every keyed request sent again is replayed', async () => {
    // A load of its own, so that the test holds keyed requests when run alone too.
    const own = load();
    await acked(own, 150, '150 acknowledged');
    await settle(own);
    await stack!.signal('projector', 'SIGTERM');
    // The applied keys are lost (a Redis emptied, or rebuilt elsewhere): only the events still hold them.
    const wiped = await appliedKeys('delete');
    expect(wiped).toBeGreaterThan(0);
    const { code, stdout, stderr } = await replay();
    expect({ code, stdout, stderr: stderr.slice(-2000) }).toEqual({ code: 0, stdout: expect.stringMatching(/the rebuilt projection and schema store are live/), stderr: expect.any(String) });
    const recorded = await appliedKeys('count');
    await stack!.restart('projector');
    let resent = 0;
    for (const w of workloads) {
      const { sent, notReplayed } = await w.resendKeyed(120_000);
      expect(notReplayed).toEqual([]);
      resent += sent;
    }
    expect(resent).toBeGreaterThan(0);
    expect(recorded).toBeGreaterThanOrEqual(wiped);
    // Nothing applied again: every workload still shows the fold of what it sent the first time.
    for (const w of workloads) await w.verify(90_000);
    process.stderr.write(`replay: ${wiped} applied keys wiped, ${recorded} recorded again by replay; ${resent} keyed requests sent again, all replayed\n`);
  });
});

/*
 * `npm run bench:noisy` — how much one tenant at every limit slows another tenant at a normal pace. Prints
 * figures; asserts nothing (the target and the runs are in docs/operations.md → Many tenants on one deployment).
 *
 * Per mode (embedded, distributed), on one server:
 *   tenant B, the neighbour: a few keys appending 10 records every 2 s each, and reading its dataset
 *     (a records page and an aggregate) several times a second;
 *   tenant A, at every limit at once, from a child process: many keys each writing 500-record bodies at
 *     the 60-a-minute limit, 100 datasets with maximal definitions (10 fields, 50-character keys,
 *     250-character names), the read API at its per-key limit with grouped aggregates and the dataset
 *     listing, and slow uploads (declared 4 MiB, trickled) up to the account's budget.
 * B runs alone first, then with A, in the same run; the ratio of B's p99s (with A / alone) is the figure.
 *
 * Traffic goes to 127.0.0.1 only; every phase is bounded and the servers it started are stopped at the end.
 * Flags: --modes embedded,distributed  --seconds 30  --hostile-keys 20  --slow-uploads 4
 *        --server-node-args="--max-semi-space-size=64"   (node flags for the server, the gateway in distributed mode)
 */
import { fork } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { adminRequest, TestServer } from '../test/helpers/server';

interface HostileOrders {
  readonly origin: string;
  readonly ca: string;
  readonly account: string;
  readonly keys: readonly string[];
  readonly datasets: readonly string[];
  readonly slowUploads: number;
}
interface HostileReport {
  readonly statuses: Record<string, number>;
}

const ACCOUNT_A = 'tenant-a';
const ACCOUNT_B = 'tenant-b';
const B_KEYS = 5;
const B_APPEND_EVERY_MS = 2000;
const B_READS_PER_SECOND = 5;
const DAY0 = Date.UTC(2024, 0, 1);
const day = (n: number): string => new Date(DAY0 + n * 86_400_000).toISOString().slice(0, 10);
const basic = (key: string): string => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A definition at every limit: 10 fields, 50-character keys, 250-character names; f0 groups, f1 sums, f2 buckets. */
function maximalDefinition(): { fields: Record<string, unknown> } {
  const fields: Record<string, unknown> = {};
  for (let i = 0; i < 10; i++) {
    const key = `f${i}_${'x'.repeat(47 - String(i).length)}`;
    const type = i === 1 ? 'number' : i === 2 ? 'date' : 'string';
    fields[key] = { type, name: `${'N'.repeat(249)}${i}` };
  }
  return { fields };
}
const FIELD_KEYS = Object.keys(maximalDefinition().fields);

/** 500 records of the maximal definition, strings at their 100-character limit. */
function maximalBody(seed: number): string {
  const data = Array.from({ length: 500 }, (_, r) => {
    const rec: Record<string, unknown> = {};
    FIELD_KEYS.forEach((k, i) => {
      rec[k] = i === 0 ? `team-${(seed + r) % 20}` : i === 1 ? r : i === 2 ? day((seed + r) % 400) : `${i}`.padEnd(100, 'v');
    });
    return rec;
  });
  return JSON.stringify({ data });
}

// ── Tenant A, in its own process ─────────────────────────────────────────────────────────────────────

async function hostile(orders: HostileOrders, stopped: Promise<void>): Promise<HostileReport> {
  const pool = new Pool(orders.origin, { connections: orders.keys.length * 3, connect: { ca: orders.ca } });
  const statuses: Record<string, number> = {};
  const count = (s: string | number): void => void (statuses[s] = (statuses[s] ?? 0) + 1);
  let stop = false;
  void stopped.then(() => (stop = true));
  const bodies = [0, 1, 2, 3].map((i) => Buffer.from(maximalBody(i * 97)));
  const call = async (key: string, method: 'GET' | 'POST', path: string, body?: Buffer): Promise<void> => {
    try {
      const res = await pool.request({ path, method, headers: { authorization: basic(key), 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
      await res.body.dump();
      count(res.statusCode);
    } catch {
      count('exception');
    }
  };
  const { account, datasets } = orders;
  const aggregate = (id: string): string => `/read/v1/accounts/${account}/datasets/${id}/aggregate?op=sum&field=${FIELD_KEYS[1]}&group_by=${FIELD_KEYS[0]}`;
  const buckets = (id: string): string => `/read/v1/accounts/${account}/datasets/${id}/aggregate?op=count&group_by=${FIELD_KEYS[2]}&bucket=week`;
  /** Runs `step` every `everyMs` (its own time included) until stopped. */
  const paced = async (everyMs: number, offsetMs: number, step: (n: number) => Promise<void>): Promise<void> => {
    await sleep(offsetMs);
    for (let n = 0; !stop; n++) {
      const t0 = performance.now();
      await step(n);
      await sleep(Math.max(0, everyMs - (performance.now() - t0)));
    }
  };
  const loops = orders.keys.flatMap((key, k) => [
    // Writes at the 60-a-minute limit, 500 records each.
    paced(1000, (k * 1000) / orders.keys.length, (n) => call(key, 'POST', `/datasets/${datasets[(k + n) % datasets.length]}/data`, bodies[n % bodies.length])),
    // Reads at the 600-a-minute read limit: the costliest aggregates and the listing of 100 maximal definitions.
    paced(100, (k * 100) / orders.keys.length, (n) => {
      const id = datasets[(k * 7 + n) % datasets.length]!;
      return call(key, 'GET', n % 3 === 0 ? `/read/v1/accounts/${account}/datasets` : n % 3 === 1 ? aggregate(id) : buckets(id));
    }),
  ]);
  // Slow uploads: declared 4 MiB, a byte a second, until answered (the body deadline), then again.
  const slow = Array.from({ length: orders.slowUploads }, async (_, i) => {
    while (!stop) {
      const status = await new Promise<number>((resolve) => {
        const url = new URL(orders.origin);
        const req = httpsRequest(
          {
            host: url.hostname,
            port: url.port,
            method: 'POST',
            path: `/datasets/${datasets[i % datasets.length]}/data`,
            ca: orders.ca,
            agent: false,
            headers: { authorization: basic(orders.keys[i % orders.keys.length]!), 'content-type': 'application/json', 'content-length': String(4 * 1024 * 1024) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', () => resolve(-1));
        const drip = setInterval(() => (stop ? req.destroy() : req.write(' ')), 1000);
        req.on('close', () => clearInterval(drip));
      });
      count(`slow ${status}`);
    }
  });
  await Promise.all([...loops, ...slow]);
  await pool.close();
  return { statuses };
}

if (process.argv.includes('--hostile')) {
  let release!: () => void;
  const stopped = new Promise<void>((r) => (release = r));
  process.once('message', (orders: HostileOrders) => {
    process.on('message', () => release());
    void hostile(orders, stopped).then((report) => process.send?.(report, () => process.exit(0)));
  });
}

// ── The neighbour, measured here ─────────────────────────────────────────────────────────────────────

interface Sample {
  readonly kind: 'append' | 'read';
  readonly ms: number;
  readonly status: number;
}

async function neighbour(origin: string, ca: string, keys: readonly string[], id: string, seconds: number): Promise<Sample[]> {
  const pool = new Pool(origin, { connections: keys.length * 2, connect: { ca } });
  const samples: Sample[] = [];
  const end = performance.now() + seconds * 1000;
  const timed = async (kind: Sample['kind'], key: string, method: 'GET' | 'POST', path: string, body?: string): Promise<void> => {
    const t0 = performance.now();
    let status = -1;
    try {
      const res = await pool.request({ path, method, headers: { authorization: basic(key), 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
      await res.body.dump();
      status = res.statusCode;
    } catch {
      status = -1;
    }
    samples.push({ kind, ms: performance.now() - t0, status });
  };
  let n = 0;
  const appends = keys.map(async (key, k) => {
    await sleep((k * B_APPEND_EVERY_MS) / keys.length);
    while (performance.now() < end) {
      const t0 = performance.now();
      const data = Array.from({ length: 10 }, (_, r) => ({ day: day((n + r) % 300), team: `t${r % 4}`, amount: r }));
      n++;
      await timed('append', key, 'POST', `/datasets/${id}/data`, JSON.stringify({ data }));
      await sleep(Math.max(0, B_APPEND_EVERY_MS - (performance.now() - t0)));
    }
  });
  const reads = (async () => {
    for (let r = 0; performance.now() < end; r++) {
      const t0 = performance.now();
      const path = r % 2 === 0 ? `/read/v1/accounts/${ACCOUNT_B}/datasets/${id}/records?limit=50` : `/read/v1/accounts/${ACCOUNT_B}/datasets/${id}/aggregate?op=sum&field=amount&group_by=team`;
      await timed('read', keys[r % keys.length]!, 'GET', path);
      await sleep(Math.max(0, 1000 / B_READS_PER_SECOND - (performance.now() - t0)));
    }
  })();
  await Promise.all([...appends, reads]);
  await pool.close();
  return samples;
}

function summary(samples: readonly Sample[], kind: Sample['kind']): { n: number; errors: number; p50: number; p99: number; max: number } {
  const mine = samples.filter((s) => s.kind === kind);
  const ms = mine.map((s) => s.ms).sort((a, b) => a - b);
  const at = (q: number): number => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? NaN;
  return { n: mine.length, errors: mine.filter((s) => s.status !== 200).length, p50: at(0.5), p99: at(0.99), max: ms.at(-1) ?? NaN };
}

/** Cumulative bucket counts (upper bound → count) of a histogram on the admin listener's /metrics; undefined where the process has none. */
async function histogram(server: TestServer, name: string): Promise<Map<number, number> | undefined> {
  const res = await adminRequest(server, 'GET', '/metrics');
  if (res.status !== 200) return undefined;
  const buckets = new Map<number, number>();
  const line = new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\d+)`, 'gm');
  for (const m of res.text.matchAll(line)) buckets.set(m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2]));
  return buckets.size === 0 ? undefined : buckets;
}

/** Count and bucket-bound p50/p99 of what a histogram gained between two readings. */
function between(before: Map<number, number>, after: Map<number, number>): string {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const delta = bounds.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = delta.at(-1) ?? 0;
  if (total === 0) return 'n=0';
  const at = (q: number): string => {
    const i = delta.findIndex((n) => n >= q * total);
    const le = bounds[i] ?? Infinity;
    return le === Infinity ? '> the largest bucket' : `≤ ${le * 1000} ms`;
  };
  return `n=${total} p50 ${at(0.5)}, p99 ${at(0.99)}`;
}

async function createKeys(server: TestServer, account: string, n: number): Promise<string[]> {
  const created = await adminRequest(server, 'POST', '/admin/accounts', { account });
  if (created.status !== 201) throw new Error(`creating account ${account}: ${created.status} ${created.text}`);
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await adminRequest(server, 'POST', `/admin/accounts/${account}/keys`, {});
    if (res.status !== 201) throw new Error(`creating a key of ${account}: ${res.status} ${res.text}`);
    keys.push((res.body as { key: string }).key);
  }
  return keys;
}

async function putDataset(server: TestServer, key: string, id: string, definition: unknown): Promise<void> {
  const res = await server.request('PUT', `/datasets/${id}`, { key, body: definition });
  if (res.status !== 201 && res.status !== 200) throw new Error(`creating ${id}: ${res.status} ${res.text}`);
}

async function runMode(mode: 'embedded' | 'distributed', seconds: number, hostileKeys: number, slowUploads: number, nodeArgs: readonly string[]): Promise<void> {
  const server = await new TestServer({ mode, nodeArgs }).start();
  try {
    const keysA = await createKeys(server, ACCOUNT_A, hostileKeys);
    const keysB = await createKeys(server, ACCOUNT_B, B_KEYS);
    // 100 maximal datasets, the creates spread over A's keys so that none passes its 60 a minute.
    const datasets = Array.from({ length: 100 }, (_, i) => `wide-${i}`);
    await Promise.all(keysA.map(async (key, k) => {
      for (let i = k; i < datasets.length; i += keysA.length) await putDataset(server, key, datasets[i]!, maximalDefinition());
    }));
    const idB = 'neighbour';
    await putDataset(server, keysB[0]!, idB, { fields: { day: { type: 'date', name: 'Day' }, team: { type: 'string', name: 'Team' }, amount: { type: 'number', name: 'Amount' } } });
    await sleep(3000);

    // Embedded only: the event log's group commits, every tenant's appends in them.
    const COMMITS = 'pushbase_event_log_commit_duration_seconds';
    const commitsAtStart = await histogram(server, COMMITS);
    const alone = await neighbour(server.baseUrl, server.ca, keysB, idB, seconds);
    const commitsAlone = await histogram(server, COMMITS);
    const child = fork(__filename, ['--hostile'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const report = new Promise<HostileReport>((resolve, reject) => {
      child.once('message', (m) => resolve(m as HostileReport));
      child.once('exit', (code) => reject(new Error(`tenant A's process exited with ${code}`)));
    });
    child.send({ origin: server.baseUrl, ca: server.ca, account: ACCOUNT_A, keys: keysA, datasets, slowUploads } satisfies HostileOrders);
    // A warms up (its datasets fill, its slow uploads take their share) before B is measured again.
    await sleep(10_000);
    const commitsBeforeCrowded = await histogram(server, COMMITS);
    const crowded = await neighbour(server.baseUrl, server.ca, keysB, idB, seconds);
    const commitsCrowded = await histogram(server, COMMITS);
    child.send('stop');
    const hostileReport = await report;

    const line = (s: string): void => void process.stdout.write(`${s}\n`);
    line(`\n${mode}${nodeArgs.length > 0 ? ` (${nodeArgs.join(' ')})` : ''}: tenant B (${B_KEYS} keys, an append of 10 records every ${B_APPEND_EVERY_MS / 1000} s a key, ${B_READS_PER_SECOND} reads/s), ${seconds} s alone then ${seconds} s beside tenant A (${hostileKeys} keys, ${slowUploads} slow uploads)`);
    for (const kind of ['append', 'read'] as const) {
      const a = summary(alone, kind);
      const c = summary(crowded, kind);
      line(`  B ${kind.padEnd(6)} alone   n=${a.n} errors=${a.errors} p50=${a.p50.toFixed(1)} ms p99=${a.p99.toFixed(1)} ms max=${a.max.toFixed(1)} ms`);
      line(`  B ${kind.padEnd(6)} with A  n=${c.n} errors=${c.errors} p50=${c.p50.toFixed(1)} ms p99=${c.p99.toFixed(1)} ms max=${c.max.toFixed(1)} ms`);
      line(`  B ${kind.padEnd(6)} p99 ratio (with A / alone): ${(c.p99 / a.p99).toFixed(2)}  (target ≤ 2)`);
    }
    if (commitsAtStart !== undefined && commitsAlone !== undefined && commitsBeforeCrowded !== undefined && commitsCrowded !== undefined) {
      line(`  event log group commits (write + fdatasync), B alone: ${between(commitsAtStart, commitsAlone)}; with A: ${between(commitsBeforeCrowded, commitsCrowded)}`);
    }
    line(`  tenant A's answers: ${JSON.stringify(hostileReport.statuses)}`);
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { modes: { type: 'string' }, seconds: { type: 'string' }, 'hostile-keys': { type: 'string' }, 'slow-uploads': { type: 'string' }, 'server-node-args': { type: 'string' } } });
  const modes = (values.modes ?? 'embedded,distributed').split(',') as ('embedded' | 'distributed')[];
  const seconds = Number(values.seconds ?? 30);
  const hostileKeys = Number(values['hostile-keys'] ?? 20);
  const slowUploads = Number(values['slow-uploads'] ?? 4);
  const nodeArgs = (values['server-node-args'] ?? '').split(' ').filter((a) => a !== '');
  for (const mode of modes) await runMode(mode, seconds, hostileKeys, slowUploads, nodeArgs);
}

if (!process.argv.includes('--hostile')) {
  main().catch((e: unknown) => {
    process.stderr.write(`bench:noisy: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  });
}

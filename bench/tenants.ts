/*
 * `npm run bench:tenants` — many tenants on the distributed stack. Prints figures; asserts nothing (the
 * targets are printed beside them; the runs are in docs/scaling.md).
 *
 * The four services as separate processes (as bench:distributed starts them) on the servers at
 * PUSHBASE_KAFKA_BROKERS, PUSHBASE_CLICKHOUSE_URL and PUSHBASE_REDIS_URL, in a topic, database, Redis
 * prefix and projector group of its own (removed at the end). In one run:
 *
 *   provision  --accounts accounts through the admin API, each with a write key and a request quota raised
 *              above the 60-a-minute default (the quota, not the limiter, is what changes), then
 *              --datasets datasets per account (PUT /datasets/:id), each given --records records in one
 *              append; then --hot datasets (1 % of all by default, spread over the accounts) brought to
 *              the 5000-record window with appends of 500. All through the public API, --concurrency
 *              requests at once, an account's requests spread out so no account holds more than its share;
 *   memory     every service's RSS, sampled every 500 ms (peak per phase) and its peak (VmHWM) at the end,
 *              against the memory limit the Helm chart gives it (helm/pushbase/values.yaml), and the
 *              projector's held rows (its `written` lines) against PUSHBASE_PROJECTOR_MAX_ROWS, which the
 *              bench sets small (--projector-max-rows; a tenth of all rows by default) so that it evicts;
 *   reads      once the projector has caught up, --reads requests of each kind, --read-concurrency at
 *              once, on random accounts and datasets: the read API's listing of an account's datasets
 *              (public listener, the account's key), the admin listener's listing (admin token), a page
 *              of 50 records and a grouped aggregate of a dataset (hot and few-record ones alike);
 *              target p99 < 100 ms;
 *   loads      the projector's loads of evicted datasets: one record appended to each of --touches hot
 *              datasets, oldest-touched first (so each was dropped by the bound), and to as many
 *              few-record ones; pushbase_projector_load_duration_seconds over that phase (one query of up
 *              to 8 datasets, in the projector itself), and the same load (ClickHouseProjectionStore.loadMany,
 *              one dataset, values 'dates') timed from here --loads times per kind; target p99 < 50 ms;
 *   sizes      ClickHouse's parts (rows, bytes on disk) per table, views, Redis's used_memory and keys,
 *              the topic's events and bytes, after the few-record datasets and again after the hot ones:
 *              the per-account and per-dataset costs docs/scaling.md extrapolates from.
 *
 * Traffic goes to 127.0.0.1 only. Flags (defaults: the full run, 1,000 × 100):
 *   --accounts 1000 --datasets 100 --records 3 --hot <1 % of datasets> --concurrency 16
 *   --reads 1000 --read-concurrency 4 --touches 200 --loads 200 --projector-max-rows <a tenth of the rows>
 *   --max-seconds 10800   --env K=V,…  (extra environment for every service)
 *   --log FILE  every line the services write, with the time and the service's name
 * A small run: `npm run bench:tenants -- --accounts 50 --datasets 20` (a couple of minutes).
 */
import { createWriteStream, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { parse as parseYaml } from 'yaml';
import { ClickHouseProjectionStore, connectClickHouse, quoteIdentifier, type ClickHouseConnection } from '@pushbase/clickhouse';
import { createKafka, parseBrokers } from '@pushbase/kafka';
import { openRedis } from '@pushbase/redis';
import { selectRows } from '../services/clickhouse/src/client';
import { SERVICES, type ServiceName } from '../services/cli/src/distributed';
import { readServicesConfig } from '../deploy/local/config';
import { status as serverStatus } from '../deploy/local/local-servers';
import { TestStack } from '../test/helpers/distributed-stack';
import { HighWatermarks } from '../test/helpers/high-watermarks';
import { samples, scrape } from '../test/helpers/metrics';
import { viewsMade } from './views';

// ── Options ──────────────────────────────────────────────────────────────────────────────────────────

const { values: flags } = parseArgs({
  options: {
    accounts: { type: 'string' },
    datasets: { type: 'string' },
    records: { type: 'string' },
    hot: { type: 'string' },
    concurrency: { type: 'string' },
    reads: { type: 'string' },
    'read-concurrency': { type: 'string' },
    touches: { type: 'string' },
    loads: { type: 'string' },
    'projector-max-rows': { type: 'string' },
    'max-seconds': { type: 'string' },
    env: { type: 'string' },
    log: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (flags.help === true) {
  process.stdout.write(readFileSync(__filename, 'utf8').split('*/')[0]!.replace(/^\/\*\n?/, '').replace(/^ \* ?/gm, ''));
  process.exit(0);
}
type Flag = Exclude<keyof typeof flags, 'help' | 'env' | 'log'>;
function intOption(name: Flag, def: number, min: number, max: number): number {
  const raw = flags[name] ?? String(def);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer in ${min}..${max}, got "${raw}"`);
  return n;
}

const WINDOW = 5000;
const APPEND = 500;
const accounts = intOption('accounts', 1000, 1, 100_000);
const perAccount = intOption('datasets', 100, 1, 1000);
const total = accounts * perAccount;
const recordsEach = intOption('records', 3, 1, APPEND);
const hot = intOption('hot', Math.max(1, Math.round(total / 100)), 0, total);
const coldRows = (total - hot) * recordsEach;
const opts = {
  concurrency: intOption('concurrency', 16, 1, 256),
  reads: intOption('reads', 1000, 1, 1_000_000),
  readConcurrency: intOption('read-concurrency', 4, 1, 64),
  touches: intOption('touches', Math.min(hot, 200), 0, hot),
  loads: intOption('loads', 200, 1, 100_000),
  maxRows: intOption('projector-max-rows', Math.max(10_000, Math.round((hot * WINDOW + coldRows) / 10)), 1000, 100_000_000),
  maxSeconds: intOption('max-seconds', 10_800, 60, 86_400),
  env: Object.fromEntries(
    (flags.env ?? '')
      .split(',')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')).trim(), kv.slice(kv.indexOf('=') + 1).trim()]),
  ) as Record<string, string>,
};
const TARGETS = { readP99Ms: 100, loadP99Ms: 50 };
/** Well above what the bench sends a key a minute; the limiter still runs (one Redis call a request). */
const REQUESTS_PER_MINUTE = 1_000_000;
const DEFINITION = { fields: { day: { type: 'date', name: 'Day' }, team: { type: 'string', name: 'Team' }, amount: { type: 'number', name: 'Amount' } } };
const DAY0 = Date.UTC(2024, 0, 1);
const day = (n: number): string => new Date(DAY0 + (n % 730) * 86_400_000).toISOString().slice(0, 10);
const body = (seed: number, n: number): string => JSON.stringify({ data: Array.from({ length: n }, (_, r) => ({ day: day(seed + r), team: `team-${(seed + r) % 8}`, amount: (seed * 31 + r) % 1000 })) });

const accountName = (a: number): string => `tenant-${String(a).padStart(5, '0')}`;
const datasetName = (d: number): string => `ds-${String(d).padStart(3, '0')}`;
interface Ref {
  readonly a: number;
  readonly d: number;
}
/** The hot datasets, spread over the accounts: the i-th is account i mod accounts, its dataset i div accounts. */
const hotRefs: Ref[] = Array.from({ length: hot }, (_, i) => ({ a: i % accounts, d: Math.floor(i / accounts) % perAccount }));
const isHot = (r: Ref): boolean => r.d * accounts + r.a < hot;

// ── Bookkeeping: everything started is stopped ───────────────────────────────────────────────────────

let stack: TestStack | undefined;
const overall = setTimeout(() => {
  process.stderr.write(`bench:tenants: over --max-seconds ${opts.maxSeconds}; stopping everything\n`);
  void killStack().finally(() => process.exit(3));
}, opts.maxSeconds * 1000);
overall.unref();
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void killStack().finally(() => process.exit(130)));
process.on('exit', () => stack?.signalAllNow('SIGKILL'));

async function killStack(): Promise<void> {
  const s = stack;
  if (s === undefined) return;
  await Promise.all(SERVICES.filter((n) => s.pid(n) !== undefined).map((n) => s.kill(n)));
  await s.drop().catch(() => undefined);
}

const line = (s: string): void => void process.stdout.write(`${s}\n`);
const fmt = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : '–');
const mib = (bytes: number): string => `${fmt(bytes / 2 ** 20, 1)} MiB`;
const quantile = (xs: readonly number[], q: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
};
const dist = (xs: readonly number[]): string => `n=${xs.length} p50 ${fmt(quantile(xs, 0.5))} ms, p99 ${fmt(quantile(xs, 0.99))} ms, max ${fmt(Math.max(...xs))} ms`;

/** Runs `work` over `items`, `n` at once. */
async function bounded<T>(items: readonly T[], n: number, work: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) await work(items[i]!, i);
    }),
  );
}

// ── Memory ───────────────────────────────────────────────────────────────────────────────────────────

/** VmRSS and VmHWM (peak) of a process, in bytes, from /proc; undefined once it is gone. */
function memoryOf(pid: number): { rss: number; peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), peak: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/** Per process, the highest RSS sampled in the current phase; the phases are kept in order. */
class MemorySampler {
  readonly phases: { name: string; peaks: Map<string, number> }[] = [];
  private timer: NodeJS.Timeout | undefined;
  constructor(private readonly pids: Record<string, number>) {}
  phase(name: string): void {
    this.phases.push({ name, peaks: new Map() });
    this.sample();
  }
  start(): void {
    this.timer = setInterval(() => this.sample(), 500);
    this.timer.unref();
  }
  stop(): void {
    this.sample();
    clearInterval(this.timer);
  }
  private sample(): void {
    const current = this.phases.at(-1);
    if (current === undefined) return;
    for (const [name, pid] of Object.entries(this.pids)) {
      const m = memoryOf(pid);
      if (m !== undefined) current.peaks.set(name, Math.max(current.peaks.get(name) ?? 0, m.rss));
    }
  }
}

/** "512Mi", "2Gi" → bytes. */
function quantityBytes(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(q.trim());
  if (m === null) return NaN;
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}

/** Each service's memory limit in the Helm chart: the bound a deployment holds it to. */
function chartMemoryLimits(): Record<ServiceName, number> {
  const values = parseYaml(readFileSync(path.resolve(__dirname, '../helm/pushbase/values.yaml'), 'utf8')) as Record<string, { resources?: { limits?: { memory?: string } } }>;
  return Object.fromEntries(SERVICES.map((s) => [s, quantityBytes(values[s]?.resources?.limits?.memory ?? '')])) as Record<ServiceName, number>;
}

// ── The servers' side: ClickHouse parts, Redis memory, the topic ────────────────────────────────────

interface Sizes {
  readonly tables: Map<string, { rows: number; bytes: number; uncompressed: number; parts: number }>;
  readonly views: number;
  readonly redisUsed: number;
  readonly redisKeys: number;
  readonly events: number;
  readonly topicBytes: number;
}

/**
 * Bytes of the segment files (`*.log`) in the directories named `<topic>-<partition>` below the servers'
 * folder: the broker's log, without the index files it preallocates.
 */
function topicBytes(topic: string): number {
  const root = path.resolve(process.env.PUSHBASE_SERVICES_DIR ?? path.resolve(__dirname, '../.services'));
  const du = (dir: string): number => readdirSync(dir, { withFileTypes: true }).reduce((n, e) => n + (e.isFile() && e.name.endsWith('.log') ? statSync(path.join(dir, e.name)).size : 0), 0);
  const find = (dir: string, depth: number): number => {
    let bytes = 0;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const full = path.join(dir, e.name);
      if (e.name.startsWith(`${topic}-`) && /^\d+$/.test(e.name.slice(topic.length + 1))) bytes += du(full);
      else if (depth > 0) bytes += find(full, depth - 1);
    }
    return bytes;
  };
  try {
    return find(root, 4);
  } catch {
    return NaN;
  }
}

/** Redis's used_memory, and the keys under `prefix`. */
async function redisSize(url: string, prefix: string): Promise<{ redisUsed: number; redisKeys: number }> {
  const redis = await openRedis(url);
  try {
    const redisUsed = Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1]);
    let redisKeys = 0;
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 10_000);
      cursor = next;
      redisKeys += found.length;
    } while (cursor !== '0');
    return { redisUsed, redisKeys };
  } finally {
    redis.disconnect();
  }
}

async function sizes(conn: ClickHouseConnection, s: TestStack, watermarks: HighWatermarks): Promise<Sizes> {
  const parts = await selectRows<{ table: string; rows: string; bytes: string; uncompressed: string; parts: string }>(
    conn,
    `SELECT table, toString(sum(rows)) AS rows, toString(sum(bytes_on_disk)) AS bytes, toString(sum(data_uncompressed_bytes)) AS uncompressed, toString(count()) AS parts
     FROM system.parts WHERE database = '${s.names.database}' AND active GROUP BY table ORDER BY table`,
    'the parts of the stack',
  );
  const [views] = await selectRows<{ n: string }>(conn, `SELECT toString(count()) AS n FROM system.tables WHERE database = '${s.names.database}_views'`, 'views');
  const { redisUsed, redisKeys } = await redisSize(s.servers.PUSHBASE_REDIS_URL, s.names.redisPrefix);
  const ends = await watermarks.of(s.names.topic);
  return {
    tables: new Map(parts.map((p) => [p.table, { rows: Number(p.rows), bytes: Number(p.bytes), uncompressed: Number(p.uncompressed), parts: Number(p.parts) }])),
    views: Number(views?.n ?? NaN),
    redisUsed,
    redisKeys,
    events: [...ends.values()].reduce((a, b) => a + b, 0),
    topicBytes: topicBytes(s.names.topic),
  };
}

/** `base`: Redis before the stack started; `withAccounts`: once the accounts and keys were made. */
function printSizes(label: string, z: Sizes, base: { redisUsed: number }, withAccounts: { redisUsed: number }, datasets: number, records: number): void {
  line(`  ${label}: ${datasets} datasets, ${records} records`);
  for (const [table, t] of z.tables) {
    line(`    clickhouse ${table.padEnd(16)} ${String(t.rows).padStart(10)} rows  ${mib(t.bytes)} on disk (${mib(t.uncompressed)} uncompressed) in ${t.parts} parts; ${fmt(t.rows / datasets, 1)} rows and ${fmt(t.bytes / datasets, 0)} B a dataset`);
  }
  line(`    clickhouse views ${z.views}`);
  const used = z.redisUsed - base.redisUsed;
  const ofDatasets = z.redisUsed - withAccounts.redisUsed;
  line(
    `    redis used_memory +${mib(used)} over the start: the accounts and keys ${fmt((withAccounts.redisUsed - base.redisUsed) / accounts, 0)} B an account, ` +
      `the datasets ${fmt(ofDatasets / datasets, 0)} B a dataset (${fmt(ofDatasets / accounts / 1024, 1)} KiB an account); ${z.redisKeys} keys under the prefix`,
  );
  line(`    kafka topic ${z.events} messages, ${mib(z.topicBytes)} on disk`);
}

/**
 * The stack's databases, views first, with a deadline long enough for ClickHouse 18.16 to drop one view per
 * dataset (tens of thousands); TestStack.drop then finds them gone and goes on to the topic and Redis.
 */
async function dropDatabases(s: TestStack): Promise<void> {
  const conn = connectClickHouse(s.servers.PUSHBASE_CLICKHOUSE_URL, { requestTimeoutMs: 1_800_000 });
  try {
    for (const db of [`${s.names.database}_views`, s.names.database]) {
      const t = performance.now();
      await conn.client.command({ query: `DROP DATABASE IF EXISTS ${quoteIdentifier(db)}` });
      line(`  dropped ${db} in ${fmt((performance.now() - t) / 1000)} s`);
    }
  } catch (e) {
    process.stderr.write(`dropping the stack's databases: ${String(e)} (drop them by hand)\n`);
  } finally {
    await conn.close();
  }
}

// ── HTTP ─────────────────────────────────────────────────────────────────────────────────────────────

const basic = (key: string): string => `Basic ${Buffer.from(`${key}:`).toString('base64')}`;

class Client {
  readonly statuses: Record<string, number> = {};
  private readonly pub: Pool;
  private readonly admin: Pool;
  constructor(
    s: TestStack,
    connections: number,
    private readonly adminToken: string,
  ) {
    this.pub = new Pool(`https://127.0.0.1:${s.port}`, { connections, connect: { ca: s.ca, servername: 'localhost' } });
    this.admin = new Pool(`http://127.0.0.1:${s.adminPort}`, { connections });
  }
  async close(): Promise<void> {
    await Promise.all([this.pub.close(), this.admin.close()]);
  }

  /** One request; its status, time and body (JSON or text). Transport failures count as status -1. */
  async once(where: 'public' | 'admin', method: 'GET' | 'PUT' | 'POST', urlPath: string, auth: string, payload?: string): Promise<{ status: number; ms: number; body: unknown }> {
    const t0 = performance.now();
    try {
      const res = await (where === 'public' ? this.pub : this.admin).request({
        path: urlPath,
        method,
        headers: { authorization: auth, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(payload === undefined ? {} : { body: payload }),
      });
      const text = await res.body.text();
      const ms = performance.now() - t0;
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      return { status: res.statusCode, ms, body: parsed };
    } catch (e) {
      return { status: -1, ms: performance.now() - t0, body: String(e) };
    }
  }

  /**
   * A provisioning request, tried again on 429 (after Retry-After), 503 and a transport failure, and on
   * 401 a few times (a key just minted may not have reached this gateway's store yet); `ok` statuses end it.
   */
  async call(where: 'public' | 'admin', method: 'GET' | 'PUT' | 'POST', urlPath: string, key: string | undefined, payload: string | undefined, ok: readonly number[]): Promise<unknown> {
    const auth = key === undefined ? `Bearer ${this.adminToken}` : basic(key);
    for (let attempt = 0; ; attempt++) {
      const r = await this.once(where, method, urlPath, auth, payload);
      this.statuses[r.status] = (this.statuses[r.status] ?? 0) + 1;
      if (ok.includes(r.status)) return r.body;
      const retriable = r.status === 429 || r.status === 503 || r.status === -1 || (r.status === 401 && attempt < 20);
      if (!retriable || attempt >= 50) throw new Error(`${method} ${urlPath}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      await sleep(r.status === 429 ? 1000 : 100 * Math.min(10, attempt + 1));
    }
  }
}

// ── Catching up ──────────────────────────────────────────────────────────────────────────────────────

/** Resolves once the projector's group has committed up to every partition's end as it is now. */
async function caughtUp(s: TestStack, watermarks: HighWatermarks, admin: ReturnType<ReturnType<typeof createKafka>['admin']>, timeoutMs: number): Promise<number> {
  const t0 = performance.now();
  const ends = await watermarks.of(s.names.topic);
  for (;;) {
    const [committed] = await admin.fetchOffsets({ groupId: s.names.group, topics: [s.names.topic] });
    const at = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    if ([...ends].every(([partition, end]) => end === 0 || (at.get(partition) ?? -1) >= end)) return (performance.now() - t0) / 1000;
    if (performance.now() - t0 > timeoutMs) throw new Error(`the projector did not catch up within ${timeoutMs / 1000} s`);
    await sleep(250);
  }
}

/** The load-duration histogram's buckets (upper bound in s → cumulative count) and its count. */
async function loadHistogram(port: number): Promise<Map<number, number>> {
  const text = await scrape(port);
  return new Map(samples(text, 'pushbase_projector_load_duration_seconds_bucket').map((x) => [x.labels.le === '+Inf' ? Infinity : Number(x.labels.le), x.value]));
}
function counter(text: string, name: string): number {
  return samples(text, name)[0]?.value ?? NaN;
}

/** The bucket bound under which quantile q of the observations between two scrapes fall. */
function histogramQuantile(before: Map<number, number>, after: Map<number, number>, q: number): { n: number; le: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const n = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  for (const le of bounds) if ((after.get(le) ?? 0) - (before.get(le) ?? 0) >= q * n) return { n, le };
  return { n, le: Infinity };
}

// ── The run ──────────────────────────────────────────────────────────────────────────────────────────

async function main(): Promise<void> {
  const started = performance.now();
  const limits = chartMemoryLimits();
  line(
    `bench:tenants: ${accounts} accounts × ${perAccount} datasets = ${total} datasets of ${recordsEach} records, ${hot} of them brought to ${WINDOW}; ` +
      `concurrency ${opts.concurrency}; PUSHBASE_PROJECTOR_MAX_ROWS=${opts.maxRows}`,
  );
  line(`  ${new Date().toISOString()}, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  const redisBase = await (async () => {
    const redis = await openRedis(process.env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      return { redisUsed: Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1]) };
    } finally {
      redis.disconnect();
    }
  })();

  // The projector logs held rows in every `written` line: the highest seen is the bound's test.
  const logFile = flags.log === undefined ? undefined : createWriteStream(flags.log);
  const held = { rows: 0, datasets: 0, maxRows: 0, evictions: 0 };
  const s = new TestStack({
    keys: {},
    detached: true,
    env: { PUSHBASE_PROJECTOR_MAX_ROWS: String(opts.maxRows), ...opts.env },
    onLine: (service, text) => {
      logFile?.write(`${new Date().toISOString()} ${service} ${text}\n`);
      if (service !== 'projector' || !text.includes('"written"')) return;
      try {
        const m = JSON.parse(text) as { cachedRows?: number; cachedDatasets?: number; evictions?: number };
        held.rows = m.cachedRows ?? held.rows;
        held.datasets = m.cachedDatasets ?? held.datasets;
        held.maxRows = Math.max(held.maxRows, held.rows);
        held.evictions = m.evictions ?? held.evictions;
      } catch {
        /* not JSON */
      }
    },
  });
  stack = s;
  const t0 = performance.now();
  await s.start();
  const pids = Object.fromEntries(SERVICES.map((n) => [n, s.pid(n)!])) as Record<string, number>;
  const servers: Record<string, number> = {};
  try {
    for (const server of await serverStatus(readServicesConfig(process.env, path.resolve(__dirname, '..')))) if (server.pid !== undefined) servers[server.name] = server.pid;
  } catch {
    // not servers this machine's `services up` started
  }
  line(`  stack up in ${fmt((performance.now() - t0) / 1000)} s (topic ${s.names.topic}): ${SERVICES.map((n) => `${n} pid ${pids[n]}`).join(', ')}`);
  const memory = new MemorySampler({ ...pids, ...servers });
  memory.start();

  const kafka = createKafka({ brokers: parseBrokers(s.servers.PUSHBASE_KAFKA_BROKERS), clientId: 'pushbase-bench-tenants' });
  const kafkaAdmin = kafka.admin();
  await kafkaAdmin.connect();
  const watermarks = new HighWatermarks(kafka);
  const conn = connectClickHouse(s.servers.PUSHBASE_CLICKHOUSE_URL);
  const client = new Client(s, Math.max(opts.concurrency, opts.readConcurrency) * 2, s.adminToken);
  const keys: string[] = new Array<string>(accounts);
  const phase = async (name: string, items: number, work: () => Promise<void>): Promise<void> => {
    memory.phase(name);
    const p0 = performance.now();
    await work();
    const seconds = (performance.now() - p0) / 1000;
    line(`  ${name.padEnd(28)} ${String(items).padStart(7)} in ${fmt(seconds)} s (${fmt(items / seconds)}/s)`);
  };
  try {
    // ── Provisioning ─────────────────────────────────────────────────────────────────────────────────
    const accountIds = Array.from({ length: accounts }, (_, a) => a);
    await phase('accounts and keys', accounts, () =>
      bounded(accountIds, opts.concurrency, async (a) => {
        const quotas = { requests_per_minute: REQUESTS_PER_MINUTE, ...(perAccount > 100 ? { datasets: perAccount } : {}) };
        await client.call('admin', 'POST', '/admin/accounts', undefined, JSON.stringify({ account: accountName(a), quotas }), [201]);
        const minted = (await client.call('admin', 'POST', `/admin/accounts/${accountName(a)}/keys`, undefined, JSON.stringify({ label: 'bench-tenants' }), [201])) as { key: string };
        keys[a] = minted.key;
      }),
    );
    const redisAccounts = await redisSize(s.servers.PUSHBASE_REDIS_URL, s.names.redisPrefix);
    line(`  redis: ${redisAccounts.redisKeys} keys under the prefix once the accounts were made`);
    // Dataset-major: requests in flight at once belong to different accounts (each account's changes are
    // serialised by its lease, and each account has a share of a gateway's turns).
    const all: Ref[] = Array.from({ length: total }, (_, i) => ({ a: i % accounts, d: Math.floor(i / accounts) }));
    const ds = (r: Ref): string => `/datasets/${datasetName(r.d)}`;
    await phase('datasets created', total, () => bounded(all, opts.concurrency, (r) => client.call('public', 'PUT', ds(r), keys[r.a], JSON.stringify(DEFINITION), [200, 201]).then(() => undefined)));
    await phase(`appends of ${recordsEach} records`, total, () => bounded(all, opts.concurrency, (r, i) => client.call('public', 'POST', `${ds(r)}/data`, keys[r.a], body(i, recordsEach), [200]).then(() => undefined)));
    memory.phase('catching up');
    line(`  projector caught up ${fmt(await caughtUp(s, watermarks, kafkaAdmin, 1_800_000))} s after the last append`);
    // Views follow in the background (two DDL statements a dataset): timed apart, bounded so a large run goes on.
    const views = await viewsMade(conn, s.names.database, total, 600_000);
    line(`  ${fmt(views.made)} of ${fmt(total)} datasets' views made ${fmt(views.seconds)} s after that`);
    const coldSizes = await sizes(conn, s, watermarks);

    const rounds = Math.ceil((WINDOW - recordsEach) / APPEND);
    const fills: { ref: Ref; round: number }[] = [];
    for (let round = 0; round < rounds; round++) for (const ref of hotRefs) fills.push({ ref, round });
    const bigBodies = Array.from({ length: 16 }, (_, i) => body(i * 37, APPEND));
    await phase(`appends of ${APPEND} (${hot} hot)`, fills.length, () =>
      bounded(fills, opts.concurrency, ({ ref }, i) => client.call('public', 'POST', `${ds(ref)}/data`, keys[ref.a], bigBodies[i % bigBodies.length], [200]).then(() => undefined)),
    );
    memory.phase('catching up');
    line(`  projector caught up ${fmt(await caughtUp(s, watermarks, kafkaAdmin, 1_800_000))} s after the last append`);
    const hotSizes = await sizes(conn, s, watermarks);
    line(`  provisioning statuses ${JSON.stringify(client.statuses)}`);

    // ── Reads ────────────────────────────────────────────────────────────────────────────────────────
    let seed = 1;
    const rnd = (): number => {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      return seed / 2 ** 32;
    };
    const anyRef = (i: number): Ref => (i % 2 === 0 && hot > 0 ? hotRefs[Math.floor(rnd() * hot)]! : { a: Math.floor(rnd() * accounts), d: Math.floor(rnd() * perAccount) });
    const kinds: { name: string; where: 'public' | 'admin'; path: (r: Ref) => string; key: boolean }[] = [
      { name: 'read API listing', where: 'public', path: (r) => `/read/v1/accounts/${accountName(r.a)}/datasets`, key: true },
      { name: 'admin listing', where: 'admin', path: (r) => `/admin/accounts/${accountName(r.a)}/datasets`, key: false },
      { name: 'read API records (50)', where: 'public', path: (r) => `/read/v1/accounts/${accountName(r.a)}/datasets/${datasetName(r.d)}/records?limit=50`, key: true },
      { name: 'read API aggregate', where: 'public', path: (r) => `/read/v1/accounts/${accountName(r.a)}/datasets/${datasetName(r.d)}/aggregate?op=sum&field=amount&group_by=team`, key: true },
    ];
    memory.phase('reads');
    line(`  reads, ${opts.reads} of each kind, ${opts.readConcurrency} at once, the kinds interleaved, half on hot datasets (target p99 < ${TARGETS.readP99Ms} ms):`);
    const jobs = Array.from({ length: opts.reads * kinds.length }, (_, i) => ({ kind: i % kinds.length, ref: anyRef(Math.floor(i / kinds.length)) }));
    const times = kinds.map(() => ({ ms: [] as number[], hot: [] as number[], statuses: new Map<number, number>() }));
    // A key reads at most PUSHBASE_READ_RATE_LIMIT_PER_MINUTE (600) a minute: paced to keep every key below it.
    const minGapMs = (60_000 / 500) / accounts;
    let nextAt = performance.now();
    await bounded(jobs, opts.readConcurrency, async ({ kind, ref }) => {
      const wait = nextAt - performance.now();
      nextAt = Math.max(nextAt, performance.now()) + minGapMs;
      if (wait > 0) await sleep(wait);
      const k = kinds[kind]!;
      const r = await client.once(k.where, 'GET', k.path(ref), k.key ? basic(keys[ref.a]!) : `Bearer ${s.adminToken}`);
      const t = times[kind]!;
      t.statuses.set(r.status, (t.statuses.get(r.status) ?? 0) + 1);
      if (r.status === 200) (isHot(ref) && kind >= 2 ? t.hot : t.ms).push(r.ms);
    });
    kinds.forEach((k, i) => {
      const t = times[i]!;
      if (i < 2) line(`    ${k.name.padEnd(24)} ${dist(t.ms)}  ${JSON.stringify(Object.fromEntries(t.statuses))}`);
      else line(`    ${k.name.padEnd(24)} all ${dist([...t.ms, ...t.hot])}; hot ${dist(t.hot)}; few-record ${dist(t.ms)}  ${JSON.stringify(Object.fromEntries(t.statuses))}`);
    });

    // ── The projector's loads of evicted datasets ────────────────────────────────────────────────────
    const metricsPort = s.running.metricsPort('projector')!;
    const histBefore = await loadHistogram(metricsPort);
    const countersBefore = await scrape(metricsPort);
    // Hot datasets in the order they were last written (the least recently used first: dropped by now),
    // and as many few-record ones at random.
    const touchedHot = hotRefs.slice(0, opts.touches);
    const touchedCold: Ref[] = [];
    while (touchedCold.length < opts.touches && total > hot) {
      const r = { a: Math.floor(rnd() * accounts), d: Math.floor(rnd() * perAccount) };
      if (!isHot(r)) touchedCold.push(r);
    }
    const touched = touchedHot.flatMap((r, i) => [r, ...(touchedCold[i] === undefined ? [] : [touchedCold[i]])]);
    await phase('touches (1 record each)', touched.length, () => bounded(touched, opts.concurrency, (r, i) => client.call('public', 'POST', `${ds(r)}/data`, keys[r.a], body(i, 1), [200]).then(() => undefined)));
    memory.phase('catching up');
    await caughtUp(s, watermarks, kafkaAdmin, 600_000);
    const histAfter = await loadHistogram(metricsPort);
    const countersAfter = await scrape(metricsPort);
    const delta = (name: string): number => counter(countersAfter, name) - counter(countersBefore, name);
    const finite = [...histAfter.keys()].filter(Number.isFinite);
    const bound = (le: number): string => (Number.isFinite(le) ? `≤ ${fmt(le * 1000, 0)} ms` : `> ${fmt(Math.max(...finite) * 1000, 0)} ms`);
    const p50 = histogramQuantile(histBefore, histAfter, 0.5);
    const p99 = histogramQuantile(histBefore, histAfter, 0.99);
    line(`  the projector's loads (target p99 < ${TARGETS.loadP99Ms} ms):`);
    line(
      `    in the projector, over the touches: ${delta('pushbase_projector_loads_total')} datasets loaded in ${p99.n} queries for ${touched.length} touched, ` +
        `${delta('pushbase_projector_evictions_total')} evictions; a query's p50 ${bound(p50.le)}, p99 ${bound(p99.le)} (histogram bucket bounds)`,
    );
    memory.phase('loads from here');
    const store = new ClickHouseProjectionStore(conn, s.names.database);
    const timeLoads = async (refs: readonly Ref[]): Promise<number[]> => {
      const out: number[] = [];
      for (const r of refs) {
        const t = performance.now();
        const [one] = await store.loadMany([{ account: accountName(r.a), dataset: datasetName(r.d) }], { values: 'dates' });
        out.push(performance.now() - t);
        if (one === undefined) throw new Error(`${accountName(r.a)}/${datasetName(r.d)} did not load`);
      }
      return out;
    };
    const pick = (n: number, from: () => Ref): Ref[] => Array.from({ length: n }, from);
    await timeLoads(pick(5, () => anyRef(0)));
    const hotLoads = hot === 0 ? [] : await timeLoads(pick(opts.loads, () => hotRefs[Math.floor(rnd() * hot)]!));
    const coldLoads = await timeLoads(pick(opts.loads, () => anyRef(1)).filter((r) => !isHot(r)));
    line(`    one dataset's load, timed here, one at a time: ${WINDOW}-record ${dist(hotLoads)}; few-record ${dist(coldLoads)}`);
    line(`    the projector held at most ${held.maxRows} rows (bound ${opts.maxRows}); at its last write ${held.rows} rows of ${held.datasets} datasets, ${held.evictions} evictions in all`);

    // ── Memory and sizes ─────────────────────────────────────────────────────────────────────────────
    memory.stop();
    line(`  memory (RSS; peak per phase, sampled every 500 ms; VmHWM the process's own peak) against the chart's limit:`);
    for (const [name, pid] of Object.entries({ ...pids, ...servers })) {
      const now = memoryOf(pid);
      const limit = (limits as Record<string, number>)[name];
      const perPhase = memory.phases.map((p) => `${p.name} ${mib(p.peaks.get(name) ?? NaN)}`).join(', ');
      line(`    ${name.padEnd(10)} peak ${mib(now?.peak ?? NaN)}${limit === undefined ? '' : ` of ${mib(limit)} (${fmt(((now?.peak ?? NaN) / limit) * 100, 0)} %)`}, now ${mib(now?.rss ?? NaN)}`);
      line(`               ${perPhase}`);
    }
    line(`  sizes (ClickHouse parts as they stand, not merged):`);
    printSizes('after the few-record datasets', coldSizes, redisBase, redisAccounts, total, total * recordsEach);
    printSizes('after the hot ones', hotSizes, redisBase, redisAccounts, total, (total - hot) * recordsEach + hot * WINDOW);
    line(`  total ${fmt((performance.now() - started) / 1000)} s`);
  } finally {
    memory.stop();
    await client.close().catch(() => undefined);
    await kafkaAdmin.disconnect().catch(() => undefined);
    await watermarks.close().catch(() => undefined);
    await conn.close().catch(() => undefined);
    await s.stop().catch(() => undefined);
    await dropDatabases(s);
    await s.drop().catch((e: unknown) => process.stderr.write(`dropping the stack's names: ${String(e)}\n`));
    stack = undefined;
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`bench:tenants: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n${stack?.output.slice(-20).join('\n') ?? ''}\n`);
    void killStack().finally(() => process.exit(1));
  },
);

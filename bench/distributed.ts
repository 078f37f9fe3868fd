/*
 * `npm run bench:distributed` — prints figures; it is not a test and asserts nothing.
 *
 * The four services as separate processes (gateway, schema, records, projector; the stack of
 * `npm run start:distributed`) on the servers at PUSHBASE_KAFKA_BROKERS, PUSHBASE_CLICKHOUSE_URL and
 * PUSHBASE_REDIS_URL (the shared ones of `services:up` by default), in a topic, database, Redis prefix and
 * projector group of its own (removed at the end). A load generator in a child process (bench/loadgen.ts)
 * sends 500-record appends over HTTPS with keep-alive from many accounts, one key each:
 *
 *   peak   closed loop, --concurrency requests in flight, for --seconds after --warmup:
 *          records/s acknowledged, ack p50/p99; and records/s end to end (2xx → visible): every record
 *          acknowledged in the phase over the span from its first request until the projector had applied
 *          them all. The closed loop acknowledges faster than the projector applies while it lasts; that
 *          excess is backlog, so the targets use the end-to-end figure;
 *   half   open loop at half the end-to-end peak on other datasets: ack p50/p99 there;
 *   rate   open loop at the target rate, 50,000 records/s (100 appends/s), on a third set of datasets:
 *          whether that rate is kept end to end, acknowledged and visible within the freshness target;
 *   fresh  in every phase, the datasets of --watch accounts are timed from each 2xx until the admin
 *          listener's listing counts its records: freshness p50/p99. The watched accounts' listings are
 *          polled one after another, a round every --poll-ms (or back to back when a round takes longer).
 *          A sample may overstate freshness by up to one round's period plus one poll, never understate
 *          it. Polled back to back (--poll-ms 0, as the bench did before), the polls alone kept about 0.65
 *          of the 2 cores busy (ClickHouse ~33 %, gateway ~30 %, measured with no appends running): the
 *          instrument took a third of the machine it measured;
 *   slow   in the half and rate phases, how busy the machine's cores were in the window and the cores each
 *          service and each server of `services:up` used; the share of acks over 50 ms as the load
 *          generator saw them, and the share over 50 ms of the gateway's answers and of its Append calls
 *          to records, of records' handling of those calls, its Kafka appends and its produce batches (the
 *          services' own histograms, from /metrics): where the ack tail was lost;
 *   raw    in the same run, the same 500-record bodies, decided and projected into rows by the same pure
 *          code, each batch one INSERT straight into a copy of the records table, one after the other; and
 *          the same rows in INSERTs of the projector's flush size: ClickHouse's own rate, which the
 *          projector's catch-up rate (rows inserted per second after the peak's load, until it had applied
 *          every event) is compared with.
 *
 * The API's limit of 60 requests a minute per key would cap the load at a few requests a second, so the
 * stack runs with PUSHBASE_RATE_LIMIT_PER_MINUTE=1000000000 (the limiter still runs: one Redis call each).
 * A dataset's listing counts its records only up to the 5000-record window, so every dataset gets at most
 * ten appends in a run: --accounts × --datasets must be large enough for the rate (it says when not).
 *
 * Flags (or BENCH_<NAME>): --seconds 20 --warmup 3 --concurrency 32 --accounts 40 --datasets 60 --watch 3
 *   --poll-ms 100
 *   --raw-batches 200 --max-seconds 900
 *   --cpu-prof DIR   every service writes a V8 CPU profile into DIR/<service> when it stops (summarise one
 *                    with `node --import tsx bench/cpuprofile.ts FILE`); the profiler slows them
 *   --env K=V,…      extra environment for the services (e.g. PUSHBASE_PROJECTOR_FLUSH_MS=250)
 *   --node-args=F    extra node flags (split on spaces): for every service when F starts with "-"
 *                    (--node-args=--trace-gc), else for some, as SERVICE=FLAGS;… with SERVICE one of
 *                    gateway, schema, records, projector
 *                    ("--node-args=projector=--trace-gc;records=--trace-gc --trace-incremental-marking")
 *   --log FILE       every line the services write, prefixed with the time and the service's name
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connectClickHouse, dropDatabase, migrate, quoteIdentifier } from '@pushbase/clickhouse';
import { decideAppend, decideDefine, streamKey, type DatasetSummary } from '@pushbase/domain';
import { project, type ProjectedDataset } from '@pushbase/projector';
import { insertBody, selectRows } from '../services/clickhouse/src/client';
import { storedPlan } from '../services/clickhouse/src/layout';
import { RowBinaryWriter } from '../services/clickhouse/src/row-binary';
import { RECORDS_INSERT_COLUMNS, writeRecordsRow } from '../services/clickhouse/src/write-store';
import { SERVICES, type ServiceName } from '../services/cli/src/distributed';
import { createKafka, parseBrokers } from '@pushbase/kafka';
import { readServicesConfig } from '../deploy/local/config';
import { status as serverStatus } from '../deploy/local/local-servers';
import { TestStack } from '../test/helpers/distributed-stack';
import { HighWatermarks } from '../test/helpers/high-watermarks';
import { sample, samples, scrape } from '../test/helpers/metrics';
import { forkLoad, SLOW_MS, type Ack, type Job, type LoadRequest, type LoadResult, type Target } from './loadgen';
import { viewsMade } from './views';
import { appendBody, DATASET_DEFINITION, RECORDS_PER_REQUEST } from './workload';

// ── Options ──────────────────────────────────────────────────────────────────────────────────────────

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    accounts: { type: 'string' },
    datasets: { type: 'string' },
    watch: { type: 'string' },
    'poll-ms': { type: 'string' },
    'raw-batches': { type: 'string' },
    'max-seconds': { type: 'string' },
    'cpu-prof': { type: 'string' },
    env: { type: 'string' },
    'node-args': { type: 'string' },
    log: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (flags.help === true) {
  process.stdout.write(readFileSync(__filename, 'utf8').split('*/')[0]!.replace(/^\/\*\n?/, '').replace(/^ \* ?/gm, ''));
  process.exit(0);
}
type Flag = keyof typeof flags;
function option(name: Flag, def: string): string {
  const v = flags[name];
  if (typeof v === 'string') return v;
  const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
  return env !== undefined && env !== '' ? env : def;
}
function intOption(name: Flag, def: number, min: number, max: number): number {
  const raw = option(name, String(def));
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer in ${min}..${max}, got "${raw}"`);
  return n;
}
/**
 * `--node-args`: flags (split on spaces) for every service when the value starts with "-", else
 * `service=FLAGS` parts separated by ";" (a flag's value cannot hold ";").
 */
function nodeArgsOption(raw: string): Record<ServiceName, string[]> {
  const split = (flagsText: string): string[] => flagsText.split(/\s+/).filter(Boolean);
  const text = raw.trim();
  if (text === '' || text.startsWith('-')) return Object.fromEntries(SERVICES.map((n) => [n, split(text)])) as Record<ServiceName, string[]>;
  const out = Object.fromEntries(SERVICES.map((n) => [n, [] as string[]])) as Record<ServiceName, string[]>;
  for (const part of text.split(';').filter((p) => p.trim() !== '')) {
    const m = /^\s*([a-z]+)\s*=(.*)$/.exec(part);
    const service = m?.[1] as ServiceName | undefined;
    if (m === null || service === undefined || !SERVICES.includes(service)) {
      throw new Error(`--node-args: "${part.trim()}" is not SERVICE=FLAGS with SERVICE one of ${SERVICES.join(', ')} (or start the value with "-" for every service)`);
    }
    out[service].push(...split(m[2]!));
  }
  return out;
}
const opts = {
  seconds: intOption('seconds', 20, 1, 300),
  warmup: intOption('warmup', 3, 0, 60),
  concurrency: intOption('concurrency', 32, 1, 512),
  accounts: intOption('accounts', 40, 1, 1000),
  // A third of each account's datasets take each phase (peak, half, rate).
  datasets: intOption('datasets', 60, 3, 100),
  watch: intOption('watch', 3, 1, 100),
  pollMs: intOption('poll-ms', 100, 0, 1000),
  rawBatches: intOption('raw-batches', 200, 1, 10_000),
  maxSeconds: intOption('max-seconds', 900, 30, 3600),
  cpuProf: option('cpu-prof', ''),
  /** A file that gets every line every service writes, with the time it arrived and the service's name. */
  log: option('log', ''),
  env: Object.fromEntries(
    option('env', '')
      .split(',')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')).trim(), kv.slice(kv.indexOf('=') + 1).trim()]),
  ) as Record<string, string>,
  nodeArgs: nodeArgsOption(option('node-args', '')),
};
if (opts.watch > opts.accounts) throw new Error('--watch must not exceed --accounts');

const RATE_LIMIT = 1_000_000_000;
const MAX_APPENDS_PER_DATASET = 5000 / RECORDS_PER_REQUEST;
/*
 * End to end at the peak: at least `recordsPerS` (`stretchRecordsPerS` the stretch) and at least
 * `ackedRatio` of what the same phase acknowledged; the projector's catch-up rate at least `catchUpRatio` of
 * the raw flush-size insert rate; the ack and freshness targets at half the peak and at `rateRecordsPerS`.
 */
const TARGETS = { recordsPerS: 75_000, stretchRecordsPerS: 100_000, ackedRatio: 0.9, catchUpRatio: 0.5, rateRecordsPerS: 50_000, halfAckP99Ms: 50, freshP99Ms: 1000 };

// ── Bookkeeping: everything started is stopped, whatever happens ─────────────────────────────────────

const generators = new Set<ChildProcess>();
let stack: TestStack | undefined;
const overall = setTimeout(() => {
  process.stderr.write(`bench:distributed: over --max-seconds ${opts.maxSeconds}; stopping everything\n`);
  for (const g of generators) g.kill('SIGKILL');
  void killStack().finally(() => process.exit(3));
}, opts.maxSeconds * 1000);
overall.unref();
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    for (const g of generators) g.kill('SIGKILL');
    void killStack().finally(() => process.exit(130));
  });
}

// The services run in sessions of their own, out of reach of a Ctrl-C at the terminal: whatever ends this
// process (an uncaught error, a stack still starting), they do not outlive it.
process.on('exit', () => stack?.signalAllNow('SIGKILL'));

async function killStack(): Promise<void> {
  const s = stack;
  if (s === undefined) return;
  await Promise.all(SERVICES.filter((n) => s.pid(n) !== undefined).map((n) => s.kill(n)));
  await s.drop().catch(() => undefined);
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command name: utime and stime are fields 14 and 15 (1-based) → indices 11, 12 here.
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/**
 * The machine's CPU time so far, busy and in all, in ticks summed over its cores (/proc/stat), and each
 * watched process's own (in seconds); undefined where there is no /proc.
 */
interface MachineTicks {
  readonly busy: number;
  readonly total: number;
  /** The cores /proc/stat sums over (all of the host's, whatever this process may use). */
  readonly cores: number;
  readonly at: number;
  /** A watched process that has exited since is left out. */
  readonly processes: Readonly<Record<string, number>>;
}
/** Processes whose CPU the paced phases report: the four services, and the servers `services:up` started. */
const watchedProcesses: Record<string, number> = {};
function machineTicks(): MachineTicks | undefined {
  try {
    const lines = readFileSync('/proc/stat', 'utf8').split('\n');
    const cpu = lines[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user and nice)
    const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
    const processes: Record<string, number> = {};
    for (const [name, pid] of Object.entries(watchedProcesses)) {
      try {
        processes[name] = cpuSeconds(pid);
      } catch {
        // gone (a server restarted meanwhile): no figure for it
      }
    }
    return { busy: total - cpu[3]! - cpu[4]!, total, cores: lines.filter((l) => /^cpu\d/.test(l)).length, at: performance.now(), processes };
  } catch {
    return undefined;
  }
}
/** The share of the machine busy between two readings, and the cores each watched process used. */
interface MachineUse {
  readonly busy: number;
  readonly machineCores: number;
  readonly cores: Readonly<Record<string, number>>;
}
function machineUse(a: MachineTicks | undefined, b: MachineTicks | undefined): MachineUse | undefined {
  if (a === undefined || b === undefined || b.total <= a.total) return undefined;
  const seconds = (b.at - a.at) / 1000;
  const both = Object.keys(a.processes).filter((n) => b.processes[n] !== undefined);
  return { busy: (b.busy - a.busy) / (b.total - a.total), machineCores: b.cores, cores: Object.fromEntries(both.map((n) => [n, (b.processes[n]! - a.processes[n]!) / seconds])) };
}

/** A process's peak resident set (VmHWM) in MiB, from /proc/<pid>/status. */
function peakRssMiB(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? NaN : Number(match[1]) / 1024;
}

const line = (s = ''): boolean => process.stdout.write(`${s}\n`);
const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');
const load = (req: LoadRequest, windowOpen?: () => void): Promise<LoadResult> =>
  forkLoad(
    req,
    (child) => {
      generators.add(child);
      child.once('exit', () => generators.delete(child));
    },
    windowOpen,
  );
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
function requireClean(what: string, r: LoadResult): void {
  if (r.errors > 0 || r.timedOut) throw new Error(`${what}: ${r.errors} failed requests${r.timedOut ? ', timed out' : ''}; ${JSON.stringify(r.statuses)}\n  ${r.firstErrors.join('\n  ')}`);
}

// ── Freshness: the admin listing polled back to back while a phase runs ──────────────────────────────

interface Observation {
  /** Epoch ms the poll was sent and its answer arrived. */
  readonly sent: number;
  readonly done: number;
  /** dataset path (`/datasets/<id>/data`) → records counted. */
  readonly counts: ReadonlyMap<string, number>;
}

function adminGet(s: TestStack, urlPath: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: s.adminPort, path: urlPath, headers: { authorization: `Bearer ${s.adminToken}` }, timeout: 30_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('admin request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** Polls the watched accounts' listings until `stop` resolves; returns every observation. */
async function watch(s: TestStack, accounts: readonly string[], stop: Promise<unknown>): Promise<{ observations: Observation[]; errors: number }> {
  let stopped = false;
  void stop.finally(() => {
    stopped = true;
  });
  const observations: Observation[] = [];
  let errors = 0;
  while (!stopped) {
    const round = performance.now();
    for (const account of accounts) {
      const sent = performance.timeOrigin + performance.now();
      try {
        const res = await adminGet(s, `/admin/accounts/${account}/datasets`);
        const done = performance.timeOrigin + performance.now();
        if (res.status !== 200) {
          errors++;
          continue;
        }
        const counts = new Map((res.body as { datasets: { id: string; record_count: number }[] }).datasets.map((d) => [`${account}/datasets/${d.id}/data`, d.record_count]));
        observations.push({ sent, done, counts });
      } catch {
        errors++;
      }
    }
    // The next round of polls no sooner than --poll-ms after this one began.
    const rest = round + opts.pollMs - performance.now();
    if (rest > 0 && !stopped) await new Promise((r) => setTimeout(r, rest));
  }
  return { observations, errors };
}

/**
 * Freshness of each watched 2xx: from the answer's arrival to the end of the first poll, sent after it,
 * whose listing counts that many appends' records for the dataset (an upper bound: it includes up to one
 * poll's time). Appends past the window's ten per dataset cannot be seen in a count and are left out.
 */
function freshness(acks: readonly Ack[], keyOf: (ack: Ack) => string, observations: readonly Observation[]): { samples: number[]; unseen: number; beyondWindow: number } {
  const byDataset = new Map<string, number[]>();
  for (const a of acks) byDataset.set(keyOf(a), [...(byDataset.get(keyOf(a)) ?? []), a.at]);
  const samples: number[] = [];
  let unseen = 0;
  let beyondWindow = 0;
  for (const [key, times] of byDataset) {
    times.sort((a, b) => a - b);
    times.forEach((at, i) => {
      if (i + 1 > MAX_APPENDS_PER_DATASET) {
        beyondWindow++;
        return;
      }
      const needed = (i + 1) * RECORDS_PER_REQUEST;
      const seen = observations.find((o) => o.sent >= at && (o.counts.get(key) ?? 0) >= needed);
      if (seen === undefined) unseen++;
      else samples.push(seen.done - at);
    });
  }
  return { samples, unseen, beyondWindow };
}

/** Waits until every account's listing holds `datasets` datasets. */
async function listedEverywhere(s: TestStack, accounts: readonly string[], datasets: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const pending = new Set(accounts);
  while (pending.size > 0) {
    for (const account of [...pending]) {
      const res = await adminGet(s, `/admin/accounts/${account}/datasets`);
      if (res.status === 200 && (res.body as { datasets: unknown[] }).datasets.length >= datasets) pending.delete(account);
    }
    if (pending.size === 0) return;
    if (Date.now() > deadline) throw new Error(`${pending.size} accounts still lack datasets after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Waits until the projector group's committed offsets reach every partition's high watermark as it is now:
 * every event acknowledged so far is projected. Returns the seconds it took.
 */
async function projectorCaughtUp(s: TestStack, timeoutMs: number): Promise<number> {
  const t = performance.now();
  const kafka = createKafka({ brokers: parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'), clientId: 'pushbase-bench' });
  const admin = kafka.admin();
  const watermarks = new HighWatermarks(kafka);
  await admin.connect();
  try {
    const ends = await watermarks.of(s.names.topic);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [committed] = await admin.fetchOffsets({ groupId: s.names.group, topics: [s.names.topic] });
      const at = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      if ([...ends].every(([partition, end]) => end === 0 || (at.get(partition) ?? -1) >= end)) return (performance.now() - t) / 1000;
      if (Date.now() > deadline) throw new Error(`the projector did not catch up within ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.disconnect();
    await watermarks.close();
  }
}

// ── The raw insert rate: the same batches straight into ClickHouse ───────────────────────────────────

/**
 * The same 500-record bodies, decided and projected into rows by the same pure code as the services, each
 * batch one INSERT of its encoded rows (the projection's own column layout) straight into a copy of the
 * records table, one after the other: ClickHouse's own rate for these batches, without the projector's
 * bookkeeping (heads, validation of heads). For context, the same rows again in INSERTs of `flushRows`.
 */
interface RawRate {
  readonly perBatchRecordsPerS: number;
  readonly perBatchMedianMs: number;
  readonly flushSizeRecordsPerS: number;
  /** How long the raw inserts waited for ClickHouse's merges to end, and how many still ran then. */
  readonly mergeWaitS: number;
  readonly stillMerging: number;
  /** One-batch INSERTs ClickHouse delayed for too many parts (system.events DelayedInserts). */
  readonly delayedInserts: number;
}
async function rawInsert(bodies: readonly string[], flushRows: number): Promise<RawRate> {
  const conn = connectClickHouse(process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123');
  const database = `pb_bench_raw_${randomBytes(5).toString('hex')}`;
  try {
    const account = 'bench-raw';
    const datasets = Math.ceil(opts.rawBatches / MAX_APPENDS_PER_DATASET);
    const summaries: DatasetSummary[] = [];
    const held = new Map<string, ProjectedDataset>();
    let offset = 0;
    const at = Date.UTC(2026, 0, 1);
    for (let d = 0; d < datasets; d++) {
      const defined = decideDefine({ account, id: `raw-${d}`, body: DATASET_DEFINITION, at, newIncarnation: `raw-${d}` }, undefined, 0);
      if (defined.outcome !== 'created') throw new Error('unreachable: a fresh dataset was found');
      summaries.push(defined.dataset);
      held.set(streamKey(account, `raw-${d}`), project(undefined, defined.event, { partition: 0, offset: offset++ }).dataset);
    }
    const plan = storedPlan(summaries[0]!.definition);
    // Each batch's rows in the store's own format and columns (RowBinary, RECORDS_INSERT_COLUMNS).
    const batches: Buffer[] = [];
    for (let b = 0; b < opts.rawBatches; b++) {
      const dataset = summaries[b % datasets]!;
      const event = decideAppend({ account, id: dataset.id, body: JSON.parse(bodies[b % bodies.length]!), at }, dataset);
      const key = streamKey(account, dataset.id);
      const step = project(held.get(key), event, { partition: 0, offset: offset++ });
      held.set(key, step.dataset);
      const w = new RowBinaryWriter();
      for (const r of step.rows) writeRecordsRow(w, r, '', plan, r.record);
      batches.push(Buffer.from(w.bytes()));
    }
    await migrate(conn, database);
    const tables = [`${quoteIdentifier(database)}.raw_batches`, `${quoteIdentifier(database)}.raw_flush`];
    for (const t of tables) await conn.client.command({ query: `CREATE TABLE ${t} AS ${quoteIdentifier(database)}.records` });
    // ClickHouse may still be merging the parts the phases wrote. Its two merge threads are then busy, the
    // copy's one-part-per-INSERT pile up past parts_to_delay_insert (150), and it delays every INSERT on
    // purpose (40-100 ms each, the rate a fifth of its own): a baseline that low flatters the ratio. So the
    // raw inserts wait until no merge runs (at most 5 minutes), and say how many INSERTs were delayed.
    /** Waits until no merge runs, at most 5 minutes; the merges still running then. */
    const mergesEnded = async (): Promise<number> => {
      const start = performance.now();
      for (;;) {
        const running = Number((await selectRows<{ n: string }>(conn, 'SELECT count() AS n FROM system.merges', 'counting merges'))[0]?.n ?? 0);
        if (running === 0 || performance.now() - start >= 300_000) return running;
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    const waitStart = performance.now();
    const merging = await mergesEnded();
    const mergeWaitS = (performance.now() - waitStart) / 1000;
    const delayed = async (): Promise<number> =>
      Number((await selectRows<{ n: string }>(conn, "SELECT sum(value) AS n FROM system.events WHERE event = 'DelayedInserts'", 'counting delayed inserts'))[0]?.n ?? 0);
    const delayedBefore = await delayed();
    const records = opts.rawBatches * RECORDS_PER_REQUEST;
    const times: number[] = [];
    const t0 = performance.now();
    for (const batch of batches) {
      const t = performance.now();
      await insertBody(conn, tables[0]!, batch, 'a raw batch', { format: 'RowBinary', columns: RECORDS_INSERT_COLUMNS });
      times.push(performance.now() - t);
    }
    const perBatchMs = performance.now() - t0;
    const delayedInserts = (await delayed()) - delayedBefore;
    // The flush-size rate is what the projector's catch-up is judged against: at least ten such INSERTs (the
    // batches' rows again as often as that takes), after the merges of the one-batch INSERTs ended. Two
    // INSERTs, as the batches alone make at the defaults, measured anywhere from 157,108 to 586,377 records/s.
    await mergesEnded();
    const perFlush = Math.max(1, Math.floor(flushRows / RECORDS_PER_REQUEST));
    const flushes: Buffer[] = [];
    for (let i = 0; i < batches.length; i += perFlush) flushes.push(Buffer.concat(batches.slice(i, i + perFlush)));
    const rounds = Math.max(1, Math.ceil(10 / flushes.length));
    const t1 = performance.now();
    for (let r = 0; r < rounds; r++) for (const body of flushes) await insertBody(conn, tables[1]!, body, 'raw rows', { format: 'RowBinary', columns: RECORDS_INSERT_COLUMNS });
    const flushMs = performance.now() - t1;
    return {
      perBatchRecordsPerS: (records / perBatchMs) * 1000,
      perBatchMedianMs: quantile(times, 0.5),
      flushSizeRecordsPerS: ((records * rounds) / flushMs) * 1000,
      mergeWaitS,
      stillMerging: merging,
      delayedInserts,
    };
  } finally {
    await dropDatabase(conn, database).catch(() => undefined);
    await conn.close();
  }
}

// ── Where the slow answers were: the services' own histograms ────────────────────────────────────────

/** A histogram's observations, and those over `overS` seconds, summed over the series whose labels include `match`. */
interface Tally {
  readonly count: number;
  readonly over: number;
}
function tally(text: string, name: string, match: Record<string, string>, overS: number): Tally {
  let count = 0;
  let within = 0;
  for (const { labels, value } of samples(text, `${name}_bucket`)) {
    if (!Object.entries(match).every(([k, v]) => labels[k] === v)) continue;
    if (labels.le === '+Inf') count += value;
    else if (Number(labels.le) === overS) within += value;
  }
  return { count, over: count - within };
}

/**
 * A paced phase's slow answers seen from inside: the gateway's answers and its Append calls to records,
 * records' handling of them, its Kafka appends and produce batches.
 */
interface Inside {
  readonly gateway: Tally;
  readonly calls: Tally;
  readonly handled: Tally;
  readonly appends: Tally;
  readonly batches: Tally;
}
async function insideTallies(s: TestStack): Promise<Inside> {
  const [gateway, records] = await Promise.all([scrape(s.running.metricsPort('gateway')!), scrape(s.running.metricsPort('records')!)]);
  const overS = SLOW_MS / 1000;
  const append = { service: 'pushbase.v1.RecordService', method: 'Append' };
  return {
    gateway: tally(gateway, 'pushbase_http_request_duration_seconds', { route: '/datasets/:id/data', method: 'POST' }, overS),
    calls: tally(gateway, 'pushbase_grpc_client_handling_seconds', append, overS),
    handled: tally(records, 'pushbase_grpc_server_handling_seconds', append, overS),
    appends: tally(records, 'pushbase_kafka_append_duration_seconds', { outcome: 'committed' }, overS),
    batches: tally(records, 'pushbase_kafka_transaction_duration_seconds', { outcome: 'committed' }, overS),
  };
}
const minus = (a: Tally, b: Tally): Tally => ({ count: a.count - b.count, over: a.over - b.over });
const minusAll = (a: Inside, b: Inside): Inside => ({
  gateway: minus(a.gateway, b.gateway),
  calls: minus(a.calls, b.calls),
  handled: minus(a.handled, b.handled),
  appends: minus(a.appends, b.appends),
  batches: minus(a.batches, b.batches),
});
const share = (t: Tally): string => (t.count === 0 ? 'n/a' : `${fmt((100 * t.over) / t.count, 1)} % of ${fmt(t.count)}`);

// ── The run ──────────────────────────────────────────────────────────────────────────────────────────

interface Phase {
  readonly result: LoadResult;
  /** Paced phases: the services' own count of answers over SLOW_MS in the measured window. */
  readonly inside?: Inside;
  /** Paced phases: how busy the machine was in the measured window, and the cores the watched processes used. */
  readonly machine?: MachineUse;
  readonly fresh: ReturnType<typeof freshness>;
  readonly pollMs: number;
  readonly watchErrors: number;
  /**
   * Every record acknowledged in the phase (warm-up included) over the span from its first request until the
   * projector had applied all of them: the rate at which the stack makes records visible, which is what
   * "end to end" measures. `lagS`: how long after the measured window that was.
   */
  readonly endToEnd: { readonly recordsPerS: number; readonly seconds: number; readonly lagS: number };
  /**
   * Rows the projector inserted per second (its own insert histogram): `loaded` from the phase's first
   * request to the end of its load, `catchUp` from then until it had applied every event (undefined when
   * that took under a second: no backlog worth the name). The catch-up rate is the projector's alone, the
   * cores no longer shared with the write path.
   */
  readonly applied: { readonly loaded: number | undefined; readonly catchUp: number | undefined };
}

/** Rows the projector has inserted into ClickHouse so far (undefined when its metrics cannot be read). */
async function insertedRows(s: TestStack): Promise<number | undefined> {
  const port = s.running.metricsPort('projector');
  if (port === undefined) return undefined;
  return sample(await scrape(port), 'pushbase_clickhouse_insert_rows_sum');
}

async function phase(s: TestStack, req: LoadRequest, accounts: readonly string[], watchedAccounts: readonly string[]): Promise<Phase> {
  // In a paced phase, the services' histograms from the moment the load generator's window opens to the end
  // of its load: the requests in flight at either end (a rate's worth of the answer time) count in the
  // services' figures and not in the generator's, or the other way round. A failed scrape only leaves the
  // figures out.
  const scrape = (): Promise<Inside | undefined> => insideTallies(s).catch(() => undefined);
  let insideBefore: Promise<Inside | undefined> | undefined;
  let ticksBefore: MachineTicks | undefined;
  const rowsAt = async (): Promise<{ rows: number | undefined; at: number }> => ({ rows: await insertedRows(s).catch(() => undefined), at: performance.timeOrigin + performance.now() });
  const rowsBefore = await rowsAt();
  const running = load(
    req,
    req.mode === 'paced'
      ? () => {
          ticksBefore = machineTicks();
          insideBefore = scrape();
        }
      : undefined,
  );
  const watched = await watch(s, watchedAccounts, running);
  // Let the last appends become visible before judging freshness: polls go on for a bounded while. Meanwhile,
  // the moment the projector has applied every event acknowledged in the phase ends the end-to-end span.
  const result = await running;
  const rowsLoaded = await rowsAt();
  const ticksAfter = machineTicks();
  const [before, after] = insideBefore === undefined ? [undefined, undefined] : await Promise.all([insideBefore, scrape()]);
  const inside = before === undefined || after === undefined ? undefined : minusAll(after, before);
  const machine = machineUse(ticksBefore, ticksAfter);
  const [tail, visibleAt] = await Promise.all([
    watch(s, watchedAccounts, new Promise((r) => setTimeout(r, 5000))),
    projectorCaughtUp(s, 600_000).then(() => performance.timeOrigin + performance.now()),
  ]);
  // Nothing is sent after the load, so the rows read now are those of the moment it caught up (known up to
  // one poll late: projectorCaughtUp polls every 100 ms, so the catch-up rate is understated by that at most).
  const caughtUp = { rows: (await rowsAt()).rows, at: visibleAt };
  const rate = (from: { rows: number | undefined; at: number }, to: { rows: number | undefined; at: number }): number | undefined =>
    from.rows === undefined || to.rows === undefined || to.at - from.at < 1000 ? undefined : ((to.rows - from.rows) * 1000) / (to.at - from.at);
  const observations = [...watched.observations, ...tail.observations];
  const pollMs = quantile(
    observations.slice(1).map((o, i) => o.sent - observations[i]!.sent),
    0.5,
  );
  const fresh = freshness(result.acks, (a) => `${accounts[a.key]}${a.path}`, observations);
  const endToEndS = (visibleAt - result.startedAt) / 1000;
  return {
    result,
    ...(inside === undefined ? {} : { inside }),
    ...(machine === undefined ? {} : { machine }),
    fresh,
    pollMs: pollMs * watchedAccounts.length,
    watchErrors: watched.errors + tail.errors,
    endToEnd: { recordsPerS: (result.acknowledged * RECORDS_PER_REQUEST) / endToEndS, seconds: endToEndS, lagS: (visibleAt - result.windowEndAt) / 1000 },
    applied: { loaded: rate(rowsBefore, rowsLoaded), catchUp: rate(rowsLoaded, caughtUp) },
  };
}

/**
 * Where a paced phase's acks over SLOW_MS were: at the load generator, in the gateway (from a request's
 * arrival to its answer), in its Append calls (the wire and both event loops' queues included), in records'
 * handling of them, its Kafka appends (queueing behind the batch before included) and its produce batches.
 * Each stage contains the next, so the shares fall along the line; where one falls sharply, the time between
 * the two stages held the tail. An answer slow only at the load generator lost its time outside the
 * gateway's handling: in TLS, the sockets or the generator's own event loop.
 */
function slowLine(p: Phase): void {
  if (p.machine !== undefined) {
    const cores = Object.entries(p.machine.cores).map(([n, c]) => `${n} ${fmt(c, 2)}`);
    line(`  in the window the machine's ${p.machine.machineCores} cores were ${fmt(100 * p.machine.busy)} % busy (every process); cores used: ${cores.join(', ')}`);
  }
  if (p.inside === undefined) return;
  const generator = { count: p.result.ok, over: p.result.slow };
  line(
    `  over ${SLOW_MS} ms: ${share(generator)} acks at the load generator; ${share(p.inside.gateway)} gateway answers, ${share(p.inside.calls)} of its Append calls; ` +
      `${share(p.inside.handled)} Appends handled, ${share(p.inside.appends)} Kafka appends and ${share(p.inside.batches)} produce batches in records`,
  );
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const suffix = randomBytes(4).toString('hex');
  const accounts = Array.from({ length: opts.accounts }, (_, i) => `bench-${suffix}-${i}`);
  const keys = accounts.map(() => `bench-${randomBytes(16).toString('base64url')}`);
  const env: Record<string, string> = { PUSHBASE_RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT), ...opts.env };
  line(`bench:distributed — ${opts.accounts} accounts × ${opts.datasets} datasets, ${RECORDS_PER_REQUEST}-record appends, concurrency ${opts.concurrency}, ${opts.seconds} s (+${opts.warmup} s warm-up) per phase`);
  line(`  freshness: ${opts.watch} watched accounts, each listing polled every ${opts.pollMs} ms (a sample may overstate freshness by that much plus one poll)`);
  line(`  rate limit raised to ${fmt(RATE_LIMIT)}/min per key (PUSHBASE_RATE_LIMIT_PER_MINUTE) so the load is not capped at 60/min`);
  line(`  servers: ${process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'}, ${process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123'}, ${process.env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379'}`);
  if (Object.keys(opts.env).length > 0) line(`  extra service environment: ${JSON.stringify(opts.env)}`);
  if (SERVICES.some((n) => opts.nodeArgs[n].length > 0)) line(`  extra node flags: ${JSON.stringify(opts.nodeArgs)}`);

  try {
    const nodeArgs = (service: ServiceName): string[] => [
      ...opts.nodeArgs[service],
      ...(opts.cpuProf === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProf, service)}`]),
    ];
    const logFile = opts.log === '' ? undefined : createWriteStream(opts.log);
    stack = new TestStack({
      keys: Object.fromEntries(accounts.map((a, i) => [a, keys[i]!])),
      env,
      detached: true,
      nodeArgs: Object.fromEntries(SERVICES.map((n) => [n, nodeArgs(n)])),
      ...(logFile === undefined ? {} : { onLine: (service: string, l: string) => void logFile.write(`${new Date().toISOString()} ${service.padEnd(9)} ${l}\n`) }),
    });
    const s = await stack.start();
    const pids = Object.fromEntries(SERVICES.map((n) => [n, s.pid(n)!])) as Record<ServiceName, number>;
    Object.assign(watchedProcesses, pids);
    // The servers `services:up` started and still runs. None when the URLs point elsewhere: deploy/local
    // refuses a configuration that is not on loopback, and then only the services are watched.
    try {
      for (const server of await serverStatus(readServicesConfig(process.env, path.resolve(__dirname, '..')))) if (server.pid !== undefined) watchedProcesses[server.name] = server.pid;
    } catch {
      // not servers of this machine's services:up
    }
    line(`  stack up in ${fmt((performance.now() - t0) / 1000, 1)} s (topic ${s.names.topic}): ${SERVICES.map((n) => `${n} pid ${pids[n]}`).join(', ')}`);

    const bodies = Array.from({ length: 32 }, (_, i) => appendBody(i));
    const common = { origin: `https://127.0.0.1:${s.port}`, ca: s.ca, keys, bodies, concurrency: opts.concurrency };
    const third = Math.floor(opts.datasets / 3);
    const ids = Array.from({ length: opts.datasets }, (_, d) => `ds-${d}`);
    const creates: Job[] = accounts.flatMap((_, k) => ids.map((id) => ({ key: k, method: 'PUT' as const, path: `/datasets/${id}`, body: 0 })));
    let t = performance.now();
    requireClean('creating datasets', await load({ ...common, bodies: [JSON.stringify(DATASET_DEFINITION)], mode: 'jobs', jobs: creates, deadlineMs: 300_000 }));
    line(`  created ${fmt(creates.length)} datasets in ${fmt((performance.now() - t) / 1000, 1)} s`);
    // The phases time appends, not the projector's first sight of each dataset: wait until every created
    // dataset is listed, so the peak starts with the read side caught up.
    t = performance.now();
    await listedEverywhere(s, accounts, opts.datasets, 600_000);
    line(`  every dataset visible on the admin listener ${fmt((performance.now() - t) / 1000, 1)} s later`);
    // Their Grafana-ready views follow in the background (two DDL statements each): made before the phases too.
    const conn = connectClickHouse(process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123');
    const views = await viewsMade(conn, s.names.database, creates.length, 600_000).finally(() => conn.close());
    if (views.made < creates.length) throw new Error(`${views.made} of ${creates.length} views made after ${fmt(views.seconds)} s`);
    line(`  every dataset's view made ${fmt(views.seconds, 1)} s later`);

    // From here on: what the phases and the raw inserts cost the services (creating the datasets does not count).
    const cpuBefore = Object.fromEntries(SERVICES.map((n) => [n, cpuSeconds(pids[n])])) as Record<ServiceName, number>;

    const watched = new Set(accounts.slice(0, opts.watch).map((_, k) => k));
    const targetsFor = (from: number, to: number): Target[] => accounts.flatMap((_, k) => ids.slice(from, to).map((id) => ({ key: k, path: `/datasets/${id}/data`, ...(watched.has(k) ? { watch: true } : {}) })));
    const peakTargets = targetsFor(0, third);
    const halfTargets = targetsFor(third, 2 * third);
    const rateTargets = targetsFor(2 * third, opts.datasets);

    // ── peak ──
    t = performance.now();
    const peak = await phase(s, { ...common, mode: 'timed', targets: peakTargets, warmupMs: opts.warmup * 1000, durationMs: opts.seconds * 1000 }, accounts, accounts.slice(0, opts.watch));
    requireClean('peak', peak.result);
    const peakRps = peak.result.ok / (peak.result.durationMs / 1000);
    const peakRecords = peakRps * RECORDS_PER_REQUEST;
    // The peak the targets speak of is end to end (2xx → visible): the closed loop acknowledges faster than
    // the projector applies while the phase lasts, and that excess is backlog, not throughput. Half the peak
    // is half of what the stack makes visible. (The phase ended once the projector had caught up, so the half
    // phase starts from a caught-up read side, as the peak did: its freshness is its own.)
    const peakEndToEnd = peak.endToEnd.recordsPerS;
    const halfRps = peakEndToEnd / RECORDS_PER_REQUEST / 2;

    // ── half ──
    const halfPhase = await phase(
      s,
      { ...common, mode: 'paced', targets: halfTargets, perSecond: halfRps, warmupMs: opts.warmup * 1000, durationMs: opts.seconds * 1000, concurrency: opts.concurrency * 4 },
      accounts,
      accounts.slice(0, opts.watch),
    );
    requireClean('half', halfPhase.result);

    // ── rate ──
    const targetRps = TARGETS.rateRecordsPerS / RECORDS_PER_REQUEST;
    const ratePhase = await phase(
      s,
      { ...common, mode: 'paced', targets: rateTargets, perSecond: targetRps, warmupMs: opts.warmup * 1000, durationMs: opts.seconds * 1000, concurrency: opts.concurrency * 4 },
      accounts,
      accounts.slice(0, opts.watch),
    );
    requireClean('rate', ratePhase.result);

    // ── raw ──
    const raw = await rawInsert(bodies, Number(env.PUSHBASE_PROJECTOR_FLUSH_ROWS ?? 50_000));

    const appendsPerDataset = (peak.result.acknowledged + 2) / peakTargets.length;
    line('');
    line(`peak (closed loop, ${opts.concurrency} in flight, ${fmt(peak.result.durationMs / 1000, 1)} s):`);
    line(`  ${fmt(peakRecords)} records/s acknowledged (${fmt(peakRps, 1)} appends/s); ack p50 ${fmt(peak.result.latencyMs.p50, 1)} ms, p99 ${fmt(peak.result.latencyMs.p99, 1)} ms`);
    line(`  freshness p50 ${fmt(quantile(peak.fresh.samples, 0.5))} ms, p99 ${fmt(quantile(peak.fresh.samples, 0.99))} ms (${peak.fresh.samples.length} samples, ${peak.fresh.unseen} never seen, listing polled every ~${fmt(peak.pollMs)} ms per account)`);
    line(`  ${fmt(peakEndToEnd)} records/s end to end: all ${fmt(peak.result.acknowledged * RECORDS_PER_REQUEST)} records acknowledged in the phase (warm-up included) visible ${fmt(peak.endToEnd.seconds, 1)} s after its first request, ${fmt(peak.endToEnd.lagS, 1)} s after its window`);
    const applied = (r: number | undefined): string => (r === undefined ? 'n/a' : `${fmt(r)} rows/s`);
    line(`  the projector inserted ${applied(peak.applied.loaded)} while the load ran, ${applied(peak.applied.catchUp)} catching up after it`);
    if (appendsPerDataset > MAX_APPENDS_PER_DATASET) line(`  (!) ${fmt(appendsPerDataset, 1)} appends per dataset: more than the window's ten; raise --accounts or --datasets`);
    line(`half (open loop at ${fmt(halfRps, 1)} appends/s, half the end-to-end peak):`);
    line(`  ${fmt((halfPhase.result.ok / (halfPhase.result.durationMs / 1000)) * RECORDS_PER_REQUEST)} records/s; ack p50 ${fmt(halfPhase.result.latencyMs.p50, 1)} ms, p99 ${fmt(halfPhase.result.latencyMs.p99, 1)} ms`);
    line(`  freshness p50 ${fmt(quantile(halfPhase.fresh.samples, 0.5))} ms, p99 ${fmt(quantile(halfPhase.fresh.samples, 0.99))} ms (${halfPhase.fresh.samples.length} samples, ${halfPhase.fresh.unseen} never seen)`);
    slowLine(halfPhase);
    line(`  ${fmt(halfPhase.endToEnd.recordsPerS)} records/s end to end; the projector had applied every event ${fmt(halfPhase.endToEnd.lagS, 1)} s after the window`);
    const rateRecords = (ratePhase.result.ok / (ratePhase.result.durationMs / 1000)) * RECORDS_PER_REQUEST;
    line(`rate (open loop at the target, ${fmt(targetRps, 1)} appends/s):`);
    line(`  ${fmt(rateRecords)} records/s; ack p50 ${fmt(ratePhase.result.latencyMs.p50, 1)} ms, p99 ${fmt(ratePhase.result.latencyMs.p99, 1)} ms`);
    line(`  freshness p50 ${fmt(quantile(ratePhase.fresh.samples, 0.5))} ms, p99 ${fmt(quantile(ratePhase.fresh.samples, 0.99))} ms (${ratePhase.fresh.samples.length} samples, ${ratePhase.fresh.unseen} never seen)`);
    slowLine(ratePhase);
    line(`raw ClickHouse insert of the same 500-record batches (their rows straight into a copy of the records table, one INSERT per batch, ${opts.rawBatches} batches):`);
    line(`  ${fmt(raw.perBatchRecordsPerS)} records/s (median ${fmt(raw.perBatchMedianMs, 1)} ms per INSERT); in inserts of the projector's flush size: ${fmt(raw.flushSizeRecordsPerS)} records/s`);
    line(`  after waiting ${fmt(raw.mergeWaitS, 1)} s for ClickHouse's merges to end (${raw.stillMerging === 0 ? 'they did' : `${raw.stillMerging} still running`}); ${fmt(raw.delayedInserts)} INSERTs delayed for too many parts`);
    // Judged in each phase on its own: at the peak the closed loop holds the machine's every core, so the
    // projector's share decides whether it keeps up; at half the peak it shows the pipeline's own delay.
    const freshPeakP99 = quantile(peak.fresh.samples, 0.99);
    const freshHalfP99 = quantile(halfPhase.fresh.samples, 0.99);
    const freshRateP99 = quantile(ratePhase.fresh.samples, 0.99);
    line('');
    line('targets:');
    line(`  ≥ ${fmt(TARGETS.recordsPerS)} records/s end to end (stretch ${fmt(TARGETS.stretchRecordsPerS)}): ${fmt(peakEndToEnd)} — ${verdict(peakEndToEnd >= TARGETS.recordsPerS)}${peakEndToEnd >= TARGETS.stretchRecordsPerS ? ', stretch met' : ''}`);
    line(`  end to end ≥ ${TARGETS.ackedRatio} of the acknowledged peak: ${fmt(peakEndToEnd / peakRecords, 2)} — ${verdict(peakEndToEnd / peakRecords >= TARGETS.ackedRatio)}`);
    const catchUp = peak.applied.catchUp;
    line(`  catch-up ≥ ${TARGETS.catchUpRatio} of the raw flush-size insert rate: ${catchUp === undefined ? 'n/a (no backlog after the peak)' : `${fmt(catchUp / raw.flushSizeRecordsPerS, 2)} — ${verdict(catchUp / raw.flushSizeRecordsPerS >= TARGETS.catchUpRatio)}`}`);
    line(`  ack p99 ≤ ${TARGETS.halfAckP99Ms} ms at half the peak: ${fmt(halfPhase.result.latencyMs.p99, 1)} ms — ${verdict(halfPhase.result.latencyMs.p99 <= TARGETS.halfAckP99Ms)}`);
    line(`  freshness p99 ≤ ${TARGETS.freshP99Ms} ms at half the peak: ${fmt(freshHalfP99)} ms — ${verdict(freshHalfP99 <= TARGETS.freshP99Ms)}`);
    line(`  freshness p99 ≤ ${TARGETS.freshP99Ms} ms at ${fmt(TARGETS.rateRecordsPerS)} records/s: ${fmt(freshRateP99)} ms — ${verdict(freshRateP99 <= TARGETS.freshP99Ms && ratePhase.fresh.unseen === 0 && rateRecords >= TARGETS.rateRecordsPerS * 0.98)}`);
    line(`  freshness p99 ≤ ${TARGETS.freshP99Ms} ms at the peak: ${fmt(freshPeakP99)} ms — ${verdict(freshPeakP99 <= TARGETS.freshP99Ms)}`);
    line(`  CPU during the phases: load generator ${fmt(peak.result.cpuSeconds + halfPhase.result.cpuSeconds + ratePhase.result.cpuSeconds, 1)} s; ${SERVICES.map((n) => `${n} ${fmt(cpuSeconds(pids[n]) - cpuBefore[n], 1)} s`).join(', ')}`);
    line(`  peak RSS: ${SERVICES.map((n) => `${n} ${fmt(peakRssMiB(pids[n]))} MiB`).join(', ')}`);
  } finally {
    await stack?.stop();
    if (opts.cpuProf !== '') line(`CPU profiles in ${path.resolve(opts.cpuProf)}/<service>/ (node --import tsx bench/cpuprofile.ts FILE)`);
    await stack?.drop();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`bench:distributed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);

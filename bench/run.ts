/*
 * `npm run bench` — prints figures; it is not a test and asserts nothing.
 *
 *   (a) parse   JSON.parse rate of one 500-record append body: the ceiling the server is compared with
 *               (plus validation alone, serialisation of the event alone, and all three in sequence);
 *   (b) throughput  the real server (`pushbase serve`, a child process) with many accounts, driven by a
 *               load generator in another child process (bench/loadgen.ts): 500-record appends over HTTPS
 *               with keep-alive for a bounded time → records/s, requests/s, p50/p99, ratio to (a);
 *   (c) restart  10 accounts × 100 datasets × 5000 records (5 million) in the data directory, then the
 *               time from spawn to the "listening" line and the server's RSS, for four starts in a row.
 *               --fill log (default) writes the event log directly with the server's own FileEventLog class
 *               and the domain's decideDefine/decideAppend (same format and events as the server would
 *               write, about 25 s); --fill http sends every request through the public API instead.
 *               --history-factor N appends N times the state's records per dataset (the 5000-row window
 *               keeps the last 5000), so the history is N × the state. Start 1 replays that history (no
 *               snapshot yet); the server then compacts in the background (once sealed segments pass
 *               PUSHBASE_COMPACT_AFTER_BYTES, 256 MiB by default) and the bench waits for it. Start 2 restarts
 *               from that snapshot (the new format 2), start 3 from the same state rewritten in today's
 *               format 1 (JSON), start 4 from format 2 again; in between, a child process times reading and
 *               JSON.parsing the format-1 snapshot's bytes: the reference. Starts 2 and 3 then read every
 *               dataset's records through the admin API, so their peak RSS is that of the whole state.
 *
 * Everything is bounded (durations, counts, an overall deadline that kills what it started), traffic goes
 * to 127.0.0.1 only, and temporary data directories are removed at the end unless --keep-data.
 *
 * Flags (or BENCH_<NAME> environment variables, e.g. BENCH_SECONDS=15):
 *   --phases parse,throughput,restart  --seconds 12  --warmup 3  --concurrency 48  --keys 200
 *   --accounts 10  --datasets 100  --records 5000  --history-factor 1  --fill log|http  --max-seconds 900  --keep-data
 *   --cpu-prof DIR   (each server writes a V8 CPU profile into DIR/<phase> when it stops; the profiler slows it)
 *   --server-node-args="--max-semi-space-size=64"   (node flags for every server started; note the "=")
 */
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { encodeEventBatchText } from '@pushbase/contracts';
import { decideAppend, decideDefine, type DatasetEvent, type DatasetSummary } from '@pushbase/domain';
import { FileEventLog } from '../services/embedded/src/file-event-log';
import { TestServer } from '../test/helpers/server';
import type { Job, LoadRequest, LoadResult, Target } from './loadgen';
import { appendBody, DATASET_DEFINITION, RECORDS_PER_REQUEST } from './workload';

// ── Options ──────────────────────────────────────────────────────────────────────────────────────────

const { values: flags } = parseArgs({
  options: {
    phases: { type: 'string' },
    seconds: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    keys: { type: 'string' },
    accounts: { type: 'string' },
    datasets: { type: 'string' },
    records: { type: 'string' },
    'history-factor': { type: 'string' },
    fill: { type: 'string' },
    'max-seconds': { type: 'string' },
    'keep-data': { type: 'boolean' },
    'cpu-prof': { type: 'string' },
    'server-node-args': { type: 'string' },
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

const opts = {
  phases: new Set(option('phases', 'parse,throughput,restart').split(',').map((p) => p.trim())),
  seconds: intOption('seconds', 12, 1, 120),
  warmup: intOption('warmup', 3, 0, 60),
  concurrency: intOption('concurrency', 48, 1, 512),
  keys: intOption('keys', 200, 1, 2000),
  accounts: intOption('accounts', 10, 1, 100),
  datasets: intOption('datasets', 100, 1, 100),
  records: intOption('records', 5000, RECORDS_PER_REQUEST, 5000),
  historyFactor: intOption('history-factor', 1, 1, 10),
  fill: option('fill', 'log'),
  maxSeconds: intOption('max-seconds', 900, 10, 3600),
  keepData: flags['keep-data'] === true || process.env.BENCH_KEEP_DATA === '1',
  /** A directory: the throughput phase's server then runs with --cpu-prof and writes its profile there. */
  cpuProf: option('cpu-prof', ''),
  /** Extra node flags for every server, e.g. "--max-semi-space-size=64", to try runtime tuning. */
  serverNodeArgs: option('server-node-args', '').split(/\s+/).filter((a) => a !== ''),
};
if (opts.records % RECORDS_PER_REQUEST !== 0) throw new Error(`--records must be a multiple of ${RECORDS_PER_REQUEST}`);
if (opts.fill !== 'log' && opts.fill !== 'http') throw new Error('--fill must be log or http');
for (const p of opts.phases) if (!['parse', 'throughput', 'restart'].includes(p)) throw new Error(`unknown phase "${p}"`);

/** The rate limit for the benchmark's servers: 60/min per key would cap 200 keys at 3.3 requests/s. */
const BENCH_RATE_LIMIT = 1_000_000_000;
const TARGET_RECORDS_PER_S = 250_000;
/** The restart target: ≤ 5 s on the slow bench machine, and well under half of format 1's in the same run (docs/performance.md → Restart time). */
const TARGET_RESTART_S = 5;

// ── Bookkeeping: everything started is stopped, whatever happens ─────────────────────────────────────

const servers = new Set<TestServer>();
const generators = new Set<ChildProcess>();
const dataDirs: string[] = [];

function cleanup(): void {
  for (const g of generators) g.kill('SIGKILL');
  for (const s of servers) s.proc?.kill('SIGKILL');
  if (!opts.keepData) for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
}
const deadline = setTimeout(() => {
  process.stderr.write(`\nbench: the overall deadline of ${opts.maxSeconds} s passed; stopping everything\n`);
  cleanup();
  process.exit(1);
}, opts.maxSeconds * 1000);
deadline.unref();
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});

// ── Helpers ──────────────────────────────────────────────────────────────────────────────────────────

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mib = (bytes: number): string => `${fmt(bytes / 1024 ** 2)} MiB`;
const line = (s = ''): boolean => process.stdout.write(`${s}\n`);
const verdict = (ok: boolean): string => (ok ? 'met' : 'NOT met');

function procStatus(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** CPU seconds (user + system) a process (or one of its threads: /proc/<pid>/task/<tid>) has used so far. */
function cpuSeconds(pid: number, task?: string): number {
  const stat = readFileSync(task === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${task}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command name: state is field 3, utime 14, stime 15 (1-based) → indices 11, 12 here.
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/**
 * CPU seconds per thread of a process, by thread id. Per request, these are the figures that hold still
 * on a shared machine, where records/s and the ceiling move with whatever else runs.
 */
function threadCpuSeconds(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(tid, cpuSeconds(pid, tid));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

/** Node flags that make a server write a CPU profile into <--cpu-prof>/<phase> when it stops. */
const profArgs = (phase: string): string[] => [
  ...opts.serverNodeArgs,
  ...(opts.cpuProf === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${path.resolve(opts.cpuProf, phase)}`]),
];

const newKey = (): string => `bench-${randomBytes(16).toString('base64url')}`;

async function startServer(
  keys: Record<string, string>,
  dataDir?: string,
  nodeArgs: readonly string[] = [],
): Promise<{ server: TestServer; spawnToListeningMs: number }> {
  const server = new TestServer({
    keys,
    ...(dataDir === undefined ? {} : { dataDir }),
    env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: String(BENCH_RATE_LIMIT) },
    nodeArgs,
    startTimeoutMs: 300_000,
  });
  servers.add(server);
  if (dataDir === undefined) dataDirs.push(server.dataDir);
  const t0 = performance.now();
  await server.start();
  return { server, spawnToListeningMs: performance.now() - t0 };
}

async function stopServer(server: TestServer): Promise<number | null> {
  const code = await server.stop();
  servers.delete(server);
  return code;
}

/** The "event log replayed" line's own figures, if the server printed them. */
function replayLine(server: TestServer): Record<string, unknown> | undefined {
  for (const l of server.output) {
    try {
      const msg = JSON.parse(l) as Record<string, unknown>;
      if (msg.msg === 'event log replayed') return msg;
    } catch {
      /* not a log line */
    }
  }
  return undefined;
}

/** Runs the load generator in a child process and waits for its result. */
function generate(req: LoadRequest): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'loadgen.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    generators.add(child);
    let settled = false;
    child.on('message', (msg: { result?: LoadResult; error?: string }) => {
      settled = true;
      if (msg.result !== undefined) resolve(msg.result);
      else reject(new Error(`load generator failed: ${msg.error}`));
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      generators.delete(child);
      if (!settled) reject(new Error(`load generator exited with ${code} before reporting`));
    });
    child.send(req);
  });
}

function requireClean(what: string, r: LoadResult): void {
  if (r.errors > 0 || r.timedOut) {
    throw new Error(`${what}: ${r.errors} failed requests${r.timedOut ? ', timed out' : ''}; statuses ${JSON.stringify(r.statuses)}\n  ${r.firstErrors.join('\n  ')}`);
  }
}

async function totalRecords(server: TestServer, accounts: readonly string[]): Promise<{ datasets: number; records: number }> {
  let datasets = 0;
  let records = 0;
  for (const a of accounts) {
    const res = await server.admin(`/admin/accounts/${a}/datasets`);
    if (res.status !== 200) throw new Error(`admin listing of ${a}: ${res.status} ${res.text}`);
    for (const d of res.body.datasets as { record_count: number }[]) {
      datasets++;
      records += d.record_count;
    }
  }
  return { datasets, records };
}

// ── (a) The JSON.parse ceiling ───────────────────────────────────────────────────────────────────────

/** Calls `fn` repeatedly for about `ms` milliseconds (after a short warm-up) and returns calls per second. */
function rate(fn: () => void, ms: number): number {
  const warm = performance.now() + Math.min(300, ms / 4);
  while (performance.now() < warm) fn();
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    for (let i = 0; i < 10; i++) fn();
    n += 10;
    t = performance.now();
  }
  return (n * 1000) / (t - t0);
}

interface ParseFigures {
  bodyBytes: number;
  parse: number;
  validate: number;
  serialise: number;
  all: number;
}

/**
 * Records/s of the per-request CPU work, each step alone and then in sequence, on one body:
 * JSON.parse (the ceiling); validation and normalisation (decideAppend on the parsed body, as the record
 * service does); serialisation of the resulting event (the event codec, as the write workers do).
 */
function parsePhase(): ParseFigures {
  const body = appendBody(1);
  const defined = decideDefine({ account: 'bench', id: 'bench', body: DATASET_DEFINITION, at: 0, newIncarnation: 'i' }, undefined, 0);
  const dataset: DatasetSummary = defined.dataset;
  const parsed: unknown = JSON.parse(body);
  const event = decideAppend({ account: 'bench', id: 'bench', body: parsed, at: 0 }, dataset);
  let sink = 0;
  const perBody = {
    parse: rate(() => {
      sink += (JSON.parse(body) as { data: unknown[] }).data.length;
    }, 2000),
    validate: rate(() => {
      sink += decideAppend({ account: 'bench', id: 'bench', body: parsed, at: 0 }, dataset).records.length;
    }, 2000),
    serialise: rate(() => {
      sink += encodeEventBatchText([event]).length;
    }, 2000),
    all: rate(() => {
      sink += encodeEventBatchText([decideAppend({ account: 'bench', id: 'bench', body: JSON.parse(body), at: 0 }, dataset)]).length;
    }, 2000),
  };
  if (sink === 0) line('(unreachable)');
  const f: ParseFigures = {
    bodyBytes: Buffer.byteLength(body),
    parse: perBody.parse * RECORDS_PER_REQUEST,
    validate: perBody.validate * RECORDS_PER_REQUEST,
    serialise: perBody.serialise * RECORDS_PER_REQUEST,
    all: perBody.all * RECORDS_PER_REQUEST,
  };
  const row = (label: string, recordsPerS: number): boolean =>
    line(`    ${label.padEnd(44)}${fmt(recordsPerS).padStart(12)} records/s  ${fmt(1e6 / recordsPerS, 2).padStart(6)} µs/record`);
  line(`(a) JSON.parse ceiling — one ${RECORDS_PER_REQUEST}-record append body of ${fmt(f.bodyBytes / 1024, 1)} KiB, in this process, one thread`);
  row('JSON.parse (the ceiling)', f.parse);
  row('validation alone (decideAppend, parsed body)', f.validate);
  row('serialisation alone (event codec)', f.serialise);
  row('all three in sequence', f.all);
  line();
  return f;
}

// ── (b) Throughput of the real server ────────────────────────────────────────────────────────────────

async function throughputPhase(ceiling: number | undefined): Promise<void> {
  const keys: Record<string, string> = {};
  for (let i = 0; i < opts.keys; i++) keys[`tput${String(i).padStart(4, '0')}`] = newKey();
  const accounts = Object.keys(keys);
  const keyList = Object.values(keys);
  const bodies = [JSON.stringify(DATASET_DEFINITION), ...Array.from({ length: 16 }, (_, i) => appendBody(100 + i))];

  const { server } = await startServer(keys, undefined, profArgs('throughput'));
  const pid = server.proc!.pid!;
  const common = { origin: server.baseUrl, ca: server.ca, keys: keyList, concurrency: opts.concurrency };

  // One dataset per account, created over HTTPS.
  const create = await generate({
    ...common,
    mode: 'jobs',
    bodies,
    jobs: accounts.map((_, i): Job => ({ key: i, method: 'PUT', path: '/datasets/throughput', body: 0 })),
    deadlineMs: 60_000,
  });
  requireClean('creating the datasets', create);

  const targets = accounts.map((_, i): Target => ({ key: i, path: '/datasets/throughput/data' }));
  // Server CPU over the measured window only: sample it when the window opens and when it closes.
  let cpuAtOpen = NaN;
  let cpuAtClose = NaN;
  let threadsAtOpen = new Map<string, number>();
  let threadsAtClose = new Map<string, number>();
  const openTimer = setTimeout(() => {
    cpuAtOpen = cpuSeconds(pid);
    threadsAtOpen = threadCpuSeconds(pid);
  }, opts.warmup * 1000 + 300);
  const closeTimer = setTimeout(() => {
    cpuAtClose = cpuSeconds(pid);
    threadsAtClose = threadCpuSeconds(pid);
  }, (opts.warmup + opts.seconds) * 1000 + 300);
  const r = await generate({
    ...common,
    mode: 'timed',
    bodies: bodies.slice(1),
    targets,
    warmupMs: opts.warmup * 1000,
    durationMs: opts.seconds * 1000,
  });
  clearTimeout(openTimer);
  clearTimeout(closeTimer);
  // The generator may report back just before the closing sample was due: take it now, then.
  if (Number.isNaN(cpuAtClose)) {
    cpuAtClose = cpuSeconds(pid);
    threadsAtClose = threadCpuSeconds(pid);
  }
  const mem = procStatus(pid);
  const stored = await totalRecords(server, accounts);
  const exit = await stopServer(server);

  const seconds = r.durationMs / 1000;
  const recordsPerS = (r.ok * RECORDS_PER_REQUEST) / seconds;
  const serverCores = (cpuAtClose - cpuAtOpen) / (opts.seconds === 0 ? 1 : opts.seconds);
  line(`(b) Throughput — pushbase serve (child process) ← load generator (child process, undici Pool, keep-alive)`);
  line(`    ${opts.keys} API keys/accounts, 1 dataset each (7 fields, no unique_by), ${RECORDS_PER_REQUEST}-record appends, concurrency ${opts.concurrency}`);
  line(`    PUSHBASE_RATE_LIMIT_PER_MINUTE=${BENCH_RATE_LIMIT} for this phase (at 60/min/key, ${opts.keys} keys would allow ${fmt(opts.keys / 60, 1)} requests/s)`);
  line(`    ${opts.warmup} s warm-up, then ${fmt(seconds, 1)} s measured; ${os.cpus().length} CPUs shared by server and generator`);
  line(`    records/s        ${fmt(recordsPerS).padStart(12)}   target ≥ ${fmt(TARGET_RECORDS_PER_S)}: ${verdict(recordsPerS >= TARGET_RECORDS_PER_S)}`);
  line(`    requests/s       ${fmt(r.ok / seconds, 1).padStart(12)}   (${fmt(r.ok)} ok, ${fmt(r.errors)} failed${r.errors > 0 ? `: ${JSON.stringify(r.statuses)}` : ''})`);
  line(`    latency          p50 ${fmt(r.latencyMs.p50, 1)} ms   p90 ${fmt(r.latencyMs.p90, 1)} ms   p99 ${fmt(r.latencyMs.p99, 1)} ms   max ${fmt(r.latencyMs.max, 1)} ms`);
  if (ceiling !== undefined) line(`    ratio to the JSON.parse ceiling   ${fmt(recordsPerS / ceiling, 3)}  (${fmt(recordsPerS)} / ${fmt(ceiling)})`);
  line(`    server CPU       ${fmt(serverCores, 2)} cores busy during the window; generator used ${fmt(r.cpuSeconds, 1)} CPU-s in total`);
  // The event loop is the thread whose id is the pid; the others are the write and snapshot workers, V8's
  // collector threads and libuv's file I/O threads. Threads started inside the window count from zero.
  const perRequest = (tid: string): number => ((threadsAtClose.get(tid)! - (threadsAtOpen.get(tid) ?? 0)) * 1000) / Math.max(1, r.ok);
  const others = [...threadsAtClose.keys()].filter((tid) => tid !== String(pid)).map(perRequest).filter((ms) => ms >= 0.005);
  if (threadsAtClose.has(String(pid))) {
    line(
      `    CPU per request  event loop ${fmt(perRequest(String(pid)), 3)} ms; other threads ${fmt(others.reduce((a, b) => a + b, 0), 3)} ms ` +
        `(busiest: ${others.sort((a, b) => b - a).slice(0, 3).map((ms) => fmt(ms, 3)).join(', ')} ms)`,
    );
  }
  line(`    server RSS       ${mib(mem.rss)} after the run (peak ${mib(mem.hwm)}); ${fmt(stored.records)} records held in ${stored.datasets} datasets; exit code ${exit}`);
  for (const e of r.firstErrors) line(`    error: ${e}`);
  if (opts.cpuProf !== '') line(`    server CPU profile written to ${path.resolve(opts.cpuProf, 'throughput')}`);
  line();
}

// ── (c) Restart with 5 million records ───────────────────────────────────────────────────────────────

/**
 * Fast fill: writes the event log directly, in the log's own format, through the same FileEventLog class
 * the server uses, with events decided by the same domain functions the record service calls
 * (decideDefine, decideAppend). The server is not running meanwhile; the log is closed before it starts.
 */
async function fillThroughLog(dataDir: string, accounts: readonly string[], datasetIds: readonly string[], bodies: readonly string[]): Promise<number> {
  // Segments as the server would cut them (PUSHBASE_SEGMENT_BYTES, for small trial runs), so compaction finds them sealed.
  const segmentBytes = Number(process.env.PUSHBASE_SEGMENT_BYTES ?? '') || undefined;
  const log = new FileEventLog({ dir: dataDir, ...(segmentBytes === undefined ? {} : { segmentBytes }) });
  await log.start(() => undefined);
  const rounds = opts.records / RECORDS_PER_REQUEST;
  let events = 0;
  let at = Date.UTC(2025, 0, 1);
  // Ten datasets' events are in flight at a time, so the log's group commit shares one fsync among them.
  const pending: Promise<void>[] = [];
  const summaries = new Map<string, DatasetSummary>();
  // --history-factor N: N passes over every dataset, each appending a full state's worth of records.
  for (let pass = 0; pass < opts.historyFactor; pass++) {
    for (const account of accounts) {
      for (const id of datasetIds) {
        const batch: DatasetEvent[] = [];
        let dataset = summaries.get(`${account}/${id}`);
        if (dataset === undefined) {
          const defined = decideDefine({ account, id, body: DATASET_DEFINITION, at: at++, newIncarnation: randomUUID() }, undefined, 0);
          if (defined.outcome !== 'created') throw new Error('unreachable: a fresh dataset was found');
          dataset = defined.dataset;
          summaries.set(`${account}/${id}`, dataset);
          batch.push(defined.event);
        }
        for (let r = 0; r < rounds; r++) {
          batch.push(decideAppend({ account, id, body: JSON.parse(bodies[(events + r) % bodies.length]!), at: at++ }, dataset));
        }
        pending.push(log.append(batch));
        events += batch.length;
        if (pending.length >= 10) await Promise.all(pending.splice(0));
      }
    }
  }
  await Promise.all(pending);
  await log.close();
  return events;
}

/** Slow fill: through the public API of a running server, like clients would. */
async function fillThroughHttp(
  dataDir: string,
  keys: Record<string, string>,
  datasetIds: readonly string[],
  bodies: readonly string[],
): Promise<{ requests: number; seconds: number }> {
  const { server } = await startServer(keys, dataDir, opts.serverNodeArgs);
  const keyList = Object.values(keys);
  const common = { origin: server.baseUrl, ca: server.ca, keys: keyList, concurrency: opts.concurrency, bodies: [JSON.stringify(DATASET_DEFINITION), ...bodies] };
  const creates: Job[] = [];
  for (let k = 0; k < keyList.length; k++) for (const id of datasetIds) creates.push({ key: k, method: 'PUT', path: `/datasets/${id}`, body: 0 });
  requireClean('creating datasets', await generate({ ...common, mode: 'jobs', jobs: creates, deadlineMs: 120_000 }));
  const appends: Job[] = [];
  const rounds = opts.records / RECORDS_PER_REQUEST;
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < keyList.length; k++) {
      for (const id of datasetIds) appends.push({ key: k, method: 'POST', path: `/datasets/${id}/data`, body: 1 + (appends.length % bodies.length) });
    }
  }
  const t0 = performance.now();
  requireClean('filling', await generate({ ...common, mode: 'jobs', jobs: appends, deadlineMs: 600_000 }));
  const seconds = (performance.now() - t0) / 1000;
  await stopServer(server);
  return { requests: creates.length + appends.length, seconds };
}

/**
 * If the server started a background compaction, waits (bounded) for it to end and describes it: its
 * time, its snapshot, and the server's peak RSS by then.
 */
async function awaitCompaction(server: TestServer): Promise<string | undefined> {
  const find = (msg: string): Record<string, unknown> | undefined => {
    for (const l of server.output) {
      try {
        const m = JSON.parse(l) as Record<string, unknown>;
        if (m.msg === msg) return m;
      } catch {
        /* not a log line */
      }
    }
    return undefined;
  };
  if (find('compaction started') === undefined) return undefined;
  const t0 = performance.now();
  while (find('compaction finished') === undefined && find('compaction failed; will retry') === undefined && performance.now() - t0 < 600_000) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const done = find('compaction finished');
  const mem = procStatus(server.proc!.pid!);
  if (done === undefined) return `compaction did not finish: ${JSON.stringify(find('compaction failed; will retry') ?? 'timed out')}`;
  return (
    `background compaction (live snapshot) ${fmt(Number(done.ms) / 1000, 1)} s: covering ${fmt(Number(done.frames_folded))} frames, ` +
    `a ${mib(Number(done.snapshot_bytes))} snapshot at frame ${fmt(Number(done.position))} (${fmt(Number(done.records))} records), deleted ${String(done.segments_deleted)} segments; ` +
    `server peak RSS by then ${mib(mem.hwm)}`
  );
}

async function restartPhase(): Promise<void> {
  const keys: Record<string, string> = {};
  for (let i = 0; i < opts.accounts; i++) keys[`acct${String(i).padStart(2, '0')}`] = newKey();
  const accounts = Object.keys(keys);
  const datasetIds = Array.from({ length: opts.datasets }, (_, i) => `sales.${String(i).padStart(3, '0')}`);
  const bodies = Array.from({ length: 16 }, (_, i) => appendBody(500 + i));
  const expected = opts.accounts * opts.datasets * opts.records;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'pushbase-bench-restart-'));
  dataDirs.push(dataDir);

  line(`(c) Restart — ${opts.accounts} accounts × ${opts.datasets} datasets × ${fmt(opts.records)} records = ${fmt(expected)} records`);
  if (opts.historyFactor > 1) line(`    history ${opts.historyFactor} × the state: ${fmt(expected * opts.historyFactor)} records appended (--history-factor ${opts.historyFactor}; --fill log only)`);
  const t0 = performance.now();
  if (opts.fill === 'log') {
    const events = await fillThroughLog(dataDir, accounts, datasetIds, bodies);
    line(`    filled by writing the event log directly (FileEventLog + decideDefine/decideAppend, no server): ${fmt(events)} events in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  } else {
    const f = await fillThroughHttp(dataDir, keys, datasetIds, bodies);
    line(`    filled over HTTPS through the public API: ${fmt(f.requests)} requests; appends took ${fmt(f.seconds, 1)} s (${fmt((expected / f.seconds))} records/s)`);
  }
  line(`    data directory ${mib(dirBytes(dataDir))} on disk`);

  // Start 1 replays the log and compacts; then the same snapshot is started from in the new format (2),
  // rewritten in today's format 1 (3), and in the new format again (4), so noise shows as the gap between
  // 2 and 4. Starts 2 and 3 then read every dataset's records, which decodes all of them: the RSS of the
  // whole state held in memory either way.
  interface Start {
    ms: number;
    rss: number;
    hwm: number;
    replay: Record<string, unknown> | undefined;
    touchedHwm?: number;
  }
  const startOnce = async (label: string, touchAll: boolean): Promise<Start> => {
    const { server, spawnToListeningMs } = await startServer(keys, dataDir, profArgs(`restart-${label}`));
    const mem = procStatus(server.proc!.pid!);
    const replay = replayLine(server);
    const held = await totalRecords(server, accounts);
    const settled = await new Promise<{ rss: number }>((r) => setTimeout(() => r(procStatus(server.proc!.pid!)), 2000));
    let touchedHwm: number | undefined;
    if (touchAll) {
      let read = 0;
      for (const a of accounts) {
        const counts = await Promise.all(datasetIds.map(async (id) => (await server.records(a, id)).length));
        read += counts.reduce((x, y) => x + y, 0);
      }
      touchedHwm = procStatus(server.proc!.pid!).hwm;
      if (read !== expected) line(`    WARNING: read ${fmt(read)} records back, expected ${fmt(expected)}`);
    }
    const compaction = await awaitCompaction(server);
    const exit = await stopServer(server);
    const version = replay?.snapshot_version;
    const replayMs =
      typeof replay?.ms === 'number'
        ? `${fmt(replay.ms / 1000, 2)} s loading: snapshot ${replay.snapshot_position === null ? 'none' : `format ${String(version)} at frame ${fmt(Number(replay.snapshot_position))} (${fmt(Number(replay.snapshot_records))} records, ${mib(Number(replay.snapshot_bytes))})`} ` +
          `${fmt(Number(replay.snapshot_ms) / 1000, 2)} s, then ${fmt(Number(replay.frames_replayed))} log frames ${fmt(Number(replay.replay_ms) / 1000, 2)} s`
        : 'no replay line';
    line(
      `    start ${label}: spawn → "listening" ${fmt(spawnToListeningMs / 1000, 2)} s (${replayMs}); RSS ${mib(mem.rss)} at listening, ${mib(settled.rss)} 2 s later, peak ${mib(mem.hwm)}` +
        `${touchedHwm === undefined ? '' : `, peak ${mib(touchedHwm)} after reading every dataset's records`}; holds ${fmt(held.records)} records in ${held.datasets} datasets; exit ${exit}`,
    );
    if (compaction !== undefined) line(`             ${compaction}; data directory then ${mib(dirBytes(dataDir))}`);
    if (held.records !== expected) line(`    WARNING: expected ${fmt(expected)} records, the server holds ${fmt(held.records)}`);
    return { ms: spawnToListeningMs, ...mem, replay, ...(touchedHwm === undefined ? {} : { touchedHwm }) };
  };

  await startOnce('1', false);
  const snapshots = readdirSync(path.join(dataDir, 'snapshots')).filter((n) => n.endsWith('.snap')).sort();
  const snapshot = path.join(dataDir, 'snapshots', snapshots[snapshots.length - 1] ?? 'none');
  if (snapshots.length === 0) throw new Error(`start 1 left no snapshot in ${dataDir}; is PUSHBASE_COMPACT_AFTER_BYTES above the log's size?`);
  const newFormat = `${dataDir}.snap-v2`;
  copyFileSync(snapshot, newFormat);
  dataDirs.push(newFormat);

  const new1 = await startOnce('2 (new format)', true);
  const converted = snapshotTool('to-v1', snapshot) as { bytes: number; ms: number };
  line(`    rewrote the snapshot in today's format 1 (JSON): ${mib(converted.bytes)} (was ${mib(statSync(newFormat).size)}), in a child process`);
  const reference = snapshotTool('parse', snapshot) as { bytes: number; read_ms: number; ms: number; peak_rss: number };
  line(
    `    reference: read + JSON.parse of that format-1 snapshot's ${mib(reference.bytes)}, frame by frame, results kept (child process): ` +
      `${fmt(reference.ms / 1000, 2)} s (read ${fmt(reference.read_ms / 1000, 2)} s), peak RSS ${mib(reference.peak_rss)}`,
  );
  const old = await startOnce('3 (today\'s format)', true);
  renameSync(newFormat, snapshot);
  dataDirs.pop();
  const new2 = await startOnce('4 (new format)', false);

  const newMs = Math.max(new1.ms, new2.ms); // the slower of the two: no credit for a lucky start
  const ratio = (a: number, b: number): string => `${fmt(a / b, 2)}  (${fmt(a / 1000, 2)} s / ${fmt(b / 1000, 2)} s)`;
  line(`    restart, new format (slower of starts 2 and 4) ${fmt(newMs / 1000, 2)} s   target ≤ ${TARGET_RESTART_S} s: ${verdict(newMs <= TARGET_RESTART_S * 1000)}`);
  line(`    ratio to the restart from today's format (start 3)        ${ratio(newMs, old.ms)}   target well under 0.5: ${verdict(newMs / old.ms < 0.5)}`);
  line(`    ratio to read + JSON.parse of today's snapshot bytes       ${ratio(newMs, reference.ms)}`);
  const snapMs = (s: Start): number => Number(s.replay?.snapshot_ms);
  line(`    snapshot load alone, new ÷ today's format                  ${ratio(Math.max(snapMs(new1), snapMs(new2)), snapMs(old))}`);
  line(
    `    RSS at listening: new ${mib(Math.max(new1.rss, new2.rss))}, today's ${mib(old.rss)}; peak with every dataset read: new ${mib(new1.touchedHwm ?? NaN)}, today's ${mib(old.touchedHwm ?? NaN)}   ` +
      `target ≤ today's: ${verdict(Math.max(new1.hwm, new2.hwm, new1.touchedHwm ?? Infinity) <= Math.max(old.hwm, old.touchedHwm ?? 0))}`,
  );
  line();
}

/** Runs bench/snapshot-tool.ts in a child process (nothing else runs meanwhile) and returns its JSON line. */
function snapshotTool(mode: 'to-v1' | 'parse', file: string): unknown {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(__dirname, 'snapshot-tool.ts'), mode, file], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`snapshot-tool ${mode} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop() ?? '');
}

// ── Main ─────────────────────────────────────────────────────────────────────────────────────────────

async function main(): Promise<void> {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  line(`pushbase benchmark — node ${process.version}, ${os.cpus().length} × ${cpu}, ${mib(os.totalmem())} RAM`);
  line(`phases: ${[...opts.phases].join(', ')}; every server and generator is a child process on 127.0.0.1`);
  if (opts.serverNodeArgs.length > 0) line(`server node flags: ${opts.serverNodeArgs.join(' ')}`);
  line(`load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (other work on this machine skews every figure)`);
  line();
  const parse = opts.phases.has('parse') ? parsePhase() : undefined;
  if (opts.phases.has('throughput')) await throughputPhase(parse?.parse);
  if (opts.phases.has('restart')) await restartPhase();
  line(`load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main().then(
  () => {
    cleanup();
    process.exit(0);
  },
  (e: unknown) => {
    process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    for (const s of servers) process.stderr.write(`server output (last lines):\n${s.output.slice(-20).join('\n')}\n`);
    cleanup();
    process.exit(1);
  },
);

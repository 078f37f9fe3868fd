/*
 * The load generator: a child process of run.ts (forked, so it never shares the server's or the
 * orchestrator's event loop). It talks HTTPS with keep-alive to 127.0.0.1 only, through an undici Pool
 * that trusts exactly the server's self-signed certificate.
 *
 * Three modes, chosen by the message the parent sends:
 *   timed — `concurrency` loops send append bodies round-robin over the targets for warm-up + duration;
 *           only requests that finish inside the measured window count;
 *   paced — open loop: requests start at a fixed rate (round-robin over the targets), at most
 *           `concurrency` in flight, for warm-up + duration; latency at a load below the peak;
 *   jobs  — a fixed list of requests (dataset creation, filling), `concurrency` at a time.
 * Targets marked `watch` have the wall-clock time of each 2xx reported (`acks`), to time their visibility.
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool, type Dispatcher } from 'undici';

export interface Target {
  /** Index into `keys`. */
  readonly key: number;
  readonly path: string;
  /** Report the wall-clock time of every 2xx to this target (result.acks). */
  readonly watch?: boolean;
}
export interface Job extends Target {
  readonly method: 'PUT' | 'POST';
  /** Index into `bodies`. */
  readonly body: number;
}

interface Common {
  readonly origin: string;
  readonly ca: string;
  readonly keys: readonly string[];
  readonly bodies: readonly string[];
  readonly concurrency: number;
}
export type LoadRequest =
  | (Common & { readonly mode: 'timed'; readonly targets: readonly Target[]; readonly warmupMs: number; readonly durationMs: number })
  | (Common & { readonly mode: 'paced'; readonly targets: readonly Target[]; readonly perSecond: number; readonly warmupMs: number; readonly durationMs: number })
  | (Common & { readonly mode: 'jobs'; readonly jobs: readonly Job[]; readonly deadlineMs: number });

/** A 2xx to a watched target: its key, path and the epoch milliseconds the answer arrived. */
export interface Ack {
  readonly key: number;
  readonly path: string;
  readonly at: number;
}

export interface LoadResult {
  readonly requests: number;
  readonly ok: number;
  readonly errors: number;
  readonly statuses: Record<string, number>;
  readonly firstErrors: string[];
  readonly durationMs: number;
  /** Every 2xx of the run (timed and paced modes), warm-up and the requests still in flight at the window's end included. */
  readonly acknowledged: number;
  /** When the first request was sent (ms since the epoch): with `acknowledged`, the end-to-end rate. */
  readonly startedAt: number;
  /** When the measured window ended (ms since the epoch). */
  readonly windowEndAt: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
  /** 2xx answers inside the window that took longer than SLOW_MS. */
  readonly slow: number;
  /** CPU seconds this process spent (user + system), to show what the generator itself cost. */
  readonly cpuSeconds: number;
  readonly timedOut: boolean;
  /** 2xx answers to watched targets, in the order they arrived (timed and paced modes). */
  readonly acks: readonly Ack[];
}

/** The bound `slow` counts answers over: the ack p99 target's. */
export const SLOW_MS = 50;

const describeError = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error ? ` (${e.cause.message})` : '';
  return `${e.message}${cause}`;
};

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function run(req: LoadRequest): Promise<LoadResult> {
  const pool = new Pool(req.origin, {
    connections: req.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    connect: { ca: req.ca, rejectUnauthorized: true },
  });
  const auth = req.keys.map((k) => `Basic ${Buffer.from(`${k}:`).toString('base64')}`);
  const bodies = req.bodies.map((b) => Buffer.from(b, 'utf8'));
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const firstErrors: string[] = [];
  let requests = 0;
  let ok = 0;
  let acknowledged = 0;
  let errors = 0;
  const acks: Ack[] = [];
  const cpu0 = process.cpuUsage();

  const send = async (key: number, method: Dispatcher.HttpMethod, path: string, body: number): Promise<{ t0: number; t1: number; ok: boolean }> => {
    const t0 = performance.now();
    let success = false;
    try {
      const res = await pool.request({
        origin: req.origin,
        path,
        method,
        headers: { authorization: auth[key]!, 'content-type': 'application/json' },
        body: bodies[body]!,
      });
      const text = await res.body.text();
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      success = res.statusCode === 200 || res.statusCode === 201;
      if (!success && firstErrors.length < 5) firstErrors.push(`${method} ${path} → ${res.statusCode} ${text.slice(0, 300)}`);
    } catch (e: unknown) {
      statuses.exception = (statuses.exception ?? 0) + 1;
      if (firstErrors.length < 5) firstErrors.push(`${method} ${path} → ${describeError(e)}`);
    }
    return { t0, t1: performance.now(), ok: success };
  };

  const started = performance.now();
  let timedOut = false;
  let windowStart = started;
  let windowEnd = Infinity;
  /** Counts a timed or paced request that finished inside the measured window. */
  const count = (target: Target, r: { t0: number; t1: number; ok: boolean }): void => {
    if (r.ok) acknowledged++;
    if (r.ok && target.watch === true) acks.push({ key: target.key, path: target.path, at: performance.timeOrigin + r.t1 });
    if (r.t1 < windowStart || r.t1 > windowEnd) return;
    requests++;
    if (r.ok) {
      ok++;
      latencies.push(r.t1 - r.t0);
    } else errors++;
  };

  // Tells the parent when the measured window opens (timed and paced modes), for what it measures beside.
  const announceWindow = (): void => {
    setTimeout(() => process.send?.({ windowOpen: true }), Math.max(0, windowStart - performance.now())).unref();
  };
  if (req.mode === 'timed') {
    windowStart = started + req.warmupMs;
    windowEnd = windowStart + req.durationMs;
    announceWindow();
    let next = 0;
    const loop = async (): Promise<void> => {
      while (performance.now() < windowEnd) {
        const i = next++;
        const target = req.targets[i % req.targets.length]!;
        const r = await send(target.key, 'POST', target.path, i % bodies.length);
        count(target, r);
      }
    };
    await Promise.all(Array.from({ length: req.concurrency }, loop));
  } else if (req.mode === 'paced') {
    windowStart = started + req.warmupMs;
    windowEnd = windowStart + req.durationMs;
    announceWindow();
    const gapMs = 1000 / req.perSecond;
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; ; i++) {
      const due = started + i * gapMs;
      if (due >= windowEnd) break;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      // A server slower than the rate: the generator waits for a free slot rather than pile up requests.
      while (inFlight.size >= req.concurrency) await Promise.race(inFlight);
      const target = req.targets[i % req.targets.length]!;
      const p = send(target.key, 'POST', target.path, i % bodies.length).then((r) => {
        count(target, r);
        inFlight.delete(p);
      });
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  } else {
    const deadline = started + req.deadlineMs;
    let next = 0;
    const loop = async (): Promise<void> => {
      while (next < req.jobs.length) {
        if (performance.now() > deadline) {
          timedOut = true;
          return;
        }
        const job = req.jobs[next++]!;
        const r = await send(job.key, job.method, job.path, job.body);
        requests++;
        if (r.ok) {
          ok++;
          latencies.push(r.t1 - r.t0);
        } else errors++;
        // A broken fill is no benchmark: stop early rather than hammer a failing server.
        if (errors > 20) return;
      }
    };
    await Promise.all(Array.from({ length: req.concurrency }, loop));
    windowEnd = performance.now();
  }

  await pool.close();
  const cpu = process.cpuUsage(cpu0);
  const sorted = Float64Array.from(latencies).sort();
  const mean = latencies.length === 0 ? NaN : latencies.reduce((a, b) => a + b, 0) / latencies.length;
  return {
    requests,
    ok,
    errors,
    statuses,
    firstErrors,
    durationMs: windowEnd - windowStart,
    acknowledged,
    startedAt: performance.timeOrigin + started,
    windowEndAt: performance.timeOrigin + windowEnd,
    slow: latencies.filter((l) => l > SLOW_MS).length,
    latencyMs: { p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), p99: quantile(sorted, 0.99), max: sorted.length > 0 ? sorted[sorted.length - 1]! : NaN, mean },
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    timedOut,
    acks,
  };
}

/**
 * Runs the load generator in a child process (so it never shares the caller's event loop) and resolves to
 * its result; `started` gets the child, for a caller that must be able to kill it; `windowOpen` is called
 * when the measured window opens (timed and paced modes).
 */
export function forkLoad(req: LoadRequest, started: (child: ChildProcess) => void = () => undefined, windowOpen: () => void = () => undefined): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'loadgen.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    started(child);
    let settled = false;
    child.on('message', (msg: { result?: LoadResult; error?: string; windowOpen?: true }) => {
      if (msg.windowOpen === true) {
        windowOpen();
        return;
      }
      settled = true;
      if (msg.result !== undefined) resolve(msg.result);
      else reject(new Error(`load generator failed: ${msg.error}`));
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (!settled) reject(new Error(`load generator exited with ${code} before reporting`));
    });
    child.send(req);
  });
}

if (require.main === module) {
  if (process.send === undefined) {
    process.stderr.write('loadgen.ts is started by bench/run.ts (it needs an IPC channel)\n');
    process.exit(2);
  }
  process.once('message', (msg: LoadRequest) => {
    run(msg).then(
      (result) => process.send!({ result }, () => process.disconnect!()),
      (e: unknown) => process.send!({ error: e instanceof Error ? (e.stack ?? e.message) : String(e) }, () => process.disconnect!()),
    );
  });
}

/*
 * The load generator: a child process of run.ts (forked, so it never shares the server's or the
 * orchestrator's event loop). It talks HTTPS with keep-alive to 127.0.0.1 only, through an undici Pool
 * that trusts exactly the server's self-signed certificate.
 *
 * Two modes, chosen by the message the parent sends:
 *   timed — `concurrency` loops send append bodies round-robin over the targets for warm-up + duration;
 *           only requests that finish inside the measured window count;
 *   jobs  — a fixed list of requests (dataset creation, filling), `concurrency` at a time.
 */
import { performance } from 'node:perf_hooks';
import { Pool, type Dispatcher } from 'undici';

export interface Target {
  /** Index into `keys`. */
  readonly key: number;
  readonly path: string;
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
  | (Common & { readonly mode: 'jobs'; readonly jobs: readonly Job[]; readonly deadlineMs: number });

export interface LoadResult {
  readonly requests: number;
  readonly ok: number;
  readonly errors: number;
  readonly statuses: Record<string, number>;
  readonly firstErrors: string[];
  readonly durationMs: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
  /** CPU seconds this process spent (user + system), to show what the generator itself cost. */
  readonly cpuSeconds: number;
  readonly timedOut: boolean;
}

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
  let errors = 0;
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
  let windowEnd: number;

  if (req.mode === 'timed') {
    windowStart = started + req.warmupMs;
    windowEnd = windowStart + req.durationMs;
    let next = 0;
    const loop = async (): Promise<void> => {
      while (performance.now() < windowEnd) {
        const i = next++;
        const target = req.targets[i % req.targets.length]!;
        const r = await send(target.key, 'POST', target.path, i % bodies.length);
        if (r.t1 >= windowStart && r.t1 <= windowEnd) {
          requests++;
          if (r.ok) {
            ok++;
            latencies.push(r.t1 - r.t0);
          } else errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: req.concurrency }, loop));
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
    latencyMs: { p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), p99: quantile(sorted, 0.99), max: sorted.length > 0 ? sorted[sorted.length - 1]! : NaN, mean },
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    timedOut,
  };
}

if (require.main === module) {
  if (process.send === undefined) {
    process.stderr.write('loadgen.ts is started by bench/run.ts (it needs an IPC channel)\n');
    process.exit(2);
  }
  process.once('message', (msg: LoadRequest) => {
    run(msg).then(
      (result) => process.send!({ result }, () => process.disconnect()),
      (e: unknown) => process.send!({ error: e instanceof Error ? (e.stack ?? e.message) : String(e) }, () => process.disconnect()),
    );
  });
}

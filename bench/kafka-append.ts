/*
 * `npx tsx bench/kafka-append.ts` — the Kafka appender's throughput; prints figures, asserts nothing.
 *
 * 500-record append events (decided by the domain from the bench workload, pre-encoded as the record
 * service's worker threads hand them over) into a fresh topic on PUSHBASE_KAFKA_BROKERS (default
 * 127.0.0.1:9092), in two phases of the same run:
 *   one-at-a-time   a single caller, each append awaited before the next: one produce round trip per append;
 *   concurrent      N callers appending in a loop: the linger shares produce requests between them.
 * Each phase runs for a bounded time and prints appends/s, records/s, MB/s, produce requests and appends per
 * request, and append latency p50/p99. The topic is deleted at the end.
 *
 * Flags (or BENCH_<NAME>): --seconds 8  --concurrency 64  --partitions 6  --datasets 64  --linger 5
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { decideAppend, decideDefine, type DatasetSummary } from '@pushbase/domain';
import { createKafka, ensureTopic, KafkaEventAppender, parseBrokers } from '@pushbase/kafka';
import { appendBody, DATASET_DEFINITION, RECORDS_PER_REQUEST } from './workload';

const { values: flags } = parseArgs({
  options: {
    seconds: { type: 'string' },
    concurrency: { type: 'string' },
    partitions: { type: 'string' },
    datasets: { type: 'string' },
    linger: { type: 'string' },
  },
});
const num = (name: keyof typeof flags, def: number): number => {
  const v = flags[name] ?? process.env[`BENCH_${name.toUpperCase()}`];
  const n = v === undefined ? def : Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
  return n;
};
const SECONDS = num('seconds', 8);
const CONCURRENCY = Math.floor(num('concurrency', 64));
const PARTITIONS = Math.floor(num('partitions', 6));
const DATASETS = Math.floor(num('datasets', 64));
const LINGER_MS = num('linger', 5);
const brokers = parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092');
const connection = { brokers, clientId: 'pushbase-bench' };

/** One pre-encoded 500-record event per dataset: what the record service hands the appender. */
function workload(): { events: Parameters<KafkaEventAppender['append']>[0][]; encoded: Uint8Array[] } {
  const encoder = new TextEncoder();
  const events: Parameters<KafkaEventAppender['append']>[0][] = [];
  const encoded: Uint8Array[] = [];
  for (let d = 0; d < DATASETS; d++) {
    const id = `bench-${d}`;
    const defined = decideDefine({ account: 'bench', id, body: DATASET_DEFINITION, at: 0, newIncarnation: `inc-${d}` }, undefined, 0);
    const dataset: DatasetSummary = defined.dataset;
    const event = decideAppend({ account: 'bench', id, body: JSON.parse(appendBody(d)), at: d }, dataset);
    events.push([event]);
    encoded.push(encoder.encode(JSON.stringify([event])));
  }
  return { events, encoded };
}

interface Figures {
  readonly appends: number;
  readonly seconds: number;
  readonly bytes: number;
  readonly requests: number;
  readonly latencies: number[];
}

async function phase(topic: string, callers: number, work: ReturnType<typeof workload>): Promise<Figures> {
  let requests = 0;
  const appender = new KafkaEventAppender({
    connection,
    topic,
    lingerMs: LINGER_MS,
    onRequest: (apiName) => {
      if (apiName === 'Produce') requests += 1;
    },
  });
  // Connect and warm up outside the measured time.
  await Promise.all(work.events.slice(0, Math.min(callers, work.events.length)).map((e, i) => appender.append(e, work.encoded[i])));
  const warm = requests;
  let appends = 0;
  let bytes = 0;
  const latencies: number[] = [];
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let i = c; performance.now() < end; i += callers) {
        const k = i % work.events.length;
        const t = performance.now();
        await appender.append(work.events[k]!, work.encoded[k]);
        latencies.push(performance.now() - t);
        appends += 1;
        bytes += work.encoded[k]!.byteLength - 2;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await appender.close();
  return { appends, seconds, bytes, requests: requests - warm, latencies };
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function report(name: string, f: Figures): number {
  const sorted = [...f.latencies].sort((a, b) => a - b);
  const rate = f.appends / f.seconds;
  console.log(
    `${name.padEnd(22)} ${rate.toFixed(1).padStart(8)} appends/s ${(rate * RECORDS_PER_REQUEST).toFixed(0).padStart(9)} records/s ` +
      `${(f.bytes / f.seconds / 1e6).toFixed(1).padStart(6)} MB/s  ${String(f.requests).padStart(6)} produce requests ` +
      `(${(f.appends / Math.max(1, f.requests)).toFixed(1)} appends each)  latency p50 ${quantile(sorted, 0.5).toFixed(1)} ms p99 ${quantile(sorted, 0.99).toFixed(1)} ms`,
  );
  return rate;
}

async function main(): Promise<void> {
  const topic = `pushbase-bench-${process.pid}-${Date.now()}`;
  const admin = createKafka(connection).admin();
  await admin.connect();
  try {
    await ensureTopic(admin, { topic, partitions: PARTITIONS });
    const work = workload();
    const eventBytes = work.encoded.reduce((n, e) => n + e.byteLength, 0) / work.encoded.length;
    console.log(
      `Kafka appender: ${RECORDS_PER_REQUEST}-record events of ${(eventBytes / 1024).toFixed(0)} KiB, ${DATASETS} datasets, ${PARTITIONS} partitions, ` +
        `linger ${LINGER_MS} ms, ${SECONDS} s per phase, broker ${brokers.join(',')}`,
    );
    console.log(`machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (shared: figures are noisy; compare within a run)`);
    const single = report('one at a time', await phase(topic, 1, work));
    const many = report(`${CONCURRENCY} concurrent`, await phase(topic, CONCURRENCY, work));
    console.log(`concurrent / one-at-a-time: ${(many / single).toFixed(1)}×   load average after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch((err: unknown) => console.error(`could not delete ${topic}: ${String(err)}`));
    await admin.disconnect();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});

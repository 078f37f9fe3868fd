/*
 * The event encoding's own costs, per 500-record append of the benchmark's workload (bench/workload.ts),
 * in one process, each figure the best of several rounds of CPU time (process.cpuUsage, not the wall clock:
 * on a shared machine time spent waiting for a core is not counted):
 *
 *   bytes          the encoded event (a file-log frame, a Kafka message), schema_version 1 and 2
 *   worker         what a write worker does for one append: parse the body, validate, encode
 *   main thread    what the event loop does with the worker's bytes before the fold: decode
 *   old logs       decoding a schema_version 1 event now (through the upcaster), against what the release
 *                  before did with it (JSON.parse and the envelope check)
 *
 *   node --import tsx bench/event-encoding.ts [rounds=8]
 *
 * schema_version 1 is reproduced as that release wrote it: JSON.stringify of the events, records as objects.
 */
import { performance } from 'node:perf_hooks';
import { decodeEventBatch, encodeEventBatchText } from '@pushbase/contracts';
import { decideAppend, decideDefine, parseJsonBody, type DatasetEvent } from '@pushbase/domain';
import { appendBody, DATASET_DEFINITION, RECORDS_PER_REQUEST } from './workload';

const rounds = Number(process.argv[2] ?? 8);
const body = new TextEncoder().encode(appendBody(1));
const dataset = decideDefine({ account: 'bench', id: 'bench', body: DATASET_DEFINITION, at: 0, newIncarnation: 'i' }, undefined, 0).dataset;
const decide = (): DatasetEvent[] => [decideAppend({ account: 'bench', id: 'bench', body: parseJsonBody(body), at: 0 }, dataset)];
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const v1Text = (events: readonly DatasetEvent[]): string => JSON.stringify(events.map((e) => ({ ...e, schema_version: 1 })));

const events = decide();
const v1 = encoder.encode(v1Text(events));
const v2 = encoder.encode(encodeEventBatchText(events));

let sink = 0;
const cases: [string, () => void][] = [
  ['worker: parse + validate + encode, schema_version 1', () => (sink += encoder.encode(JSON.stringify(decide())).length)],
  ['worker: parse + validate + encode, schema_version 2', () => (sink += encoder.encode(encodeEventBatchText(decide())).length)],
  ['main thread: decode, schema_version 1 (the release before)', () => (sink += (JSON.parse(decoder.decode(v1)) as unknown[]).length)],
  ['main thread: decode, schema_version 2', () => (sink += decodeEventBatch(v2).length)],
  ['old logs: schema_version 1 through the upcaster', () => (sink += decodeEventBatch(v1).length)],
];

const best = new Map<string, number>();
for (let r = 0; r < rounds; r++) {
  for (const [name, run] of cases) {
    const warm = performance.now() + 30;
    while (performance.now() < warm) run();
    let n = 0;
    const t0 = process.cpuUsage();
    let used = 0;
    while (used < 150_000) {
      for (let i = 0; i < 5; i++) run();
      n += 5;
      const d = process.cpuUsage(t0);
      used = d.user + d.system;
    }
    const us = used / n;
    best.set(name, Math.min(best.get(name) ?? Infinity, us));
  }
}

const line = (s: string): boolean => process.stdout.write(`${s}\n`);
line(`event encoding — one ${RECORDS_PER_REQUEST}-record append of ${(body.length / 1024).toFixed(1)} KiB, CPU µs per append, best of ${rounds} rounds`);
line(`  bytes: schema_version 1 ${v1.length.toLocaleString('en-US')}, schema_version 2 ${v2.length.toLocaleString('en-US')} (${((100 * v2.length) / v1.length).toFixed(0)}%)`);
for (const [name, us] of best) line(`  ${name.padEnd(60)} ${us.toFixed(1).padStart(7)} µs`);
if (sink === 0) line('(unreachable)');

import { setFlagsFromString } from 'node:v8';

/*
 * The old generation's growing factor of the request-path services (gateway, schema, records).
 *
 * Why: V8 sets the next full collection's limit from the heap that survived the last one, times a factor
 * it derives from GC and mutator speed (about 1.7 here). These services hold little (35–45 MB live) and
 * allocate much per request (a 500-record append is ~72 KB of JSON parsed, validated, encoded and copied
 * through gRPC and kafkajs), so the limit sat a few MB above the live heap and a full collection started
 * again almost as soon as one had ended. Measured with --trace-gc and --trace-incremental-marking during
 * `npm run bench:distributed` at ~100 appends/s: the gateway ran a mark-compact every 0.3–0.5 s (71 in one
 * run) and records every ~1 s, each 5–35 ms of pause plus 5–35 ms of marking steps on the main thread, 40–90
 * ms wall; the slowest appends came in trains that began at such a collection in the gateway or records.
 * With the factor at 5 (this value): 24 in the gateway and 29 in records in the same run's length, and the
 * collections left are V8's external-memory trigger (Buffers), which this factor does not move. Ack p99 at
 * half the peak went from 98–130 ms (three runs) to 54–88 ms (six runs); the peak RSS stayed within 10% (the
 * live heap is small, so five times it is too).
 *
 * Not for the projector: its live heap is the dataset states (hundreds of MB, bounded by
 * PUSHBASE_PROJECTOR_MAX_ROWS), where five times the live heap is memory a deployment has not budgeted.
 *
 * V8 reads the flag at every collection, so setting it at start-up in the process is enough. An operator's
 * own `node --heap-growing-percent=N` wins.
 */
export const REQUEST_PATH_HEAP_GROWING_PERCENT = 400;

/** Applies the request-path factor unless the process was started with its own. Returns the flag in force. */
export function tuneRequestPathHeap(execArgv: readonly string[] = process.execArgv): string {
  const own = execArgv.find((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a));
  if (own !== undefined) return own;
  const flag = `--heap-growing-percent=${REQUEST_PATH_HEAP_GROWING_PERCENT}`;
  setFlagsFromString(flag);
  return flag;
}

import { setFlagsFromString } from 'node:v8';

/*
 * The old generation's growing factor of the request-path services (gateway, schema, records): they hold
 * little and allocate much per request, so V8's default limit, a few MB above the live heap, started a full
 * collection almost as soon as one ended, and slow appends came in trains behind them. Not for the
 * projector, whose live heap is the dataset states. An operator's own `node --heap-growing-percent=N` wins.
 * The measurements: docs/performance.md → The request path's heap.
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

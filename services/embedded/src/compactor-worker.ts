import { parentPort, workerData } from 'node:worker_threads';
import { compact, type CompactionJob } from './compaction';

/*
 * The compaction worker's entry point (bundled as dist/compactor.js by scripts/build.js). It receives one
 * CompactionJob as workerData, runs it, posts `{ ok: true, result }` or `{ ok: false, error }`, and exits.
 * A thread rather than a child process: it shares nothing but the data directory's files with the main
 * thread, and dies with the server.
 */

const job = workerData as CompactionJob;
compact(job).then(
  (result) => parentPort?.postMessage({ ok: true, result }),
  (err: unknown) => parentPort?.postMessage({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
);

/*
 * The restart phase's helpers (bench/run.ts), each run in a child process of its own so that neither
 * timing nor memory is skewed by what the orchestrator holds. Prints one JSON line.
 *
 *   node --import tsx bench/snapshot-tool.ts to-v1 FILE   rewrites the snapshot FILE (any version) in place
 *                                                         in format version 1 (JSON), as today's release writes it
 *   node --import tsx bench/snapshot-tool.ts parse FILE   reads the version-1 snapshot FILE and JSON.parses
 *                                                         every frame, keeping the results: the reference
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { readSnapshot, writeSnapshot } from '../services/embedded/src/snapshot';

const peakRss = (): number => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN) * 1024;

async function toV1(file: string): Promise<unknown> {
  const t0 = performance.now();
  const { info, state } = await readSnapshot(file);
  const dataDir = path.dirname(path.dirname(file));
  const written = await writeSnapshot(dataDir, info.position, state, undefined, undefined, {}, 1);
  return { from_version: info.version, bytes: written.bytes, records: written.records, ms: performance.now() - t0 };
}

/** Read the whole file, then JSON.parse each frame's payload (its crc is not checked: the parse alone). */
function parse(file: string): unknown {
  const t0 = performance.now();
  const bytes = readFileSync(file);
  const readMs = performance.now() - t0;
  const values: unknown[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = bytes.readUInt32LE(at);
    values.push(JSON.parse(bytes.toString('utf8', at + 8, at + 8 + length)));
    at += 8 + length;
  }
  const ms = performance.now() - t0;
  return { bytes: bytes.length, frames: values.length, read_ms: readMs, ms, peak_rss: peakRss() };
}

const [mode, file] = process.argv.slice(2);
if (file === undefined || (mode !== 'to-v1' && mode !== 'parse')) {
  process.stderr.write('usage: node --import tsx bench/snapshot-tool.ts to-v1|parse FILE\n');
  process.exit(2);
}
(mode === 'parse' ? Promise.resolve(parse(file)) : toV1(file)).then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);

import { decideWriteText, type RawWriteCommand } from './write-decider';
import { eventHeads, type EventHead } from '@pushbase/contracts';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import Piscina from 'piscina';

/*
 * A write-pool thread (bundled as dist/write-worker.js): parses, validates and serialises one write and
 * hands the encoded event back without copying, with the events' heads (everything but the records), so
 * the event loop can store and fold the write without decoding it. A DomainError comes back as data, so
 * that its code survives the thread boundary; anything else is a real failure and rejects the task.
 */

export interface WriteTask {
  readonly cmd: RawWriteCommand;
  readonly dataset: DatasetSummary | undefined;
}
export interface WriteTaskResult {
  /** The encoded events, for the log: moved, not copied. */
  readonly encoded: Uint8Array;
  /**
   * The same as text (a copy crosses), for the projection to keep while the records stay encoded. On the
   * JS heap, unlike `encoded`: V8 starts a full collection for every 64 MB or so of buffers kept alive
   * outside its heap, and the projection keeps many of them at full ingest, where text on the heap is
   * collected as the heap grows (docs/performance.md → Measurements behind the code).
   */
  readonly text: string;
  readonly heads: readonly EventHead[];
}
export type WriteTaskError = { readonly error: { readonly code: DomainError['code']; readonly message: string; readonly path?: string } };

const encoder = new TextEncoder();

// Definitions are immutable per incarnation: keep the first copy of each, so its compiled validators
// (cached by identity in the domain) are reused instead of rebuilt for every request.
const datasets = new Map<string, DatasetSummary>();
const MAX_CACHED = 10_000;

function cached(dataset: DatasetSummary | undefined): DatasetSummary | undefined {
  if (dataset === undefined) return undefined;
  const known = datasets.get(dataset.incarnation);
  if (known !== undefined) return known;
  if (datasets.size >= MAX_CACHED) datasets.clear();
  datasets.set(dataset.incarnation, dataset);
  return dataset;
}

export default function decide({ cmd, dataset }: WriteTask): unknown {
  try {
    const { events, text } = decideWriteText(cmd, cached(dataset));
    const encoded = encoder.encode(text);
    const result: WriteTaskResult = { encoded, text, heads: eventHeads(events) };
    // Moved, not cloned: the encoded events travel as their buffer; only the small heads are copied.
    // (Piscina's getters for the two symbols are typed as plain symbols, hence the cast.)
    const movable = { [Piscina.transferableSymbol]: encoded.buffer, [Piscina.valueSymbol]: result } as unknown as Parameters<typeof Piscina.move>[0];
    return Piscina.move(movable);
  } catch (e: unknown) {
    if (!(e instanceof DomainError)) throw e;
    const error: WriteTaskError = { error: { code: e.code, message: e.message, ...(e.path === undefined ? {} : { path: e.path }) } };
    return error;
  }
}

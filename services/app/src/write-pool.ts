import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { eventsFromEncodedBatch } from '@pushbase/contracts';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import Piscina from 'piscina';

type RunOptions = NonNullable<Parameters<Piscina['run']>[1]>;
import type { WriteDecider } from './write-decider';
import type { WriteTask, WriteTaskError, WriteTaskResult } from './write-worker';

/*
 * The embedded server and the records service decide writes (parse + validate + serialise: most of a
 * write's CPU) in worker threads, so the event loop only does TLS, HTTP, the log and the fold (embedded),
 * or gRPC and Kafka (records). The garbage a decision makes (every parsed record) is then collected in a
 * worker's own heap (in the records service, the event loop's scavenges halved). The event loop does not
 * even decode what a worker encoded: the events come back as their heads plus the encoded bytes, and their
 * records are built from those bytes only when something reads them (the domain's RowMap keeps appended
 * rows encoded until then). Piscina runs the pool.
 */

export const WRITE_WORKER_FILE = path.join(__dirname, 'write-worker.js');

export interface WritePool {
  readonly decider: WriteDecider;
  readonly threads: number;
  close(): Promise<void>;
}

/**
 * The default pool size of both users: none on one core, where a worker would only compete with the event
 * loop for it (reasoned, not measured), else the cores plus `extra`, at most 4. The embedded server takes one
 * more than its cores and the records service one per core; their configs say why (the records service's
 * figures are in docs/operations.md).
 */
export const defaultWriteWorkerCount = (extra: number, cores: number = availableParallelism()): number =>
  cores <= 1 ? 0 : Math.min(4, cores + extra);

export interface WritePoolOptions {
  /** The bundled worker; tests point it elsewhere. */
  readonly filename?: string;
  /** Told when workers were asked for but the bundled worker is not there (running from sources). */
  readonly onUnavailable?: (message: string) => void;
}

/** A pool of `threads` workers, or undefined when none were asked for or the bundled worker is not there. */
export function createWritePool(threads: number, options: WritePoolOptions = {}): WritePool | undefined {
  const filename = options.filename ?? WRITE_WORKER_FILE;
  if (threads <= 0) return undefined;
  if (!existsSync(filename)) {
    options.onUnavailable?.(`write workers unavailable (no bundled ${path.basename(filename)}): deciding writes on the event loop`);
    return undefined;
  }
  const pool = new Piscina<WriteTask, WriteTaskResult | WriteTaskError>({ filename, minThreads: threads, maxThreads: threads, idleTimeout: Infinity });
  const decider: WriteDecider = async (cmd, dataset) => {
    // The body may be a view into a much larger buffer (a socket's read slab), which a structured clone
    // would copy whole: hand over an exact copy instead, moved rather than cloned. A body that is its whole
    // buffer (what the gateway reads: one allocation of the Content-Length) is moved as it is; the caller
    // is done with it.
    const whole = cmd.json.byteOffset === 0 && cmd.json.byteLength === cmd.json.buffer.byteLength && cmd.json.buffer instanceof ArrayBuffer;
    const json = whole ? new Uint8Array(cmd.json.buffer) : new Uint8Array(cmd.json);
    // Only the schema crosses: the projection's summary is its live dataset state, rows and all.
    const schema: DatasetSummary | undefined =
      dataset === undefined
        ? undefined
        : { account: dataset.account, id: dataset.id, incarnation: dataset.incarnation, definition: dataset.definition, created_at: dataset.created_at, updated_at: dataset.updated_at };
    // piscina 5.3.2 types transferList after MessagePort.postMessage's last overload, the options form in
    // @types/node 26; at run time it must be, and is handed on as, postMessage's array of transferables.
    const transferList = [json.buffer] as unknown as RunOptions['transferList'];
    const result = await pool.run({ cmd: { ...cmd, json }, dataset: schema }, { transferList });
    if ('error' in result) throw new DomainError(result.error.code, result.error.message, result.error.path);
    return { events: eventsFromEncodedBatch(result.text, result.heads), encoded: result.encoded };
  };
  return { decider, threads, close: () => pool.destroy() };
}

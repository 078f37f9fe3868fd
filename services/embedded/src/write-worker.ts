import { decideWriteSync, type RawWriteCommand } from '@pushbase/app';
import { DomainError, type DatasetSummary } from '@pushbase/domain';
import Piscina from 'piscina';

/*
 * A write-pool thread (bundled as dist/write-worker.js): parses, validates and serialises one write and
 * hands the encoded event back without copying. A DomainError comes back as data, so that its code
 * survives the thread boundary; anything else is a real failure and rejects the task.
 */

export interface WriteTask {
  readonly cmd: RawWriteCommand;
  readonly dataset: DatasetSummary | undefined;
}
export type WriteTaskError = { readonly error: { readonly code: DomainError['code']; readonly message: string; readonly path?: string } };

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
    const { encoded } = decideWriteSync(cmd, cached(dataset));
    return Piscina.move(encoded);
  } catch (e: unknown) {
    if (!(e instanceof DomainError)) throw e;
    const error: WriteTaskError = { error: { code: e.code, message: e.message, ...(e.path === undefined ? {} : { path: e.path }) } };
    return error;
  }
}

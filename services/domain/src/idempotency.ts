import { clip, DomainError } from './errors';
import type { DatasetEvent } from './events';
import type { DatasetDefinition } from './types';
import type { DatasetSummary } from './fold';

/*
 * Idempotency keys (docs/api.md → Retrying a write): a write sent with an `Idempotency-Key` is applied at
 * most once per account and key while the key is retained; a repeat of the same request gets the first
 * answer again, a different request under the same key is refused. The key travels inside the event it
 * guards, so the set of applied keys is the fold of the log itself: exactly as durable as the writes.
 */

/** The key a write was sent with and the fingerprint of the request (method, path, body) it guards. */
export interface IdempotencyMark {
  readonly key: string;
  readonly fingerprint: string;
}

/**
 * The dataset a keyed create created, as its key keeps it. Without its definition when recorded from the
 * log (appliedKeyOf): a repeat has the same body bytes (the fingerprint says so), so the definition is
 * parsed again from the repeat, and a retained key costs a few hundred bytes, not a definition's worth.
 */
export type CreatedDataset = Omit<DatasetSummary, 'definition'> & { readonly definition?: DatasetDefinition };

/**
 * A key whose write is stored: what a repeat of it is answered from. `dataset` is the created dataset of
 * a `PUT /datasets/:id` that created it (answered 201 with it); every other keyed write answers `{}`.
 */
export interface AppliedKey {
  readonly account: string;
  readonly key: string;
  readonly fingerprint: string;
  /** The event's server time (epoch ms): the key is retained for the TTL from then. */
  readonly at: number;
  readonly dataset?: CreatedDataset;
}

/** The applied key an event records, if it carries one. */
export function appliedKeyOf(event: DatasetEvent): AppliedKey | undefined {
  const mark = event.idempotency;
  if (mark === undefined) return undefined;
  const applied = { account: event.account, key: mark.key, fingerprint: mark.fingerprint, at: event.at };
  if (event.type !== 'DatasetDefined') return applied;
  const dataset: CreatedDataset = { account: event.account, id: event.dataset, incarnation: event.incarnation, created_at: event.at, updated_at: event.at };
  return { ...applied, dataset };
}

/** Keys are printable ASCII (checked at the edge); shown quoted and cut in messages. */
const shown = (key: string): string => JSON.stringify(clip(key, 64));

export const keyReused = (key: string): DomainError =>
  new DomainError('idempotency_mismatch', `The Idempotency-Key ${shown(key)} was already used for a different request (another method, path or body); use a new key for a new request`);

export const keyInFlight = (key: string): DomainError =>
  new DomainError('idempotency_in_flight', `A request with the Idempotency-Key ${shown(key)} is still being worked on; retry once it has been answered`);

/**
 * What a write sent with `mark` does given the key's applied write, if any: undefined when it is to be
 * applied, the applied key to answer from when it is a repeat; a different request under the key throws.
 */
export function repeatOf(applied: AppliedKey | undefined, mark: IdempotencyMark): AppliedKey | undefined {
  if (applied === undefined) return undefined;
  if (applied.fingerprint !== mark.fingerprint) throw keyReused(mark.key);
  return applied;
}

/** Whether an applied key is retained at `now` under a retention of `ttlMs`. */
export const retained = (applied: AppliedKey, now: number, ttlMs: number): boolean => applied.at + ttlMs > now;

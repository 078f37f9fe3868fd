import { isDeepStrictEqual } from 'node:util';
import {
  decideAppend,
  decideDefine,
  decideDelete,
  decideReplace,
  DomainError,
  fold,
  recordsOf,
  type DatasetEvent,
  type DatasetRecord,
  type DatasetSummary,
  type FieldDefinition,
} from '@pushbase/domain';

/*
 * The fault tests' oracle: what a dataset must look like after a run, from what the server answered.
 *
 * Every request to one dataset is sent after the previous one's answer, so the acknowledged requests have
 * one order. Each answer is sorted into an outcome:
 *   acknowledged  a 2xx: it must be applied, once, in that order;
 *   refused       a 4xx or 503: it must never be applied;
 *   unknown       a 500 (outcome_unknown), a reset connection, a timeout: applied at most once, or not.
 * The reference state is the pure domain fold (services/domain's decide functions and evolve, the very
 * rules the server runs) of the acknowledged requests, each unknown one either applied at its place or not:
 * with k unknowns there are 2^k candidate histories, and the visible state must equal one of them. A
 * candidate in which an acknowledged request could not have been decided as it was answered (an append
 * acknowledged while that history has no dataset, a 201 where the dataset already existed) is no
 * candidate. Datasets are independent streams, so each is judged on its own.
 *
 * A request sent with an Idempotency-Key is sent again with the same key after an unknown outcome (or a
 * 409, 503) until an answer says what became of it, and is ONE request to the oracle, with that answer:
 * acknowledged means applied exactly once, at its place, however many attempts reached the server; refused
 * means never applied, by any attempt. So the keyed datasets check exactly-once across retries, where a
 * request retried without a key could land twice.
 */

export type Outcome = 'acknowledged' | 'refused' | 'unknown';

export type Operation =
  | { readonly kind: 'define'; readonly body: unknown }
  | { readonly kind: 'append'; readonly body: unknown }
  | { readonly kind: 'replace'; readonly body: unknown }
  | { readonly kind: 'delete' };

export interface Answer {
  /** The HTTP status; undefined when no answer came (reset, timeout). */
  readonly status: number | undefined;
  /** `error.code` of an error body, or the transport error's message. */
  readonly code?: string;
  /** Answered with `Idempotent-Replayed: true`. */
  readonly replayed?: boolean;
}

export interface Sent {
  readonly op: Operation;
  readonly answer: Answer;
  readonly outcome: Outcome;
  /** With an Idempotency-Key: its attempts (the answer and outcome are the last one's). */
  readonly attempts?: readonly Answer[];
  /** The Idempotency-Key its attempts were sent with. */
  readonly key?: string;
}

/**
 * Whether a keyed request's attempts must be sent again to learn its outcome: no answer, a 500, a 409 (an
 * attempt holds the key) or a 503 (this attempt did nothing, but an earlier one may have).
 */
export const unsettled = (answer: Answer): boolean => answer.status === undefined || answer.status === 409 || answer.status === 503 || answer.status >= 500;

/** Sorts an answer into its outcome (docs/api.md → Errors; a 503 was never stored: docs/api.md → Retrying safely). */
export function outcomeOf(answer: Answer): Outcome {
  const s = answer.status;
  if (s === undefined) return 'unknown';
  if (s >= 200 && s < 300) return 'acknowledged';
  if ((s >= 400 && s < 500) || s === 503) return 'refused';
  // 500 outcome_unknown, and anything else unexpected: it may or may not have been applied.
  return 'unknown';
}

/** What the read side shows of one dataset: undefined when it does not exist. */
export interface DatasetView {
  readonly fields: Readonly<Record<string, FieldDefinition>>;
  readonly unique_by: readonly string[];
  readonly records: readonly DatasetRecord[];
}

export interface Candidates {
  /** Distinct states the dataset may be in (undefined: it must not exist). */
  readonly states: readonly (DatasetView | undefined)[];
  /** How many unknown requests were branched on. */
  readonly unknowns: number;
}

export const MAX_UNKNOWNS_PER_DATASET = 10;

/**
 * Folds one candidate history; undefined when an acknowledged request could not have been answered so in
 * it. `incarnations` counts creations so each has a fresh incarnation, as the schema service makes them.
 */
function foldHistory(account: string, id: string, history: readonly Sent[]): DatasetView | undefined | 'impossible' {
  let summary: DatasetSummary | undefined;
  let created = 0;
  const events: DatasetEvent[] = [];
  for (const sent of history) {
    const { op } = sent;
    try {
      switch (op.kind) {
        case 'define': {
          const d = decideDefine({ account, id, body: op.body, at: 0, newIncarnation: `candidate-${created}` }, summary, summary === undefined ? 0 : 1);
          if (d.outcome === 'created') {
            created++;
            events.push(d.event);
          }
          // A 201 promises it created the dataset, a 200 that it found it.
          if (sent.outcome === 'acknowledged' && sent.answer.status !== (d.outcome === 'created' ? 201 : 200)) return 'impossible';
          summary = d.dataset;
          break;
        }
        case 'append':
          events.push(decideAppend({ account, id, body: op.body, at: 0 }, summary));
          break;
        case 'replace':
          events.push(decideReplace({ account, id, body: op.body, at: 0 }, summary));
          break;
        case 'delete':
          events.push(decideDelete({ account, id, at: 0 }, summary));
          summary = undefined;
          break;
      }
    } catch (e) {
      if (!(e instanceof DomainError)) throw e;
      // The server would have refused it: an acknowledged one makes this history impossible; an unknown
      // one that the server could only have refused simply was not applied.
      if (sent.outcome === 'acknowledged') return 'impossible';
    }
  }
  const ds = fold(events).get(account)?.get(id);
  if (ds === undefined) return undefined;
  return { fields: ds.definition.fields, unique_by: ds.definition.unique_by, records: recordsOf(ds) };
}

/** Every state the dataset may be in after `sent` (in the order sent), given their outcomes. */
export function candidates(account: string, id: string, sent: readonly Sent[]): Candidates {
  const considered = sent.filter((s) => s.outcome !== 'refused');
  const unknownAt = considered.flatMap((s, i) => (s.outcome === 'unknown' ? [i] : []));
  if (unknownAt.length > MAX_UNKNOWNS_PER_DATASET) {
    throw new Error(`${account}/${id}: ${unknownAt.length} unknown outcomes, more than the ${MAX_UNKNOWNS_PER_DATASET} the oracle branches on`);
  }
  const states: (DatasetView | undefined)[] = [];
  for (let mask = 0; mask < 2 ** unknownAt.length; mask++) {
    const skipped = new Set(unknownAt.filter((_, bit) => (mask & (1 << bit)) !== 0));
    const state = foldHistory(
      account,
      id,
      considered.filter((_, i) => !skipped.has(i)),
    );
    if (state === 'impossible') continue;
    if (!states.some((s) => isDeepStrictEqual(s, state))) states.push(state);
  }
  return { states, unknowns: unknownAt.length };
}

/** Whether the visible state is one of the candidates. */
export function matches(visible: DatasetView | undefined, c: Candidates): boolean {
  return c.states.some((s) => isDeepStrictEqual(s, visible));
}

/** A short account of how `visible` differs from the nearest candidate, for a failure message. */
export function describeDifference(key: string, visible: DatasetView | undefined, c: Candidates): string {
  if (c.states.length === 0) return `${key}: no history fits the answers (an acknowledged request the domain would have refused)`;
  const show = (v: DatasetView | undefined): string => (v === undefined ? 'absent' : `${v.records.length} records, unique_by [${v.unique_by.join(',')}]`);
  const lines = [`${key}: visible ${show(visible)}; expected one of ${c.states.length} (${c.unknowns} unknown outcomes): ${c.states.map(show).join(' | ')}`];
  const nearest = c.states.find((s) => s !== undefined && visible !== undefined && s.records.length === visible.records.length) ?? c.states[0];
  if (nearest !== undefined && visible !== undefined) {
    if (!isDeepStrictEqual(nearest.fields, visible.fields)) lines.push(`  fields differ: ${JSON.stringify(visible.fields)} vs ${JSON.stringify(nearest.fields)}`);
    const n = Math.max(nearest.records.length, visible.records.length);
    for (let i = 0; i < n; i++) {
      if (!isDeepStrictEqual(nearest.records[i], visible.records[i])) {
        lines.push(`  first differing record #${i}: visible ${JSON.stringify(visible.records[i])} vs expected ${JSON.stringify(nearest.records[i])}`);
        break;
      }
    }
  }
  return lines.join('\n');
}

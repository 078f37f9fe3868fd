/**
 * Errors carry a neutral code; HTTP statuses and gRPC codes are chosen at the edges only
 * (gateway error middleware, gRPC servers). Never put a transport number in here.
 */
export type DomainErrorCode =
  | 'invalid' // the request breaks a rule of the spec (bad id, definition, record, delete_by…)
  | 'not_found' // the dataset does not exist for this account
  | 'conflict' // the dataset exists with a different definition
  | 'dataset_limit' // the account already holds the maximum number of datasets
  | 'unavailable' // a dependency (event log, store) cannot take the write now; nothing was or will be stored
  | 'outcome_unknown' // the write was handed on, but whether it is stored cannot be told (a crash or timeout after sending)
  | 'idempotency_mismatch' // the Idempotency-Key was already used for a different request
  | 'idempotency_in_flight'; // a request with the same Idempotency-Key is still being worked on

export class DomainError extends Error {
  override readonly name = 'DomainError';
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** Where the rule was broken, e.g. `data[3].amount` or `fields.day.type`. */
    readonly path?: string,
  ) {
    super(message);
  }
}

export const invalid = (message: string, path?: string): DomainError => new DomainError('invalid', message, path);

/** What kind of JSON value `v` is, for error messages. */
export const describeValue = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);

/**
 * At most `max` UTF-16 units of a client's text (a key, an id), as well-formed Unicode, for a message or a
 * path. gRPC carries both as UTF-8, where a lone surrogate (sent, or left by the cut) cannot go: made
 * U+FFFD here, the two modes answer alike.
 */
export const clip = (s: string, max = 60): string => s.slice(0, max).toWellFormed();

/**
 * A short, safe rendering of a client's value for an error message: strings quoted and cut to 60
 * characters, numbers and booleans as they are, anything else only by kind — never serialised whole
 * (a 4 MiB or deeply nested value must not cost a stack overflow or megabytes of message).
 */
export function quoteValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return v === undefined ? 'nothing' : describeValue(v);
}

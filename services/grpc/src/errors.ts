import { Metadata, status as Status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { DomainError, type DomainErrorCode } from '@pushbase/domain';

/*
 * Both directions of the error mapping between pushbase's domain codes and gRPC statuses. The server
 * side turns a handler's failure into a status here, and nowhere else; the client adapters turn a status
 * back into a DomainError, so the gateway's one error middleware answers it over HTTP exactly as the
 * embedded mode does. No HTTP number ever travels inside a gRPC error.
 */

/** Trailing metadata with the domain code: the status code alone cannot tell `dataset_limit` apart from a quota. */
export const ERROR_CODE_KEY = 'pushbase-error-code';
/**
 * Trailing metadata with the domain error's path (`data[3].amount`), when it has one. Binary (`-bin`):
 * the path holds the client's own keys, and a text value outside printable ASCII makes grpc-js throw.
 */
export const ERROR_PATH_KEY = 'pushbase-error-path-bin';
/** The text key an older service sends the path under; still read during a rolling upgrade. */
const LEGACY_ERROR_PATH_KEY = 'pushbase-error-path';

// The one place where a domain code becomes a gRPC status (proto/pushbase/v1/common.proto lists it too).
const GRPC_STATUS_OF: Readonly<Record<DomainErrorCode, Status>> = Object.freeze({
  invalid: Status.INVALID_ARGUMENT,
  not_found: Status.NOT_FOUND,
  conflict: Status.ALREADY_EXISTS,
  // Not a rate limit to the API client (the gateway answers 400), but a quota in gRPC's words.
  dataset_limit: Status.RESOURCE_EXHAUSTED,
  unavailable: Status.UNAVAILABLE,
  // The service handed the write on (to Kafka) and cannot tell whether it is stored: gRPC's own word for
  // "the outcome is unknown" (a retry-safe UNAVAILABLE would promise the write was not applied).
  outcome_unknown: Status.UNKNOWN,
  // The key's first request was a different one: the state (the key's record) forbids this request.
  idempotency_mismatch: Status.FAILED_PRECONDITION,
  // gRPC's word for a concurrency conflict that the caller may retry.
  idempotency_in_flight: Status.ABORTED,
});

const DOMAIN_CODES = new Set<string>(Object.keys(GRPC_STATUS_OF));
const isDomainCode = (v: unknown): v is DomainErrorCode => typeof v === 'string' && DOMAIN_CODES.has(v);

/** The status a failed handler answers with. Handlers' callbacks take it as their error. */
export type GrpcErrorStatus = Pick<StatusObject, 'code' | 'details' | 'metadata'>;

/** What the API client may read of an unexpected failure: no stack, no internal message. */
export const INTERNAL_DETAILS = 'Internal error in the service';

/**
 * The gRPC status of a handler's failure: a DomainError keeps its message and travels with its code (and
 * path) in the trailers; anything else is INTERNAL with a fixed message, its stack left to the server log.
 */
export function toGrpcStatus(err: unknown): GrpcErrorStatus {
  const metadata = new Metadata();
  if (err instanceof DomainError) {
    metadata.set(ERROR_CODE_KEY, err.code);
    if (err.path !== undefined) metadata.set(ERROR_PATH_KEY, Buffer.from(err.path, 'utf8'));
    return { code: GRPC_STATUS_OF[err.code], details: err.message, metadata };
  }
  return { code: Status.INTERNAL, details: INTERNAL_DETAILS, metadata };
}

/** A read can be repeated at will; a write's outcome matters once it may have reached the service. */
export type CallKind = 'read' | 'write';

const firstString = (metadata: Metadata | undefined, key: string): string | undefined => {
  const v = metadata?.get(key)[0];
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return typeof v === 'string' ? v : undefined;
};

/*
 * "Never sent" must be proven, not guessed: a 503 promises the API client that the write will never be
 * applied. Only the failures grpc-js (1.14) raises before any byte left the client count: no connection at
 * the pick, a deadline while waiting for the pick, a stream the server refused. Everything else may have
 * reached the handler. The cases and why they are sound: docs/architecture.md → A gRPC call proven never
 * sent; test/grpc.int.test.ts pins each, so an upgrade can only degrade this to outcome_unknown.
 */
export function provenNeverSent(err: Pick<StatusObject, 'code' | 'details'>): boolean {
  const details = err.details ?? '';
  if (err.code === Status.UNAVAILABLE) return /(^|: )No connection established/.test(details) || details === 'Stream refused by server';
  if (err.code === Status.DEADLINE_EXCEEDED) return details.includes('Waiting for LB pick');
  return false;
}

// Statuses of a read that mean the service could not answer now, rather than a bug on either side.
const TRANSIENT = new Set<Status>([Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED, Status.UNKNOWN, Status.RESOURCE_EXHAUSTED, Status.ABORTED]);

/** A status code's name (`INVALID_ARGUMENT`), or the number itself when grpc-js knows no name for it. */
export const statusName = (code: number): string => Status[code] ?? String(code);

/**
 * The error a client adapter rejects with for a failed call of `service` (`schema`, `records`):
 * - the service's own answer (our trailer present): the DomainError it stood for, message and path kept;
 * - proven never sent: `unavailable` (the write will never be applied);
 * - UNAUTHENTICATED (the token refused, auth.ts): a plain Error, read or write;
 * - a write that may have reached the service: `outcome_unknown`;
 * - a read: `unavailable` when the service could not answer, a plain Error (a 500) for anything that
 *   means a bug (INTERNAL, UNIMPLEMENTED…), so it is logged rather than dressed up as an outage.
 */
export function fromGrpcError(err: Pick<ServiceError, 'code' | 'details' | 'metadata'>, kind: CallKind, service: string): Error {
  const code = firstString(err.metadata, ERROR_CODE_KEY);
  if (isDomainCode(code)) return new DomainError(code, err.details, firstString(err.metadata, ERROR_PATH_KEY) ?? firstString(err.metadata, LEGACY_ERROR_PATH_KEY));
  if (provenNeverSent(err)) return new DomainError('unavailable', `The ${service} service cannot be reached; the request was not sent`);
  // Refused before any handler ran: a configuration error to log, not a write of unknown outcome.
  if (err.code === Status.UNAUTHENTICATED) return new Error(`The ${service} service refused the call: give the gateway the PUSHBASE_GRPC_TOKEN the service has (${err.details})`);
  if (kind === 'write') {
    return new DomainError('outcome_unknown', `The ${service} service did not confirm the write (${statusName(err.code)}); it may or may not have been applied`);
  }
  if (TRANSIENT.has(err.code)) return new DomainError('unavailable', `The ${service} service cannot answer now (${statusName(err.code)})`);
  return new Error(`The ${service} service failed: ${statusName(err.code)} ${err.details}`);
}

/** A grpc-js call error: it carries a numeric status code. */
export const isServiceError = (e: unknown): e is ServiceError =>
  e instanceof Error && typeof (e as Partial<ServiceError>).code === 'number' && 'details' in e;

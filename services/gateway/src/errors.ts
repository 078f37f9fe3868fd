import type { Context, Next } from 'koa';
import { DomainError, type DomainErrorCode } from '@pushbase/domain';
import { redactCredentials } from '@pushbase/telemetry';

/** An error raised by the gateway itself (auth, limits, routing), already knowing its HTTP status. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
    readonly code: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

// The one place where a domain code becomes an HTTP status (docs/api.md → Errors).
const STATUS_OF: Record<DomainErrorCode, number> = {
  invalid: 400,
  not_found: 404,
  conflict: 409,
  dataset_limit: 400,
  unavailable: 503,
  // Not a 503: a 503 promises the write will never be applied (docs/api.md → Retrying safely),
  // and this one may have been. "Anything unexpected" is a 500 with the request id to quote.
  outcome_unknown: 500,
  idempotency_mismatch: 422,
  idempotency_in_flight: 409,
};

/** Headers a domain code's answer carries: the in-flight key's 409 says when to try again (docs/api.md). */
const HEADERS_OF: Partial<Record<DomainErrorCode, Readonly<Record<string, string>>>> = {
  idempotency_in_flight: { 'Retry-After': '1' },
};

/*
 * An outage's own words name internals (a host and port, a broker's error, a file path, and once a
 * connection URL's password): the client gets a fixed message per code and the request id, and the log
 * gets the detail under that id.
 */
const OUTAGE_MESSAGE_OF: Partial<Record<DomainErrorCode, (requestId: string) => string>> = {
  unavailable: (id) => `The service cannot take this request now; nothing was changed. Try again in a moment (request id ${id})`,
  outcome_unknown: (id) => `The write was received but could not be confirmed; it may or may not have been applied (request id ${id})`,
};

interface ErrorBody {
  error: { message: string; code: string; path?: string; request_id: string };
}

const MiB = 1024 * 1024;
/** A body limit as the client reads it: `4 MiB`, `64 KiB`. */
const sizeOf = (bytes: number): string => (bytes >= MiB ? `${bytes / MiB} MiB` : `${bytes / 1024} KiB`);

/** The request's path for a log line: a client chooses it, so only its start, whatever its length. */
const loggedPath = (ctx: Context): string => (ctx.path.length > 200 ? `${ctx.path.slice(0, 200)}…` : ctx.path);

const isBodyParserError = (e: unknown): e is { status: number; type: string; message: string; limit?: number } =>
  typeof e === 'object' && e !== null && 'status' in e && typeof e.status === 'number' && 'type' in e && typeof e.type === 'string';

/**
 * Runs first: turns every failure into `{"error": {"message"}}` JSON with the right status, and never
 * leaks a stack trace. Unexpected errors are logged with the request id that the client also sees.
 */
export function errorMiddleware(log: (line: string, requestId: string) => void) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } catch (err: unknown) {
      const requestId = String(ctx.state.requestId ?? '');
      let status: number;
      let body: ErrorBody;
      if (err instanceof DomainError) {
        status = STATUS_OF[err.code];
        const fixed = OUTAGE_MESSAGE_OF[err.code];
        body = { error: { message: fixed === undefined ? err.message : fixed(requestId), code: err.code, request_id: requestId } };
        if (err.path !== undefined) body.error.path = err.path;
        for (const [k, v] of Object.entries(HEADERS_OF[err.code] ?? {})) ctx.set(k, v);
        if (fixed !== undefined) log(`request ${requestId} ${ctx.method} ${loggedPath(ctx)} answered ${status} ${err.code}: ${redactCredentials(err.message)}`, requestId);
      } else if (err instanceof HttpError) {
        status = err.status;
        body = { error: { message: err.message, code: err.code, request_id: requestId } };
        for (const [k, v] of Object.entries(err.headers)) ctx.set(k, v);
      } else if (isBodyParserError(err) && err.type === 'entity.too.large') {
        status = 413;
        body = { error: { message: `The request body is larger than the limit of ${sizeOf(err.limit ?? 4 * MiB)}`, code: 'body_too_large', request_id: requestId } };
      } else if (isBodyParserError(err) && (err.type === 'request.aborted' || err.type === 'stream.not.readable')) {
        // The client went away (or a pipelined request's connection closed under it): nobody reads an
        // answer, and it is no failure of ours to log.
        status = 400;
        body = { error: { message: 'The request was aborted by the client', code: 'aborted', request_id: requestId } };
      } else if (isBodyParserError(err) && err.status >= 400 && err.status < 500) {
        status = err.status;
        body = { error: { message: `The request body could not be read: ${err.message}`, code: 'bad_body', request_id: requestId } };
      } else {
        status = 500;
        body = { error: { message: `Internal error; quote request id ${requestId} when reporting it`, code: 'internal', request_id: requestId } };
        log(`request ${requestId} ${ctx.method} ${loggedPath(ctx)} failed: ${redactCredentials(err instanceof Error ? (err.stack ?? err.message) : String(err))}`, requestId);
      }
      ctx.status = status;
      ctx.type = 'application/json';
      ctx.body = body;
    }
  };
}

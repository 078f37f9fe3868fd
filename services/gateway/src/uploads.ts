import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { HttpError } from './errors';

/*
 * How a write's body is read: whole, 4 MiB at most, within a deadline, and only while the bytes being
 * uploaded fit a budget per account and per process. Bodies are buffered whole (a record batch is validated
 * before anything is written), so without these a client trickling bodies could hold memory for as long
 * as Node's request timeout, and one tenant could fill the process for everyone.
 */

export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;
/**
 * A definition's body: a maximal definition (10 fields, 50-character keys, 250-character names) is about
 * 17 KB of JSON, with room for the members clients echo back. Its parsed form is sent on as JSON again
 * in the distributed mode, which may grow it: the bound keeps that far inside a gRPC message.
 */
export const DEFINITION_LIMIT_BYTES = 64 * 1024;

export interface UploadLimits {
  /** How long a body may take to arrive once its request was authenticated. */
  readonly bodyTimeoutMs: number;
  /**
   * Bytes of bodies one account may hold at once (being received, or received and not yet written);
   * beyond it, 429. Per account, not per key: a tenant with many keys still gets one share of the process.
   */
  readonly bytesPerAccount: number;
  /** Bytes of bodies the process may hold at once, every account together; beyond it, 503. */
  readonly bytesPerProcess: number;
}

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = Object.freeze({
  bodyTimeoutMs: 30_000,
  bytesPerAccount: 4 * BODY_LIMIT_BYTES,
  bytesPerProcess: 64 * BODY_LIMIT_BYTES,
});

// How much of an oversized body is still read (and dropped) so that its sender gets to see the 413.
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;
const DISCARD_TIMEOUT_MS = 10_000;

/**
 * Reads and drops the rest of a request body, within a byte and a time budget. Answering while the client
 * is still sending makes the server close a connection with unread data, which resets it: many clients
 * (Node's https.request among them) then report EPIPE/ECONNRESET instead of the 413.
 */
function discardRest(req: Context['req']): Promise<void> {
  const declared = Number(req.headers['content-length']);
  if (req.complete || declared > DISCARD_LIMIT_BYTES) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = (): void => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', done);
      req.off('close', done);
      req.off('error', done);
      resolve();
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > DISCARD_LIMIT_BYTES) done();
    };
    const timer = setTimeout(done, DISCARD_TIMEOUT_MS);
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    req.once('error', done);
    req.resume();
  });
}

/*
 * The media types an HTML form can send without a CORS preflight (the Fetch standard's "CORS-safelisted"
 * request content types). A browser holding a key (typed into a prompt once) would attach it to another
 * site's form post; refusing these makes such a post unable to write. A request with no Content-Type
 * stays accepted: official clients send none.
 */
const FORM_MEDIA_TYPES = new Set(['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain']);

const mediaType = (header: string): string => (header.split(';')[0] ?? '').trim().toLowerCase();

/** The bytes of bodies each account and the whole process hold now; a request reserves before it reads. */
export class UploadBudget {
  private total = 0;
  private readonly byAccount = new Map<string, number>();

  constructor(readonly limits: UploadLimits = DEFAULT_UPLOAD_LIMITS) {}

  /**
   * The reservation's release, or which budget refused it. An account's first body is never refused for
   * the process's sake: otherwise other tenants could fill the process's budget and lock it out.
   */
  reserve(account: string, bytes: number): (() => void) | 'account' | 'process' {
    const mine = this.byAccount.get(account) ?? 0;
    if (mine + bytes > this.limits.bytesPerAccount) return 'account';
    if (mine > 0 && this.total + bytes > this.limits.bytesPerProcess) return 'process';
    this.byAccount.set(account, mine + bytes);
    this.total += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total -= bytes;
      const left = (this.byAccount.get(account) ?? 0) - bytes;
      if (left > 0) this.byAccount.set(account, left);
      else this.byAccount.delete(account);
    };
  }

  /** Bytes in flight now (for tests and metrics). */
  get inFlight(): number {
    return this.total;
  }
}

/**
 * Reads a write's body and hands it to `use`: refused before a byte is read when its type is a form's or
 * the budget is full, abandoned (408, connection closed) when it does not arrive within the deadline. The
 * body's bytes stay reserved until `use` ends, so a body waiting for its account's turn still counts.
 */
export async function withWriteBody<T>(ctx: Context, budget: UploadBudget, account: string, limit: number, use: (body: Buffer) => Promise<T>): Promise<T> {
  const type = ctx.get('content-type');
  if (type !== '' && FORM_MEDIA_TYPES.has(mediaType(type))) {
    await discardRest(ctx.req);
    throw new HttpError(415, `A write's body must be JSON: send Content-Type: application/json (or none), not ${mediaType(type)}`, 'unsupported_media_type');
  }
  const declared = Number(ctx.get('content-length') || Number.NaN);
  // Unknown length (chunked): the most it may be. Over the limit: raw-body refuses it before reading.
  const bytes = Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
  const release = budget.reserve(account, bytes);
  // Refused bodies are read and dropped (never kept), so the sender sees the answer rather than a reset.
  if (release === 'account') {
    await discardRest(ctx.req);
    throw new HttpError(429, 'This account is already uploading as much as it may at once; wait for its other requests to finish', 'uploads_in_flight', { 'Retry-After': '1' });
  }
  if (release === 'process') {
    await discardRest(ctx.req);
    throw new HttpError(503, 'The server is receiving as much as it can take now; nothing was changed. Try again in a moment', 'server_busy', { 'Retry-After': '1' });
  }
  let timer: NodeJS.Timeout | undefined;
  const reading = getRawBody(ctx.req, { limit, length: ctx.get('content-length') || null });
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const seconds = budget.limits.bodyTimeoutMs / 1000;
      reject(new HttpError(408, `The request body did not arrive within ${seconds} s; nothing was written`, 'body_timeout', { Connection: 'close' }));
    }, budget.limits.bodyTimeoutMs);
  });
  try {
    let body: Buffer;
    try {
      body = await Promise.race([reading, deadline]);
    } catch (e: unknown) {
      if (typeof e === 'object' && e !== null && (e as { type?: unknown }).type === 'entity.too.large') await discardRest(ctx.req);
      // An abandoned read fails later, when the connection closes: nobody waits for it any more.
      reading.catch(() => undefined);
      throw e;
    } finally {
      clearTimeout(timer);
    }
    return await use(body);
  } finally {
    release();
  }
}

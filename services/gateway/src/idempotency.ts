import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { IdempotencyMark } from '@pushbase/domain';
import { HttpError } from './errors';

/*
 * The Idempotency-Key request header (IETF httpapi draft "The Idempotency-Key HTTP Header Field"), read
 * on every write (docs/api.md → Retrying a write). The draft makes the value a Structured Field String:
 * quoted, printable ASCII (0x20–0x7E) inside. Most clients send it bare, as Stripe's API taught them, so
 * both are read, as the same key: `"abc"` and `abc` are one key. The key itself is 1–255 of those
 * characters, so it can go into a log line, a message or a gRPC header as it is.
 */

export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

const PRINTABLE = /^[\x20-\x7e]*$/;
/** A bare key: printable ASCII not starting with a quote, 1–255 characters. */
const BARE = /^[\x20\x21\x23-\x7e][\x20-\x7e]{0,254}$/;
/** A quoted key (RFC 8941 §3.3.3 String): `\"` and `\\` are its only escapes; 1–255 characters inside. */
const QUOTED = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\]){1,255})"$/;

const badKey = (why: string): HttpError =>
  new HttpError(400, `The ${IDEMPOTENCY_KEY_HEADER} header must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, bare or as a quoted string; ${why}`, 'invalid_idempotency_key');

/**
 * The key of an Idempotency-Key field value, or why it is none. The same rule as docs/openapi.yaml's
 * pattern for the header (a test holds the two together).
 */
export function parseIdempotencyKey(value: string): string | { readonly invalid: string } {
  if (BARE.test(value)) return value;
  const quoted = QUOTED.exec(value);
  if (quoted !== null) return (quoted[1] as string).replace(/\\(["\\])/g, '$1');
  if (value === '' || value === '""') return { invalid: 'it is empty' };
  if (!PRINTABLE.test(value)) return { invalid: 'it holds other characters' };
  if (value.startsWith('"')) return { invalid: 'a quoted key must end with its quote, escape " and \\ inside as \\" and \\\\, and hold at most 255 characters' };
  return { invalid: `it is ${value.length} characters long` };
}

/** The request's key, undefined when it has none; a malformed or repeated header is a 400 naming it. */
export function idempotencyKeyOf(ctx: Context): string | undefined {
  const values = ctx.req.headersDistinct['idempotency-key'];
  if (values === undefined) return undefined;
  if (values.length !== 1) throw badKey('send the header once');
  const key = parseIdempotencyKey(values[0] as string);
  if (typeof key !== 'string') throw badKey(key.invalid);
  return key;
}

/**
 * What makes two requests "the same request" under one key: the method, the path as sent and the body's
 * bytes, hashed (SHA-256). Byte for byte, not by meaning: a retry resends the same bytes, and anything
 * cleverer would have to agree with every client's JSON encoder.
 */
export function requestFingerprint(method: string, path: string, body: Uint8Array | undefined): string {
  const hash = createHash('sha256');
  hash.update(`${method} ${path}\n`, 'utf8');
  if (body !== undefined) hash.update(body);
  return hash.digest('base64url');
}

/** The write's mark for the services: `{ idempotency }` when it has a key, else nothing. */
export function keyedMark(ctx: Context, key: string | undefined, body?: Uint8Array): { idempotency?: IdempotencyMark } {
  return key === undefined ? {} : { idempotency: { key, fingerprint: requestFingerprint(ctx.method, ctx.path, body) } };
}

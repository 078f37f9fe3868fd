import { z } from 'zod';
import { blankToUndefined, shutdownEnv } from '@pushbase/config';
import { BootstrapKeysError, parseBootstrapKeys } from './keys';
import { DEFAULT_TRUSTED_PROXIES, parseTrustedProxies, type TrustedProxies } from './trusted-proxies';
import { BODY_LIMIT_BYTES, DEFAULT_UPLOAD_LIMITS, type UploadLimits } from './uploads';
import { DEFAULT_ACCOUNT_SHARE, type AccountShare } from './account-gate';

/*
 * The variables of the public and admin listeners, the same for `pushbase serve` and `pushbase gateway`
 * (docs/configuration.md): each service's one config schema spreads `listenerEnv` into its own, refines it
 * with `tlsPairRefinement` and maps it with `listenerConfigOf`. Unset and empty variables both mean "use
 * the default".
 */
// The least write budget: a body at its limit (4 MiB) is then paid back within a minute.
const MIN_WRITE_BYTES_PER_SECOND = 64 * 1024;
const port = (def: number) => z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(65535).default(def));
const positive = (def: number) => z.preprocess(blankToUndefined, z.coerce.number().int().positive().default(def));
const optionalString = z.preprocess(blankToUndefined, z.string().optional());

/** Failed authentications per minute per client address, unless PUSHBASE_AUTH_FAILURES_PER_MINUTE says otherwise. */
export const DEFAULT_AUTH_FAILURES_PER_MINUTE = 100;

export const listenerEnv = {
  PUSHBASE_PORT: port(8443),
  PUSHBASE_HOST: z.preprocess(blankToUndefined, z.string().default('0.0.0.0')),
  PUSHBASE_ADMIN_PORT: port(8444),
  PUSHBASE_ADMIN_HOST: z.preprocess(blankToUndefined, z.string().default('127.0.0.1')),
  PUSHBASE_ADMIN_TOKEN: z.preprocess(blankToUndefined, z.string().min(16, 'PUSHBASE_ADMIN_TOKEN must be at least 16 characters').optional()),
  // Where the generated certificate and admin token live (and, embedded, the event log).
  PUSHBASE_DATA_DIR: z.preprocess(blankToUndefined, z.string().default('./.data')),
  // Checked here, so a malformed or short key stops the start as a configuration error (keys.ts).
  PUSHBASE_API_KEYS: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('')
      .superRefine((spec, ctx) => {
        try {
          parseBootstrapKeys(spec);
        } catch (e: unknown) {
          ctx.addIssue({ code: 'custom', message: e instanceof BootstrapKeysError ? e.problem : String(e) });
        }
      }),
  ),
  PUSHBASE_TLS_CERT: optionalString,
  PUSHBASE_TLS_KEY: optionalString,
  PUSHBASE_RATE_LIMIT_PER_MINUTE: positive(60),
  // The read API on the public listener: per key, counted apart from the pushes (read-side.ts).
  PUSHBASE_READ_RATE_LIMIT_PER_MINUTE: positive(600),
  PUSHBASE_AUTH_FAILURES_PER_MINUTE: positive(DEFAULT_AUTH_FAILURES_PER_MINUTE),
  ...shutdownEnv,
  // A write's body: its deadline, and the bytes being received at once per account and per process (uploads.ts).
  PUSHBASE_BODY_TIMEOUT_MS: positive(DEFAULT_UPLOAD_LIMITS.bodyTimeoutMs),
  PUSHBASE_UPLOAD_BYTES_PER_ACCOUNT: z.preprocess(blankToUndefined, z.coerce.number().int().min(BODY_LIMIT_BYTES, `must be at least one body's limit, ${BODY_LIMIT_BYTES}`).default(DEFAULT_UPLOAD_LIMITS.bytesPerAccount)),
  // One account's share of the process: requests worked on at once, and waiting (account-gate.ts).
  PUSHBASE_ACCOUNT_CONCURRENCY: positive(DEFAULT_ACCOUNT_SHARE.concurrency),
  PUSHBASE_ACCOUNT_QUEUE: positive(DEFAULT_ACCOUNT_SHARE.maxQueued),
  PUSHBASE_ACCOUNT_READ_MS_PER_SECOND: z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(60_000).default(DEFAULT_ACCOUNT_SHARE.readMsPerSecond)),
  // 0 (off) or at least 64 KiB: below it one body at its limit would hold its account's writes for over a minute.
  PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND: z.preprocess(
    blankToUndefined,
    z.coerce
      .number()
      .int()
      .max(2 ** 40)
      .refine((v) => v === 0 || v >= MIN_WRITE_BYTES_PER_SECOND, `must be 0 (no bound) or at least ${MIN_WRITE_BYTES_PER_SECOND}`)
      .default(DEFAULT_ACCOUNT_SHARE.writeBytesPerSecond),
  ),
  PUSHBASE_UPLOAD_BYTES_PER_PROCESS: z.preprocess(blankToUndefined, z.coerce.number().int().min(BODY_LIMIT_BYTES, `must be at least one body's limit, ${BODY_LIMIT_BYTES}`).default(DEFAULT_UPLOAD_LIMITS.bytesPerProcess)),
  // Only behind a TLS-terminating proxy: serve plain HTTP and refuse requests not forwarded as https.
  PUSHBASE_BEHIND_TLS_PROXY: z.preprocess(blankToUndefined, z.enum(['true', 'false']).default('false')),
  // Behind the proxy: the peers whose X-Forwarded-* headers count; any other peer is refused.
  PUSHBASE_TRUSTED_PROXIES: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default(DEFAULT_TRUSTED_PROXIES)
      .transform((spec, ctx) => {
        try {
          return parseTrustedProxies(spec);
        } catch (e: unknown) {
          ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : String(e) });
          return z.NEVER;
        }
      }),
  ),
};

type ListenerEnv = z.output<z.ZodObject<typeof listenerEnv>>;

export const tlsPairRefinement = [
  (c: Pick<ListenerEnv, 'PUSHBASE_TLS_CERT' | 'PUSHBASE_TLS_KEY'>): boolean => (c.PUSHBASE_TLS_CERT === undefined) === (c.PUSHBASE_TLS_KEY === undefined),
  { message: 'Set both PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY, or neither (then a self-signed certificate is generated)' },
] as const;

export interface ListenerConfig {
  readonly port: number;
  readonly host: string;
  readonly adminPort: number;
  readonly adminHost: string;
  readonly adminToken: string | undefined;
  readonly dataDir: string;
  readonly apiKeys: string;
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  readonly rateLimitPerMinute: number;
  readonly readRateLimitPerMinute: number;
  readonly authFailuresPerMinute: number;
  readonly shutdownTimeoutMs: number;
  readonly uploads: UploadLimits;
  readonly accountShare: AccountShare;
  readonly behindTlsProxy: boolean;
  readonly trustedProxies: TrustedProxies;
}

export const listenerConfigOf = (c: ListenerEnv): ListenerConfig => ({
  port: c.PUSHBASE_PORT,
  host: c.PUSHBASE_HOST,
  adminPort: c.PUSHBASE_ADMIN_PORT,
  adminHost: c.PUSHBASE_ADMIN_HOST,
  adminToken: c.PUSHBASE_ADMIN_TOKEN,
  dataDir: c.PUSHBASE_DATA_DIR,
  apiKeys: c.PUSHBASE_API_KEYS,
  tls: c.PUSHBASE_TLS_CERT !== undefined && c.PUSHBASE_TLS_KEY !== undefined ? { certFile: c.PUSHBASE_TLS_CERT, keyFile: c.PUSHBASE_TLS_KEY } : undefined,
  rateLimitPerMinute: c.PUSHBASE_RATE_LIMIT_PER_MINUTE,
  readRateLimitPerMinute: c.PUSHBASE_READ_RATE_LIMIT_PER_MINUTE,
  authFailuresPerMinute: c.PUSHBASE_AUTH_FAILURES_PER_MINUTE,
  shutdownTimeoutMs: c.PUSHBASE_SHUTDOWN_TIMEOUT_MS,
  uploads: Object.freeze({ bodyTimeoutMs: c.PUSHBASE_BODY_TIMEOUT_MS, bytesPerAccount: c.PUSHBASE_UPLOAD_BYTES_PER_ACCOUNT, bytesPerProcess: c.PUSHBASE_UPLOAD_BYTES_PER_PROCESS }),
  accountShare: Object.freeze({ concurrency: c.PUSHBASE_ACCOUNT_CONCURRENCY, maxQueued: c.PUSHBASE_ACCOUNT_QUEUE, readMsPerSecond: c.PUSHBASE_ACCOUNT_READ_MS_PER_SECOND, writeBytesPerSecond: c.PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND, writeBurstBytes: DEFAULT_ACCOUNT_SHARE.writeBurstBytes }),
  behindTlsProxy: c.PUSHBASE_BEHIND_TLS_PROXY === 'true',
  trustedProxies: c.PUSHBASE_TRUSTED_PROXIES,
});


import { availableParallelism } from 'node:os';
import { DEFAULT_TRUSTED_PROXIES, parseTrustedProxies, type TrustedProxies } from '@pushbase/gateway';
import { z } from 'zod';

// Unset and empty variables both mean "use the default".
const blankToUndefined = (v: unknown): unknown => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const port = (def: number) => z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(65535).default(def));
const positive = (def: number) => z.preprocess(blankToUndefined, z.coerce.number().int().positive().default(def));
const optionalString = z.preprocess(blankToUndefined, z.string().optional());

const schema = z
  .object({
    PUSHBASE_PORT: port(8443),
    PUSHBASE_HOST: z.preprocess(blankToUndefined, z.string().default('0.0.0.0')),
    PUSHBASE_ADMIN_PORT: port(8444),
    PUSHBASE_ADMIN_HOST: z.preprocess(blankToUndefined, z.string().default('127.0.0.1')),
    PUSHBASE_ADMIN_TOKEN: z.preprocess(blankToUndefined, z.string().min(16, 'PUSHBASE_ADMIN_TOKEN must be at least 16 characters').optional()),
    PUSHBASE_DATA_DIR: z.preprocess(blankToUndefined, z.string().default('./.data')),
    PUSHBASE_API_KEYS: z.preprocess(blankToUndefined, z.string().default('')),
    PUSHBASE_TLS_CERT: optionalString,
    PUSHBASE_TLS_KEY: optionalString,
    PUSHBASE_RATE_LIMIT_PER_MINUTE: positive(60),
    PUSHBASE_AUTH_FAILURES_PER_MINUTE: positive(100),
    PUSHBASE_SHUTDOWN_TIMEOUT_MS: positive(10_000),
    // Embedded event log: a segment holding at least this many bytes is sealed and a new one started.
    PUSHBASE_SEGMENT_BYTES: positive(64 * 1024 * 1024),
    // Embedded mode: a background compaction writes a snapshot once sealed, uncovered segments hold this much.
    PUSHBASE_COMPACT_AFTER_BYTES: positive(256 * 1024 * 1024),
    // Only behind a TLS-terminating proxy: serve plain HTTP and refuse requests not forwarded as https.
    // Threads that parse and validate writes beside the event loop; 0 keeps them on it.
    PUSHBASE_WRITE_WORKERS: z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(64).default(Math.max(0, Math.min(4, availableParallelism() - 1)))),
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
  })
  .refine((c) => (c.PUSHBASE_TLS_CERT === undefined) === (c.PUSHBASE_TLS_KEY === undefined), {
    message: 'Set both PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY, or neither (then a self-signed certificate is generated)',
  });

export interface EmbeddedConfig {
  readonly port: number;
  readonly host: string;
  readonly adminPort: number;
  readonly adminHost: string;
  readonly adminToken: string | undefined;
  readonly dataDir: string;
  readonly apiKeys: string;
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  readonly rateLimitPerMinute: number;
  readonly authFailuresPerMinute: number;
  readonly shutdownTimeoutMs: number;
  readonly segmentBytes: number;
  readonly compactAfterBytes: number;
  readonly behindTlsProxy: boolean;
  readonly trustedProxies: TrustedProxies;
  readonly writeWorkers: number;
}

/** Parses the environment once, at start; a bad value stops the process with every problem listed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): EmbeddedConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('\n  ');
    throw new Error(`Invalid configuration:\n  ${problems}`);
  }
  const c = parsed.data;
  return Object.freeze({
    port: c.PUSHBASE_PORT,
    host: c.PUSHBASE_HOST,
    adminPort: c.PUSHBASE_ADMIN_PORT,
    adminHost: c.PUSHBASE_ADMIN_HOST,
    adminToken: c.PUSHBASE_ADMIN_TOKEN,
    dataDir: c.PUSHBASE_DATA_DIR,
    apiKeys: c.PUSHBASE_API_KEYS,
    tls: c.PUSHBASE_TLS_CERT !== undefined && c.PUSHBASE_TLS_KEY !== undefined ? { certFile: c.PUSHBASE_TLS_CERT, keyFile: c.PUSHBASE_TLS_KEY } : undefined,
    rateLimitPerMinute: c.PUSHBASE_RATE_LIMIT_PER_MINUTE,
    authFailuresPerMinute: c.PUSHBASE_AUTH_FAILURES_PER_MINUTE,
    shutdownTimeoutMs: c.PUSHBASE_SHUTDOWN_TIMEOUT_MS,
    segmentBytes: c.PUSHBASE_SEGMENT_BYTES,
    compactAfterBytes: c.PUSHBASE_COMPACT_AFTER_BYTES,
    behindTlsProxy: c.PUSHBASE_BEHIND_TLS_PROXY === 'true',
    trustedProxies: c.PUSHBASE_TRUSTED_PROXIES,
    writeWorkers: c.PUSHBASE_WRITE_WORKERS,
  });
}

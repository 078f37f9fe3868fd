import type { IncomingMessage } from 'node:http';
import proxyAddr from 'proxy-addr';

/** Whether the peer at `address`, `hop` steps from this server (0: the socket's peer), is one of our proxies. */
export type ProxyTrust = (address: string, hop: number) => boolean;

/** Where a TLS-terminating proxy usually runs beside the server: the safe default of `PUSHBASE_TRUSTED_PROXIES`. */
export const DEFAULT_TRUSTED_PROXIES = 'loopback';

export interface TrustedProxies {
  /** The entries as configured, for the log. */
  readonly entries: readonly string[];
  readonly trust: ProxyTrust;
}

/**
 * Parses `PUSHBASE_TRUSTED_PROXIES`: comma-separated IP addresses, CIDR ranges (`10.0.0.0/8`, `fd00::/8`)
 * and proxy-addr's names `loopback`, `linklocal`, `uniquelocal`. Throws naming the entry it cannot read.
 */
export function parseTrustedProxies(spec: string): TrustedProxies {
  const entries = spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (entries.length === 0) throw new Error('name at least one proxy address or range');
  for (const entry of entries) {
    try {
      proxyAddr.compile(entry);
    } catch {
      throw new Error(`"${entry}" is not an IP address, a CIDR range, or one of loopback, linklocal, uniquelocal`);
    }
  }
  return { entries, trust: proxyAddr.compile(entries) };
}

/** The socket's peer is one of our proxies: only then do its X-Forwarded-* headers mean anything. */
export const fromTrustedProxy = (req: IncomingMessage, trust: ProxyTrust): boolean => trust(req.socket.remoteAddress ?? '', 0);

/**
 * The client's address: X-Forwarded-For read from the right, through trusted hops only, stopping at the
 * first address that is not one of our proxies — entries further left are whatever the client wrote.
 */
export const forwardedClientAddress = (req: IncomingMessage, trust: ProxyTrust): string => proxyAddr(req, trust);

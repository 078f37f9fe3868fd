import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type Koa from 'koa';

/*
 * The two listeners of a gateway, the same in every mode (`pushbase serve` and `pushbase gateway`): the
 * public API over HTTPS (or plain HTTP behind a TLS-terminating proxy) and the admin read side over plain
 * HTTP on its own address. Shutdown stops accepting, lets in-flight requests finish within a bound, then
 * cuts what is left.
 */

export interface ListenerOptions {
  readonly port: number;
  readonly host: string;
  readonly adminPort: number;
  readonly adminHost: string;
  /** The certificate and key to serve; undefined only behind a TLS-terminating proxy. */
  readonly tls: { readonly cert: string; readonly key: string } | undefined;
  /** How long shutdown waits for in-flight public requests. */
  readonly shutdownTimeoutMs: number;
}

export interface RunningListeners {
  readonly port: number;
  readonly adminPort: number;
  /** Stops accepting on both listeners and drains them; resolves once both are closed. */
  close(): Promise<void>;
}

/** Tracks open sockets and in-flight requests so shutdown can drain instead of cutting requests off. */
function drainable(server: HttpServer | HttpsServer): { close(timeoutMs: number): Promise<void> } {
  const sockets = new Set<Socket>();
  let inFlight = 0;
  let idle: (() => void) | undefined;
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('request', (_req, res: import('node:http').ServerResponse) => {
    inFlight++;
    res.on('close', () => {
      if (--inFlight === 0) idle?.();
    });
  });
  return {
    async close(timeoutMs: number): Promise<void> {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([new Promise<void>((r) => (idle = r)), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
      }
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

async function listen(server: HttpServer | HttpsServer, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** Serves the public gateway app and the admin app; resolves once both listen, with their actual ports. */
export async function startListeners(gateway: Koa, admin: Koa, options: ListenerOptions): Promise<RunningListeners> {
  const handleGateway = gateway.callback();
  // HTTPS only, unless told that a TLS-terminating proxy is in front (then the gateway serves only requests
  // from the trusted proxies that they forwarded as https). A plain-HTTP request to the HTTPS port is never served.
  const publicServer =
    options.tls === undefined
      ? createHttpServer((req, res) => void handleGateway(req, res))
      : createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => void handleGateway(req, res));
  publicServer.keepAliveTimeout = 65_000;
  const handleAdmin = admin.callback();
  const adminServer = createHttpServer((req, res) => void handleAdmin(req, res));
  const publicDrain = drainable(publicServer);
  const adminDrain = drainable(adminServer);
  const port = await listen(publicServer, options.port, options.host);
  let adminPort: number;
  try {
    adminPort = await listen(adminServer, options.adminPort, options.adminHost);
  } catch (e) {
    await publicDrain.close(0);
    throw e;
  }
  let closing: Promise<void> | undefined;
  return {
    port,
    adminPort,
    close: () => (closing ??= Promise.all([publicDrain.close(options.shutdownTimeoutMs), adminDrain.close(1000)]).then(() => undefined)),
  };
}

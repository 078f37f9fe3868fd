import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** The path Prometheus scrapes, on the gateway's admin listener and on every metrics listener. */
export const METRICS_PATH = '/metrics';

/** The registry in Prometheus's text format, with the content type to send it under. */
export async function renderMetrics(registry: Registry): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

export interface MetricsListenerOptions {
  readonly host: string;
  /** 0: the system picks a free port (the returned `port` says which). */
  readonly port: number;
  /**
   * Probe routes served beside /metrics (the projector's /healthz and /readyz): each answers 200 or 503
   * with a small JSON body. A probe must say nothing a scraper may not see: no account, no dataset.
   */
  readonly probes?: Readonly<Record<string, () => ProbeAnswer>>;
}

export interface ProbeAnswer {
  readonly ok: boolean;
  readonly body: Readonly<Record<string, unknown>>;
}

export interface RunningMetricsListener {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * A listener serving GET /metrics (and the probes it is given), for the services that have no HTTP listener of their own (the gRPC
 * schema and records services, the projector). node:http and nothing more: one route, no auth (see
 * docs/metrics.md for why), and a scrape is short, so closing cuts whatever is still open.
 */
export async function startMetricsListener(registry: Registry, options: MetricsListenerOptions): Promise<RunningMetricsListener> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    const probe = Object.hasOwn(options.probes ?? {}, path) ? options.probes?.[path] : undefined;
    if (probe === undefined && path !== METRICS_PATH) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`Not found; metrics are at ${METRICS_PATH}\n`);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }).end('Method not allowed\n');
      return;
    }
    if (probe !== undefined) {
      const answer = probe();
      res.writeHead(answer.ok ? 200 : 503, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : `${JSON.stringify(answer.body)}\n`);
      return;
    }
    renderMetrics(registry).then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (e: unknown) => {
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`Collecting metrics failed: ${e instanceof Error ? e.message : String(e)}\n`);
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

import { createServer } from 'node:net';

/** Whether nothing listens on `port` of 127.0.0.1 right now. */
function portFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A loopback port nothing listens on right now, with the `span - 1` ports right above it free too (Kafka's
 * controller sits on the broker port + 1; ClickHouse's native and interserver ports on HTTP + 1 and + 2).
 * Another process may take it before the server binds it; the server's start then fails and says so.
 */
export async function freePort(span = 1): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    if (port + span > 65535) continue;
    const others = await Promise.all(Array.from({ length: span - 1 }, (_, i) => portFree(port + i + 1)));
    if (others.every(Boolean)) return port;
  }
}

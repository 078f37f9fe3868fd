import { request } from 'node:http';

/*
 * Reading a Prometheus scrape in tests: the value of one sample, matched by its name and its exact label
 * set. Enough of the text format for what pushbase exposes (no escaped quotes in its label values).
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.keys(have).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** Every label set of `name` in a scrape, with its value. */
export function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    out.push({ labels: Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1] as string, l[2] as string])), value: Number(m[3]) });
  }
  return out;
}

/** A plain-HTTP GET on loopback (the admin and metrics listeners), body as text. */
export function httpGet(port: number, path: string, options: { method?: string; host?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: options.host ?? '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Scrapes GET /metrics; a non-200 answer throws. */
export async function scrape(port: number): Promise<string> {
  const res = await httpGet(port, '/metrics');
  if (res.status !== 200) throw new Error(`GET /metrics on port ${port} answered ${res.status}: ${res.body.slice(0, 200)}`);
  return res.body;
}

import { connect as tlsConnect } from 'node:tls';
import { connect as netConnect, type Socket } from 'node:net';

/** Where to connect: a TestServer, or any listener on loopback (plain HTTP when `plainHttp`). */
export interface PipelineTarget {
  readonly port: number;
  readonly plainHttp: boolean;
  /** The certificate to trust over TLS. */
  readonly ca: string;
}

/** One request of a pipeline: the body is sent as given (a string is UTF-8), or as JSON when an object. */
export interface PipelinedRequest {
  readonly method: string;
  readonly path: string;
  readonly key?: string;
  readonly body?: unknown;
  readonly raw?: Buffer;
  readonly headers?: Record<string, string>;
}

export interface PipelinedResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: any;
}

function encode(r: PipelinedRequest): Buffer {
  const payload = r.raw ?? (r.body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(r.body)));
  const headers: Record<string, string> = { host: 'localhost', 'content-length': String(payload.length), ...(r.headers ?? {}) };
  if (r.key !== undefined) headers.authorization = `Basic ${Buffer.from(`${r.key}:`).toString('base64')}`;
  if (r.body !== undefined && r.raw === undefined) headers['content-type'] = 'application/json';
  const head = `${r.method} ${r.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), payload]);
}

/**
 * Parses as many complete responses as `buf` holds (each must carry Content-Length, as every pushbase
 * response does); returns them and the unparsed rest.
 */
function parseResponses(buf: Buffer): { responses: PipelinedResponse[]; rest: Buffer } {
  const responses: PipelinedResponse[] = [];
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end === -1) return { responses, rest: buf };
    const [statusLine, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    if (headers['content-length'] === undefined) throw new Error(`response without Content-Length: ${statusLine}`);
    const length = Number(headers['content-length']);
    if (buf.length < end + 4 + length) return { responses, rest: buf };
    const text = buf.subarray(end + 4, end + 4 + length).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    responses.push({ status, headers, body });
    buf = buf.subarray(end + 4 + length);
  }
}

/**
 * Writes every request on one connection in a single write — HTTP/1.1 pipelining, as a client or a proxy
 * that reuses connections may do — and resolves with the responses in the order the server sent them.
 * Over TLS to the server's port unless it runs as plain HTTP behind a proxy.
 */
export function pipeline(server: PipelineTarget, requests: readonly PipelinedRequest[], timeoutMs = 30_000): Promise<PipelinedResponse[]> {
  return new Promise((resolve, reject) => {
    const bytes = Buffer.concat(requests.map(encode));
    const socket: Socket = server.plainHttp
      ? netConnect({ host: '127.0.0.1', port: server.port }, () => socket.write(bytes))
      : tlsConnect({ host: '127.0.0.1', port: server.port, ca: server.ca, servername: 'localhost' }, () => socket.write(bytes));
    let received: Buffer = Buffer.alloc(0);
    const got: PipelinedResponse[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`only ${got.length} of ${requests.length} pipelined responses within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      try {
        const { responses, rest } = parseResponses(Buffer.concat([received, chunk]));
        received = rest;
        got.push(...responses);
      } catch (e: unknown) {
        clearTimeout(timer);
        socket.destroy();
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      if (got.length >= requests.length) {
        clearTimeout(timer);
        socket.end();
        resolve(got);
      }
    });
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      if (got.length < requests.length) reject(new Error(`connection closed after ${got.length} of ${requests.length} pipelined responses`));
    });
  });
}

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A small OTLP/HTTP receiver on loopback for the trace tests: takes what the services' exporters POST to
 * /v1/traces in the OTLP JSON encoding (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json) and keeps every span
 * with the service.name of the resource it came with. Only what the tests read is kept.
 */

export interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  readonly attributes: Readonly<Record<string, unknown>>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        links?: { traceId: string; spanId: string }[];
        attributes?: OtlpAttribute[];
      }[];
    }[];
  }[];
}

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? (v.intValue === undefined ? undefined : Number(v.intValue)) ?? v.boolValue ?? v.doubleValue;
const attributesOf = (list: OtlpAttribute[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Requests that were not OTLP JSON trace exports. */
  readonly rejected: string[] = [];
  private server: Server | undefined;
  port = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const type = req.headers['content-type'] ?? '';
        if (req.method !== 'POST' || req.url !== '/v1/traces' || !type.startsWith('application/json')) {
          this.rejected.push(`${req.method} ${req.url} ${type}`);
          res.writeHead(415).end();
          return;
        }
        this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpRequest);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server === undefined ? resolve() : this.server.close(() => resolve())));
  }

  private take(body: OtlpRequest): void {
    for (const rs of body.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource?.attributes)['service.name']);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId === undefined || s.parentSpanId === '' ? undefined : s.parentSpanId,
            name: s.name,
            kind: s.kind,
            links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
            attributes: attributesOf(s.attributes),
          });
        }
      }
    }
  }
}

import { pushbaseServices, RequestScope, type RecordService } from '@pushbase/contracts';
import { context, InMemorySpanExporter, pushbaseTracer, SpanKind, startTracing, trace, TELEMETRY_OFF, type Tracing } from '@pushbase/telemetry';
import { connectRecordService, createGrpcServer, jsonLogger, type GrpcServer } from '../src';

/*
 * The gRPC hop of a trace: the client's span travels in the call's metadata (`traceparent`), the service's
 * server span is its child, and what the service does runs inside that span (its log lines carry the trace
 * id). Client and server share this process, so one in-memory exporter sees both sides.
 */

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let server: GrpcServer;
let client: RecordService & { close(): void };
const lines: Record<string, unknown>[] = [];
const seen: { traceId: string | undefined; spanId: string | undefined }[] = [];

beforeAll(async () => {
  tracing = startTracing(TELEMETRY_OFF.traces, 'test', exporter);
  const protos = pushbaseServices();
  const records: RecordService = {
    append: () => {
      const sc = trace.getActiveSpan()?.spanContext();
      seen.push({ traceId: sc?.traceId, spanId: sc?.spanId });
      return Promise.resolve({ replayed: false });
    },
    replace: () => Promise.resolve({ replayed: false }),
  };
  server = createGrpcServer({ records, protos, log: jsonLogger('records', (line) => lines.push(JSON.parse(line) as Record<string, unknown>), 'debug') });
  const port = await server.listen('127.0.0.1', 0);
  client = connectRecordService(`127.0.0.1:${port}`, { protos, requestScope: new RequestScope() });
});

afterAll(async () => {
  client.close();
  await server.shutdown(0);
  await tracing.shutdown();
});

it("makes the service's server span the child of the caller's client span", async () => {
  const request = pushbaseTracer().startSpan('POST /datasets/:id/data', { kind: SpanKind.SERVER });
  await context.with(trace.setSpan(context.active(), request), () => client.append({ account: 'acme', id: 'x', json: Buffer.from('{"data":[]}') }));
  request.end();
  const { traceId } = request.spanContext();
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  const clientSpan = spans.find((s) => s.kind === SpanKind.CLIENT);
  const serverSpan = spans.find((s) => s.kind === SpanKind.SERVER && s.name === 'pushbase.v1.RecordService/Append');
  expect(clientSpan).toMatchObject({ name: 'pushbase.v1.RecordService/Append', parentSpanContext: expect.objectContaining({ spanId: request.spanContext().spanId }) });
  expect(serverSpan?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
  expect(seen).toEqual([{ traceId, spanId: serverSpan?.spanContext().spanId }]);
  expect(lines).toContainEqual(expect.objectContaining({ msg: 'call', method: 'Append', trace_id: traceId, span_id: serverSpan?.spanContext().spanId }));
});

import { randomBytes } from 'node:crypto';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';
import { TestServer } from '../helpers/server';
import { createDataset, expectOk, field, uid } from '../e2e/support';
import { eventually } from '../helpers/eventually';

/*
 * One request followed from the gateway to the projector by its trace id (docs/operations.md → Traces): the four
 * services as processes, each exporting spans over OTLP/HTTP (JSON) to a receiver this test runs on
 * loopback. The push carries a W3C traceparent the test chose, so the trace id is known before anything
 * is exported; the spans of that trace must come from the gateway, the records service and the projector,
 * each the child of the one before across the process (and Kafka) boundaries, and the log lines of the
 * request must carry the same request id and trace id.
 */

const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;

const receiver = new OtlpReceiver();
let s: TestServer;

beforeAll(async () => {
  await receiver.start();
  s = await new TestServer({
    mode: 'distributed',
    env: {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      // The batch processor's delay: spans out within a fraction of a second instead of five.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      PUSHBASE_LOG_LEVEL: 'debug',
    },
  }).start();
}, 240_000);

afterAll(async () => {
  await s?.stop();
  await receiver.close();
}, 120_000);

const lines = (): Record<string, unknown>[] =>
  [...s.output.map((l) => `gateway | ${l}`), ...s.servicesOutput].flatMap((l) => {
    const json = l.slice(l.indexOf('|') + 1).trim();
    try {
      return [JSON.parse(json) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

it('follows a push from the gateway through gRPC and Kafka into the projector by its trace id', async () => {
  const key = s.keys.acme!;
  const id = uid('traced');
  await createDataset(s, key, id, { label: field('string', 'Label') });

  const traceId = randomBytes(16).toString('hex');
  const callerSpanId = randomBytes(8).toString('hex');
  const requestId = `traced-${randomBytes(6).toString('hex')}`;
  const res = await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ label: 'a' }] }, headers: { traceparent: `00-${traceId}-${callerSpanId}-01`, 'x-request-id': requestId } });
  expectOk(res);

  const spanNamed = (spans: ReceivedSpan[], service: string, name: string): ReceivedSpan | undefined => spans.find((x) => x.service === service && x.name === name);
  // Spans leave each process in batches; the projector's come once it has read the event.
  const expected = [
    ['pushbase-gateway', 'POST /datasets/:id/data'],
    ['pushbase-gateway', 'pushbase.v1.RecordService/Append'],
    ['pushbase-records', 'pushbase.v1.RecordService/Append'],
    ['pushbase-records', 'event log append'],
    ['pushbase-projector', 'project event'],
  ] as const;
  const spans = await eventually(() => {
    const found = receiver.trace(traceId);
    return Promise.resolve(expected.every(([service, name]) => spanNamed(found, service, name) !== undefined) ? found : undefined);
  }, { timeoutMs: 60_000 }).catch((e: unknown) => {
    throw new Error(`${String(e)}; spans of the trace: ${JSON.stringify(receiver.trace(traceId).map((x) => `${x.service} ${x.name}`))}; rejected: ${receiver.rejected.join(', ')}`);
  });

  const http = spanNamed(spans, 'pushbase-gateway', 'POST /datasets/:id/data');
  const client = spanNamed(spans, 'pushbase-gateway', 'pushbase.v1.RecordService/Append');
  const server = spanNamed(spans, 'pushbase-records', 'pushbase.v1.RecordService/Append');
  const append = spanNamed(spans, 'pushbase-records', 'event log append');
  const projected = spanNamed(spans, 'pushbase-projector', 'project event');
  expect({ http, client, server, append, projected }).toEqual({
    http: expect.objectContaining({ kind: SERVER, parentSpanId: callerSpanId }),
    client: expect.objectContaining({ kind: CLIENT, parentSpanId: http?.spanId }),
    server: expect.objectContaining({ kind: SERVER, parentSpanId: client?.spanId }),
    append: expect.objectContaining({ kind: PRODUCER, parentSpanId: server?.spanId }),
    projected: expect.objectContaining({ kind: CONSUMER, parentSpanId: append?.spanId }),
  });
  expect(http?.attributes).toMatchObject({ 'http.route': '/datasets/:id/data', 'http.response.status_code': 200, 'pushbase.request_id': requestId });
  expect(server?.attributes).toMatchObject({ 'pushbase.request_id': requestId });
  expect(projected?.attributes).toMatchObject({ 'pushbase.applied': true, 'pushbase.rows': 1 });

  // The work shared by many requests is a trace of its own, linked to this request's spans.
  const linksTo = (span: ReceivedSpan | undefined) => (x: ReceivedSpan) => x.links.some((l) => l.traceId === traceId && l.spanId === span?.spanId);
  await eventually(() => receiver.spans.some(linksTo(append)) && receiver.spans.some(linksTo(projected)), { timeoutMs: 30_000 }).catch((e: unknown) => {
    const shared = receiver.spans.filter((x) => x.name === 'event log transaction' || x.name === 'clickhouse write');
    throw new Error(`${String(e)}; no span links to this request's append (${append?.spanId}) and event (${projected?.spanId}) spans in trace ${traceId}: ${JSON.stringify(shared.map((x) => ({ service: x.service, name: x.name, links: x.links })))}`);
  });
  expect(receiver.spans.find(linksTo(append))).toMatchObject({ service: 'pushbase-records', name: 'event log transaction' });
  expect(receiver.spans.find(linksTo(projected))).toMatchObject({ service: 'pushbase-projector', name: 'clickhouse write' });

  // The request's log lines, by request id and trace id, in every service that handled it.
  const logged = lines();
  expect(logged).toContainEqual(expect.objectContaining({ service: 'gateway', msg: 'request', request_id: requestId, trace_id: traceId, status: 200, route: '/datasets/:id/data' }));
  expect(logged).toContainEqual(expect.objectContaining({ service: 'records', msg: 'call', method: 'Append', request_id: requestId, trace_id: traceId, span_id: server?.spanId }));
  expect(logged).toContainEqual(expect.objectContaining({ service: 'projector', msg: 'event projected', trace_id: traceId, span_id: projected?.spanId }));
  // The "listening" lines the launcher reads still carry their ports at the top level.
  expect(logged).toContainEqual(expect.objectContaining({ service: 'gateway', msg: 'listening', level: 'info', port: s.port, admin_port: s.adminPort }));
}, 120_000);

import { randomBytes } from 'node:crypto';
import { OtlpReceiver } from '../helpers/otlp-receiver';
import { TestServer } from '../helpers/server';
import { createDataset, expectOk, field, uid } from '../e2e/support';
import { eventually } from '../helpers/eventually';

/*
 * `pushbase serve` with tracing on (docs/operations.md → Traces): a push's HTTP server span, child of the caller's
 * traceparent, and the event log append as its child, exported over OTLP/HTTP to a receiver on loopback;
 * the request's log line carries its request id and trace id.
 */

const receiver = new OtlpReceiver();
let s: TestServer;

beforeAll(async () => {
  await receiver.start();
  s = await new TestServer({
    mode: 'embedded',
    env: {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.endpoint}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      PUSHBASE_LOG_LEVEL: 'debug',
    },
  }).start();
}, 120_000);

afterAll(async () => {
  await s?.stop();
  await receiver.close();
});

it('traces a push from the HTTP request to the event log append', async () => {
  const key = s.keys.acme!;
  const id = uid('traced');
  await createDataset(s, key, id, { label: field('string', 'Label') });
  const traceId = randomBytes(16).toString('hex');
  const callerSpanId = randomBytes(8).toString('hex');
  const requestId = `traced-${randomBytes(6).toString('hex')}`;
  expectOk(await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ label: 'a' }] }, headers: { traceparent: `00-${traceId}-${callerSpanId}-01`, 'x-request-id': requestId } }));

  const [http, append] = await eventually(() => {
    const spans = receiver.trace(traceId);
    const h = spans.find((x) => x.name === 'POST /datasets/:id/data');
    const a = spans.find((x) => x.name === 'event log append');
    return Promise.resolve(h === undefined || a === undefined ? undefined : ([h, a] as const));
  }, { timeoutMs: 30_000 });
  expect(http).toMatchObject({ service: 'pushbase', kind: 2, parentSpanId: callerSpanId, attributes: expect.objectContaining({ 'http.response.status_code': 200, 'pushbase.request_id': requestId }) });
  expect(append).toMatchObject({ service: 'pushbase', parentSpanId: http.spanId, attributes: expect.objectContaining({ 'pushbase.events': 1 }) });

  const logged = s.output.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
  expect(logged).toContainEqual(expect.objectContaining({ service: 'pushbase', level: 'debug', msg: 'request', request_id: requestId, trace_id: traceId, status: 200 }));
});

import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { context, InMemorySpanExporter, pushbaseTracer, SpanKind, startTracing, trace, TELEMETRY_OFF, type Tracing } from '@pushbase/telemetry';
import { KafkaEventAppender } from '../src';
import { readEvents, testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * The Kafka hop of a trace: one transaction carries the appends of many requests (group commit), so each
 * message carries the trace context of ITS append — the append's producer span, a child of the request's
 * span — in `traceparent`, and the consumer hands it over with the event. Without tracing no header is added.
 */

const kafka = useTestTopics();

async function newTopic(): Promise<string> {
  return kafka.create('pushbase-trace', 2);
}

const event = (dataset: string, seq: number): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acme',
  dataset,
  incarnation: 'inc-1',
  at: seq,
  records: [{ seq }],
  delete_by: null,
});

describe('trace context in Kafka message headers', () => {
  let tracing: Tracing | undefined;
  afterEach(async () => {
    await tracing?.shutdown();
    tracing = undefined;
  });

  it('gives every event of a group-committed transaction the traceparent of its own request', async () => {
    const exporter = new InMemorySpanExporter();
    tracing = startTracing(TELEMETRY_OFF.traces, 'test', exporter);
    const topic = await newTopic();
    // A long linger: the five appends of five "requests" go out in one transaction.
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 200 });
    const tracer = pushbaseTracer();
    const requests = Array.from({ length: 5 }, (_, i) => tracer.startSpan(`request ${i}`, { kind: SpanKind.SERVER }));
    try {
      await Promise.all(requests.map((span, i) => context.with(trace.setSpan(context.active(), span), () => appender.append([event(`ds-${i}`, i)]))));
      expect(appender.stats().requests).toBe(1);
    } finally {
      for (const span of requests) span.end();
      await appender.close();
    }

    const spans = exporter.getFinishedSpans();
    const consumed = await readEvents(topic, 5);
    expect(consumed).toHaveLength(5);
    for (const [i, request] of requests.entries()) {
      const { traceId, spanId } = request.spanContext();
      const append = spans.find((s) => s.name === 'event log append' && s.spanContext().traceId === traceId);
      expect(append?.parentSpanContext?.spanId).toBe(spanId);
      expect(append?.kind).toBe(SpanKind.PRODUCER);
      const message = consumed.find((c) => c.event.dataset === `ds-${i}`);
      expect(message?.trace).toEqual({ traceparent: `00-${traceId}-${append?.spanContext().spanId}-01` });
    }
    // The transaction, shared by the five, is a trace of its own linked to each append.
    const transaction = spans.find((s) => s.name === 'event log transaction');
    expect(transaction?.parentSpanContext).toBeUndefined();
    expect(new Set(transaction?.links.map((l) => l.context.traceId))).toEqual(new Set(requests.map((r) => r.spanContext().traceId)));
  });

  it('adds no header while tracing is off', async () => {
    const topic = await newTopic();
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 5 });
    try {
      await appender.append([event('ds', 1)]);
    } finally {
      await appender.close();
    }
    const [consumed] = await readEvents(topic, 1);
    expect(consumed?.trace).toBeUndefined();
  });
});

import { context, INVALID_SPAN_CONTEXT, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Link, type Span, type SpanOptions, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracesConfig } from './config';

/*
 * Traces: one request's path from the gateway's HTTP span through the gRPC call and the event log append to
 * the projector's span for that event. Made by hand at those few places, not by instrumentation libraries:
 * the bundle loads its libraries before configuration is read, and the Kafka hop must follow each event of
 * a group-committed transaction. Off (the default), only the API's no-ops run. Why: docs/architecture.md →
 * Traces by hand.
 */

export interface Tracing {
  readonly enabled: boolean;
  /** Sends the spans still buffered and unregisters the provider. */
  shutdown(): Promise<void>;
}

/** The name the services' spans are made under. */
export const TRACER_NAME = 'pushbase';

/** The tracer of pushbase's spans (a proxy: made before tracing starts, it still records once it has). */
export const pushbaseTracer = (): Tracer => trace.getTracer(TRACER_NAME);

/**
 * Registers the process's tracer provider when the config asks for an exporter; `service` is the
 * resource's service.name unless OTEL_SERVICE_NAME overrides it. Called once by a composition root (the
 * OpenTelemetry API's registration is per process by design).
 */
export function startTracing(config: TracesConfig, service: string, testExporter?: SpanExporter): Tracing {
  if (config.exporter === 'none' && testExporter === undefined) return { enabled: false, shutdown: () => Promise.resolve() };
  // Endpoint, headers and timeout come from the standard OTEL_EXPORTER_OTLP_* variables, read by the exporter.
  const exporter = testExporter ?? (config.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtoExporter());
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName ?? service, 'service.namespace': 'pushbase' }),
    // A test's exporter gets each span as it ends.
    spanProcessors: [testExporter === undefined ? new BatchSpanProcessor(exporter) : new SimpleSpanProcessor(exporter)],
  });
  // Trace context only: baggage would carry whatever a client sent on to every service.
  provider.register({ propagator: new W3CTraceContextPropagator() });
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown: () =>
      (stopped ??= provider.shutdown().finally(() => {
        trace.disable();
        propagation.disable();
        context.disable();
      })),
  };
}

/** A span that records nothing: for work no traced request asked for. */
export const NOT_TRACED: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** A W3C trace context as carried in Kafka message headers (and any other string map). */
export type TraceCarrier = Record<string, string>;

/** The active context's trace headers (`traceparent`, `tracestate`); empty when tracing is off. */
export function traceHeaders(ctx: Context = context.active()): TraceCarrier {
  const carrier: TraceCarrier = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The context a carrier's trace headers describe (the root context when it carries none). */
export const contextFrom = (carrier: TraceCarrier | undefined): Context => (carrier === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, carrier));

/** Ends a span with an error status and the error recorded. */
export function failSpan(span: Span, err: unknown): void {
  if (span.isRecording()) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  span.end();
}

/** Runs `fn` in a new span (child of the active one); ends it when fn's promise settles. */
export async function inSpan<T>(tracer: Tracer, name: string, options: SpanOptions, fn: (span: Span) => Promise<T>, parent: Context = context.active()): Promise<T> {
  const span = tracer.startSpan(name, options, parent);
  try {
    const result = await context.with(trace.setSpan(parent, span), () => fn(span));
    span.end();
    return result;
  } catch (err) {
    failSpan(span, err);
    throw err;
  }
}

/** For tests: an exporter that keeps the spans in memory (pass it to startTracing). */
export { InMemorySpanExporter, type ReadableSpan };

export { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Link, type Span, type Tracer };

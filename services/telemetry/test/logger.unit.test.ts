import { context, createLogger, InMemorySpanExporter, levelledLog, messageLog, pushbaseTracer, startTracing, TELEMETRY_OFF, trace } from '../src';

/*
 * The one log format every service writes: the fields launchers and tests read (msg, the ports, service,
 * a level label, an ISO time), the trace ids inside a span, and no credentials.
 */

const capture = (level?: 'info' | 'debug') => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ service: 'records', ...(level === undefined ? {} : { level }), destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) } });
  return { logger, lines };
};

it('writes one JSON object per line with the fields at the top level', () => {
  const { logger, lines } = capture();
  levelledLog(logger)('info', 'listening', { grpc_port: 50051, metrics_port: 9464 });
  expect(lines).toEqual([{ level: 'info', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), service: 'records', msg: 'listening', grpc_port: 50051, metrics_port: 9464 }]);
});

it('logs below the level not at all, and messages starting with "warning" at warn', () => {
  const { logger, lines } = capture();
  levelledLog(logger)('debug', 'call', { method: 'Append' });
  messageLog(logger)('warning: a PUSHBASE_API_KEYS key is short', { account: 'acme' });
  expect(lines).toEqual([expect.objectContaining({ level: 'warn', msg: 'warning: a PUSHBASE_API_KEYS key is short', account: 'acme' })]);
  const verbose = capture('debug');
  levelledLog(verbose.logger)('debug', 'call', { method: 'Append' });
  expect(verbose.lines).toEqual([expect.objectContaining({ level: 'debug', msg: 'call' })]);
});

it('never writes an authorization header or a password', () => {
  const { logger, lines } = capture();
  logger.info({ headers: { authorization: 'Basic a2V5Og==', host: 'x' }, authorization: 'Bearer t', db: { password: 'p' } }, 'request');
  expect(JSON.stringify(lines)).not.toMatch(/a2V5Og|Bearer t|"p"/);
  expect(lines[0]).toMatchObject({ headers: { authorization: '[redacted]', host: 'x' }, authorization: '[redacted]', db: { password: '[redacted]' } });
});

it('never writes the password of a connection URL, wherever in the line it is', () => {
  const { logger, lines } = capture();
  logger.info({ clickhouse: 'http://pb:s3cret@ch:8123/', error: 'Redis at redis://:hunter2@redis:6379 cannot be reached' }, 'ClickHouse at https://u:p4ss@ch/ refused');
  expect(JSON.stringify(lines)).not.toMatch(/s3cret|hunter2|p4ss/);
  expect(lines[0]).toMatchObject({ clickhouse: 'http://***@ch:8123/', error: 'Redis at redis://***@redis:6379 cannot be reached', msg: 'ClickHouse at https://***@ch/ refused' });
});

it('carries the trace and span id of the active span while tracing is on, none outside a span', async () => {
  const tracing = startTracing(TELEMETRY_OFF.traces, 'test', new InMemorySpanExporter());
  try {
    const { logger, lines } = capture();
    const span = pushbaseTracer().startSpan('request');
    context.with(trace.setSpan(context.active(), span), () => logger.info('inside'));
    span.end();
    logger.info('outside');
    const { traceId, spanId } = span.spanContext();
    expect(lines[0]).toMatchObject({ msg: 'inside', trace_id: traceId, span_id: spanId });
    expect(lines[1]).not.toHaveProperty('trace_id');
  } finally {
    await tracing.shutdown();
  }
});

it('starts nothing while the exporter is none', async () => {
  const tracing = startTracing(TELEMETRY_OFF.traces, 'test');
  expect(tracing.enabled).toBe(false);
  const span = pushbaseTracer().startSpan('request');
  expect(span.isRecording()).toBe(false);
  await tracing.shutdown();
});

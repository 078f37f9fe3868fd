import {
  createMetricsRegistry,
  eventLogMetrics,
  grpcMetrics,
  httpMetrics,
  kafkaAppenderMetrics,
  metricsConfigOf,
  metricsEnv,
  projectorMetrics,
  startMetricsListener,
} from '@pushbase/metrics';
import { z } from 'zod';
import { httpGet as get, sample } from '../../../test/helpers/metrics';

describe('metrics registry', () => {
  it('is one per call, so two services in one process keep their own counts', async () => {
    const a = createMetricsRegistry({ processMetrics: false });
    const b = createMetricsRegistry({ processMetrics: false });
    const ha = httpMetrics(a);
    httpMetrics(b);
    ha.request('/datasets/:id/data', 'POST', 200, 12);
    expect(sample(await a.metrics(), 'pushbase_http_requests_total', { route: '/datasets/:id/data', method: 'POST', status: '200' })).toBe(1);
    expect(sample(await b.metrics(), 'pushbase_http_requests_total', { route: '/datasets/:id/data', method: 'POST', status: '200' })).toBeUndefined();
  });

  it("carries Node's process metrics unless told not to", async () => {
    expect(await createMetricsRegistry().metrics()).toMatch(/^process_cpu_user_seconds_total /m);
    expect(await createMetricsRegistry({ processMetrics: false }).metrics()).not.toMatch(/process_cpu_user_seconds_total/);
  });
});

describe('httpMetrics', () => {
  it('counts requests by route, method and status, with a latency histogram in seconds', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const http = httpMetrics(registry);
    http.request('/datasets/:id/data', 'POST', 200, 4);
    http.request('/datasets/:id/data', 'POST', 200, 40);
    http.request('/datasets/:id/data', 'POST', 413, 2);
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_http_requests_total', { route: '/datasets/:id/data', method: 'POST', status: '200' })).toBe(2);
    expect(sample(text, 'pushbase_http_requests_total', { route: '/datasets/:id/data', method: 'POST', status: '413' })).toBe(1);
    const labels = { route: '/datasets/:id/data', method: 'POST', status: '200' };
    expect(sample(text, 'pushbase_http_request_duration_seconds_count', labels)).toBe(2);
    expect(sample(text, 'pushbase_http_request_duration_seconds_sum', labels)).toBeCloseTo(0.044, 6);
    expect(sample(text, 'pushbase_http_request_duration_seconds_bucket', { ...labels, le: '0.005' })).toBe(1);
    expect(sample(text, 'pushbase_http_request_duration_seconds_bucket', { ...labels, le: '0.05' })).toBe(2);
  });

  it('folds methods the API does not know into one label value, so clients cannot add series', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const http = httpMetrics(registry);
    http.request('unmatched', 'BREW', 404, 1);
    http.request('unmatched', 'PROPFIND', 404, 1);
    expect(sample(await registry.metrics(), 'pushbase_http_requests_total', { route: 'unmatched', method: 'other', status: '404' })).toBe(2);
  });

  it('counts rate-limit refusals by the limit that refused', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const http = httpMetrics(registry);
    http.rateLimitRefused('api_key');
    http.rateLimitRefused('api_key');
    http.rateLimitRefused('auth_failures');
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_rate_limit_refusals_total', { limit: 'api_key' })).toBe(2);
    expect(sample(text, 'pushbase_rate_limit_refusals_total', { limit: 'auth_failures' })).toBe(1);
  });
});

describe('eventLogMetrics, kafkaAppenderMetrics, projectorMetrics', () => {
  it('observe group commits and appends of the embedded event log', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const m = eventLogMetrics(registry);
    m.commit(2, 3);
    for (const ms of [1, 2, 3]) m.append(ms);
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_event_log_commit_duration_seconds_count')).toBe(1);
    expect(sample(text, 'pushbase_event_log_commit_appends_sum')).toBe(3);
    expect(sample(text, 'pushbase_event_log_append_duration_seconds_count')).toBe(3);
    expect(sample(text, 'pushbase_event_log_append_duration_seconds_sum')).toBeCloseTo(0.006, 6);
  });

  it('count Kafka appends by outcome and time transactions by outcome', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const m = kafkaAppenderMetrics(registry);
    m.transaction('committed', 20, 2);
    m.append('committed', 25);
    m.append('committed', 26);
    m.append('outcome_unknown', 30_000);
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'committed' })).toBe(2);
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'outcome_unknown' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'committed' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_appends_sum')).toBe(2);
    expect(sample(text, 'pushbase_kafka_append_duration_seconds_bucket', { outcome: 'outcome_unknown', le: '10' })).toBe(0);
  });

  it('time gRPC calls per side by service, method and status name, in the HTTP answers\' buckets', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const server = grpcMetrics(registry, 'server');
    const client = grpcMetrics(registry, 'client');
    server.call('pushbase.v1.RecordService', 'Append', 'OK', 20);
    server.call('pushbase.v1.RecordService', 'Append', 'OK', 70);
    client.call('pushbase.v1.RecordService', 'Append', 'UNAVAILABLE', 1);
    const text = await registry.metrics();
    const append = { service: 'pushbase.v1.RecordService', method: 'Append' };
    expect(sample(text, 'pushbase_grpc_server_handling_seconds_count', { ...append, code: 'OK' })).toBe(2);
    expect(sample(text, 'pushbase_grpc_server_handling_seconds_bucket', { ...append, code: 'OK', le: '0.05' })).toBe(1);
    expect(sample(text, 'pushbase_grpc_server_handling_seconds_sum', { ...append, code: 'OK' })).toBeCloseTo(0.09, 6);
    expect(sample(text, 'pushbase_grpc_client_handling_seconds_count', { ...append, code: 'UNAVAILABLE' })).toBe(1);
    expect(sample(text, 'pushbase_grpc_client_handling_seconds_count', { ...append, code: 'OK' })).toBeUndefined();
  });

  it('keep lag per partition, never negative, and forget a revoked partition', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const m = projectorMetrics(registry);
    m.lag(0, 5);
    m.lag(1, -1);
    m.insert(1000, 50);
    m.load(12);
    m.load(60);
    m.count('writes');
    m.count('events', 7);
    m.count('viewFailures');
    let text = await registry.metrics();
    expect(sample(text, 'pushbase_projector_lag_messages', { partition: '0' })).toBe(5);
    expect(sample(text, 'pushbase_projector_lag_messages', { partition: '1' })).toBe(0);
    expect(sample(text, 'pushbase_clickhouse_insert_rows_sum')).toBe(1000);
    expect(sample(text, 'pushbase_clickhouse_insert_duration_seconds_sum')).toBeCloseTo(0.05, 6);
    expect(sample(text, 'pushbase_projector_load_duration_seconds_count')).toBe(2);
    expect(sample(text, 'pushbase_projector_load_duration_seconds_bucket', { le: '0.02' })).toBe(1);
    expect(sample(text, 'pushbase_projector_load_duration_seconds_bucket', { le: '0.05' })).toBe(1);
    expect(sample(text, 'pushbase_projector_load_duration_seconds_bucket', { le: '0.075' })).toBe(2);
    expect(sample(text, 'pushbase_projector_writes_total')).toBe(1);
    expect(sample(text, 'pushbase_projector_events_total')).toBe(7);
    expect(sample(text, 'pushbase_projector_view_failures_total')).toBe(1);
    m.forget(0);
    text = await registry.metrics();
    expect(sample(text, 'pushbase_projector_lag_messages', { partition: '0' })).toBeUndefined();
  });
});

describe('startMetricsListener', () => {
  it('serves GET /metrics in the Prometheus text format on a picked port, and nothing else', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    httpMetrics(registry).rateLimitRefused('api_key');
    const listener = await startMetricsListener(registry, { host: '127.0.0.1', port: 0 });
    try {
      expect(listener.port).toBeGreaterThan(0);
      const scrape = await get(listener.port, '/metrics');
      expect(scrape.status).toBe(200);
      expect(scrape.type).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(sample(scrape.body, 'pushbase_rate_limit_refusals_total', { limit: 'api_key' })).toBe(1);
      expect((await get(listener.port, '/metrics?x=1')).status).toBe(200);
      expect((await get(listener.port, '/')).status).toBe(404);
      expect((await get(listener.port, '/metrics', { method: 'POST' })).status).toBe(405);
    } finally {
      await listener.close();
    }
  });

  it('serves the probes it is given as JSON, 200 or 503, GET and HEAD only, and no other path', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    let ok = true;
    const listener = await startMetricsListener(registry, { host: '127.0.0.1', port: 0, probes: { '/healthz': () => ({ ok, body: { status: ok ? 'ok' : 'stalled' } }) } });
    try {
      expect(await get(listener.port, '/healthz')).toMatchObject({ status: 200, type: 'application/json', body: '{"status":"ok"}\n' });
      ok = false;
      expect(await get(listener.port, '/healthz?verbose=1')).toMatchObject({ status: 503, body: '{"status":"stalled"}\n' });
      expect((await get(listener.port, '/healthz', { method: 'HEAD' })).status).toBe(503);
      expect((await get(listener.port, '/healthz', { method: 'POST' })).status).toBe(405);
      expect((await get(listener.port, '/readyz')).status).toBe(404);
      expect((await get(listener.port, '/toString')).status).toBe(404);
      expect((await get(listener.port, '/metrics')).status).toBe(200);
    } finally {
      await listener.close();
    }
  });
});

describe('metricsEnv', () => {
  const parse = (env: Record<string, string>) => metricsConfigOf(z.object(metricsEnv).parse(env));
  it('defaults to loopback and a picked port', () => {
    expect(parse({})).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parse({ PUSHBASE_METRICS_PORT: ' ', PUSHBASE_METRICS_HOST: '' })).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parse({ PUSHBASE_METRICS_PORT: '9464', PUSHBASE_METRICS_HOST: '0.0.0.0' })).toEqual({ host: '0.0.0.0', port: 9464 });
  });
  it('refuses a port that is not one', () => {
    expect(() => parse({ PUSHBASE_METRICS_PORT: '70000' })).toThrow();
    expect(() => parse({ PUSHBASE_METRICS_PORT: 'http' })).toThrow();
  });
});

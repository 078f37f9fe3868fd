/*
 * Prometheus metrics (docs/metrics.md): after real traffic, every process's GET /metrics shows what that
 * traffic did. Embedded: the admin listener of `pushbase serve`. Distributed (the e2e-distributed project):
 * the gateway's admin listener, the schema and records services' metrics listeners, and the projector's.
 */
import { TestServer } from '../helpers/server';
import { sample, samples, httpGet, scrape } from '../helpers/metrics';
import { createDataset, expectError, expectOk, field, uid } from './support';
import { eventually } from '../helpers/eventually';

// Small enough to reach in this suite, large enough for the traffic before the refusal.
const LIMIT = 8;

describe('GET /metrics', () => {
  const s = new TestServer({ env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: String(LIMIT) } });
  const id = uid('metrics');
  beforeAll(async () => {
    await s.start();
    const key = s.keys.acme!;
    await createDataset(s, key, id, { n: field('number', 'N') });
    for (let i = 0; i < 3; i++) expectOk(await s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ n: i }] } }));
    expectError(await s.request('POST', `/datasets/${id}/data`, { key: 'not-a-key-of-anyone', body: { data: [{ n: 9 }] } }), 401, 'Your API key is invalid');
    // 4 requests of this key so far; use up the rest of its minute, then one more is refused.
    for (let i = 4; i < LIMIT; i++) expectOk(await s.request('GET', '/', { key }));
    expect((await s.request('GET', '/', { key })).status).toBe(429);
  });
  afterAll(async () => {
    await s.stop();
  });

  it('on the admin listener, without the admin token: requests by route pattern and status, with latency', async () => {
    const text = await scrape(s.adminPort);
    const append = { route: '/datasets/:id/data', method: 'POST' };
    expect(sample(text, 'pushbase_http_requests_total', { ...append, status: '200' })).toBe(3);
    expect(sample(text, 'pushbase_http_requests_total', { ...append, status: '401' })).toBe(1);
    expect(sample(text, 'pushbase_http_requests_total', { route: '/datasets/:id', method: 'PUT', status: '201' })).toBe(1);
    expect(sample(text, 'pushbase_http_requests_total', { route: '/', method: 'GET', status: '429' })).toBe(1);
    expect(sample(text, 'pushbase_http_request_duration_seconds_count', { ...append, status: '200' })).toBe(3);
    const seconds = sample(text, 'pushbase_http_request_duration_seconds_sum', { ...append, status: '200' })!;
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThan(60);
    expect(sample(text, 'pushbase_rate_limit_refusals_total', { limit: 'api_key' })).toBe(1);
    // Node's process metrics come with it.
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    // No label carries a dataset id or an account.
    expect(text).not.toContain(id);
    expect(text).not.toContain('acme');
  });

  it('answers in the Prometheus text format and leaves every other admin route behind the token', async () => {
    const res = await httpGet(s.adminPort, '/metrics');
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect((await httpGet(s.adminPort, '/admin/accounts/acme/datasets')).status).toBe(401);
  });

  if (!s.distributed) {
    it('embedded: times the event log, each append from its call to its group commit being durable', async () => {
      const text = await scrape(s.adminPort);
      // The create and the three appends, each one append of the log.
      expect(sample(text, 'pushbase_event_log_append_duration_seconds_count')).toBe(4);
      expect(sample(text, 'pushbase_event_log_commit_duration_seconds_count')).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'pushbase_event_log_commit_appends_sum')).toBe(4);
    });
  } else {
    it('distributed: the records and schema services count their Kafka appends by outcome', async () => {
      const stack = s.stack!;
      const records = await scrape(stack.metricsPort('records')!);
      expect(sample(records, 'pushbase_kafka_appends_total', { outcome: 'committed' })).toBe(3);
      expect(sample(records, 'pushbase_kafka_appends_total', { outcome: 'outcome_unknown' })).toBeUndefined();
      expect(sample(records, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'committed' })).toBeGreaterThanOrEqual(1);
      const schema = await scrape(stack.metricsPort('schema')!);
      expect(sample(schema, 'pushbase_kafka_appends_total', { outcome: 'committed' })).toBe(1);
      expect(sample(schema, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    });

    it('distributed: the projector reports its inserts, and a lag of 0 per partition once caught up', async () => {
      await s.caughtUp();
      const port = s.stack!.metricsPort('projector')!;
      const text = await eventually(async () => {
        const t = await scrape(port);
        const lags = samples(t, 'pushbase_projector_lag_messages');
        return lags.length > 0 && lags.every((l) => l.value === 0) ? t : undefined;
      }, { timeoutMs: 30_000 });
      expect(sample(text, 'pushbase_clickhouse_insert_rows_count')).toBeGreaterThan(0);
      // The create's head and three rows at least (a write may hold rows of many requests).
      expect(sample(text, 'pushbase_clickhouse_insert_rows_sum')).toBeGreaterThanOrEqual(3);
      expect(sample(text, 'pushbase_clickhouse_insert_duration_seconds_count')).toBe(sample(text, 'pushbase_clickhouse_insert_rows_count'));
      expect(sample(text, 'pushbase_projector_events_total')).toBeGreaterThanOrEqual(4);
      expect(sample(text, 'pushbase_projector_writes_total')).toBeGreaterThan(0);
      for (const { labels } of samples(text, 'pushbase_projector_lag_messages')) expect(labels.partition).toMatch(/^\d+$/);
    });
  }
});

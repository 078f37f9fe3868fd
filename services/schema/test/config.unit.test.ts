import { loadSchemaConfig } from '../src/config';

describe('pushbase schema configuration', () => {
  it('has defaults that share the projector topic and Redis prefix, and pick a gRPC port', () => {
    const c = loadSchemaConfig({});
    expect(c.kafka).toEqual({ brokers: ['127.0.0.1:9092'], topic: 'pushbase.dataset-events', accountsTopic: 'pushbase.dataset-events.accounts', clientId: 'pushbase-schema', appendTimeoutMs: 10_000, transactionalId: expect.stringMatching(/^pushbase-schema-/) as unknown });
    // Unique per start unless set: two replicas never fence each other.
    expect(loadSchemaConfig({}).kafka.transactionalId).not.toBe(c.kafka.transactionalId);
    expect(c.redis).toEqual({ url: 'redis://127.0.0.1:6379', prefix: 'pushbase:' });
    // No drain delay unless asked: locally the drain's GOAWAY is enough.
    expect(c.grpc).toEqual({ host: '127.0.0.1', port: 0, drainMs: 0 });
    expect(c.lock).toEqual({ ttlMs: 60_000, waitMs: 10_000 });
    // Loopback and a picked port, as the gRPC listener: several services on one host never collide.
    expect(c.metrics).toEqual({ host: '127.0.0.1', port: 0 });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads every variable, blank meaning default', () => {
    const c = loadSchemaConfig({
      PUSHBASE_KAFKA_BROKERS: 'a:1, b:2',
      PUSHBASE_KAFKA_TOPIC: 't.x',
      PUSHBASE_KAFKA_ACCOUNTS_TOPIC: 'accts.x',
      PUSHBASE_SCHEMA_KAFKA_CLIENT_ID: 'me',
      PUSHBASE_SCHEMA_TRANSACTIONAL_ID: 'schema-0',
      PUSHBASE_REDIS_URL: 'rediss://r:6380',
      PUSHBASE_REDIS_PREFIX: 'pb:',
      PUSHBASE_GRPC_HOST: '0.0.0.0',
      PUSHBASE_GRPC_TOKEN: 'a-grpc-token-of-at-least-32-characters-0123',
      PUSHBASE_SCHEMA_GRPC_PORT: '7001',
      PUSHBASE_GRPC_DRAIN_MS: '5000',
      PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS: '5000',
      PUSHBASE_SCHEMA_LOCK_TTL_MS: '10000',
      PUSHBASE_SCHEMA_LOCK_WAIT_MS: ' ',
      PUSHBASE_SCHEMA_SWEEP_MS: '500',
      PUSHBASE_SHUTDOWN_TIMEOUT_MS: '0',
      PUSHBASE_METRICS_HOST: '0.0.0.0',
      PUSHBASE_METRICS_PORT: '9464',
      PUSHBASE_LOG_LEVEL: 'debug',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'schema-a',
      PUSHBASE_IDEMPOTENCY_TTL_HOURS: '1.5',
      PUSHBASE_PROJECTOR_GROUP: 'proj-2',
    });
    expect(c).toEqual({
      kafka: { brokers: ['a:1', 'b:2'], topic: 't.x', accountsTopic: 'accts.x', clientId: 'me', appendTimeoutMs: 5000, transactionalId: 'schema-0' },
      redis: { url: 'rediss://r:6380', prefix: 'pb:' },
      grpc: { host: '0.0.0.0', port: 7001, drainMs: 5000, token: 'a-grpc-token-of-at-least-32-characters-0123' },
      lock: { ttlMs: 10_000, waitMs: 10_000 },
      sweepIntervalMs: 500,
      shutdownTimeoutMs: 0,
      // A lease, an append and a sweep, and 5 s to spare.
      idempotency: { ttlMs: 5_400_000, leaseMs: 10_000 + 5000 + 500 + 5000, projectorGroup: 'proj-2' },
      metrics: { host: '0.0.0.0', port: 9464 },
      telemetry: { logLevel: 'debug', traces: { exporter: 'otlp', protocol: 'http/json', serviceName: 'schema-a' } },
    });
  });

  it('refuses to listen beyond loopback without PUSHBASE_GRPC_TOKEN, and a token shorter than 32 characters', () => {
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'schema.internal']) {
      expect(() => loadSchemaConfig({ PUSHBASE_GRPC_HOST: host })).toThrow(/PUSHBASE_GRPC_TOKEN is required unless PUSHBASE_GRPC_HOST is a loopback address/);
      expect(loadSchemaConfig({ PUSHBASE_GRPC_HOST: host, PUSHBASE_GRPC_TOKEN: 'a-grpc-token-of-at-least-32-characters-0123' }).grpc.token).toBe('a-grpc-token-of-at-least-32-characters-0123');
    }
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost']) expect(loadSchemaConfig({ PUSHBASE_GRPC_HOST: host, PUSHBASE_GRPC_TOKEN: ' ' }).grpc.token).toBeUndefined();
    expect(() => loadSchemaConfig({ PUSHBASE_GRPC_TOKEN: 'x'.repeat(31) })).toThrow(/PUSHBASE_GRPC_TOKEN must be at least 32 printable ASCII characters/);
    expect(() => loadSchemaConfig({ PUSHBASE_GRPC_TOKEN: `${'x'.repeat(20)} ${'x'.repeat(20)}` })).toThrow(/without spaces/);
  });

  it('refuses a lease shorter than twice the append timeout, and lists every problem', () => {
    expect(() => loadSchemaConfig({ PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS: '30000', PUSHBASE_SCHEMA_LOCK_TTL_MS: '50000' })).toThrow(/PUSHBASE_SCHEMA_LOCK_TTL_MS must be at least twice/);
    expect(() => loadSchemaConfig({ PUSHBASE_SCHEMA_APPEND_TIMEOUT_MS: '20000', PUSHBASE_SCHEMA_LOCK_WAIT_MS: '20000' })).toThrow(/under the gRPC clients' write deadline/);
    let message = '';
    try {
      loadSchemaConfig({ PUSHBASE_REDIS_PREFIX: 'pb*', PUSHBASE_SCHEMA_GRPC_PORT: '70000', PUSHBASE_KAFKA_BROKERS: 'nohost' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/PUSHBASE_REDIS_PREFIX/);
    expect(message).toMatch(/PUSHBASE_SCHEMA_GRPC_PORT/);
    expect(message).toMatch(/PUSHBASE_KAFKA_BROKERS/);
    expect(() => loadSchemaConfig({ PUSHBASE_GRPC_DRAIN_MS: '-1' })).toThrow(/PUSHBASE_GRPC_DRAIN_MS/);
    expect(() => loadSchemaConfig({ PUSHBASE_GRPC_DRAIN_MS: 'soon' })).toThrow(/PUSHBASE_GRPC_DRAIN_MS/);
    expect(loadSchemaConfig({ PUSHBASE_GRPC_DRAIN_MS: ' ' }).grpc.drainMs).toBe(0);
  });
});

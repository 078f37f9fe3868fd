import { defaultRecordsWriteWorkers, loadRecordsConfig, requestTimeoutMs } from '../src/config';

describe('loadRecordsConfig', () => {
  it('has defaults for everything', () => {
    const c = loadRecordsConfig({});
    expect(c.kafka).toEqual({ brokers: ['127.0.0.1:9092'], topic: 'pushbase.dataset-events', clientId: 'pushbase-records', appendTimeoutMs: 30_000, requestTimeoutMs: 10_000, produceTimeoutMs: 5000, lingerMs: 1 });
    // No drain delay unless asked: locally the drain's GOAWAY is enough.
    expect(c.grpc).toEqual({ host: '127.0.0.1', port: 0, drainMs: 0 });
    expect(c.redis).toEqual({ url: 'redis://127.0.0.1:6379', prefix: 'pushbase:' });
    // The append deadline, a request's timeout, the schema service's transaction timeout and 5 s to spare.
    expect(c.idempotency).toEqual({ ttlMs: 86_400_000, leaseMs: 30_000 + 10_000 + 10_000 + 5000, projectorGroup: 'pushbase-projector' });
    // Well above the lease (an unknown attempt must be settled before its key is forgotten), at most a week.
    for (const hours of ['0', '0.5', '0.99', '168.5', '8760']) expect(() => loadRecordsConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: hours })).toThrow(/PUSHBASE_IDEMPOTENCY_TTL_HOURS must be at (least 1|most 168)/);
    expect(loadRecordsConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '1' }).idempotency.ttlMs).toBe(3_600_000);
    expect(loadRecordsConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '168' }).idempotency.ttlMs).toBe(604_800_000);
    expect(c.writeWorkers).toBe(defaultRecordsWriteWorkers());
  });

  it("gives Kafka requests a third of the append timeout, within 1-10 s, leaving time to confirm a lost answer", () => {
    expect([100, 3_000, 20_000, 30_000, 600_000].map(requestTimeoutMs)).toEqual([1000, 1000, 6666, 10_000, 10_000]);
  });

  it('decides writes in one thread per core, at most 4, and on the event loop on one core', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultRecordsWriteWorkers(cores))).toEqual([0, 2, 3, 4, 4, 4]);
  });

  it('takes every variable, blank meaning default', () => {
    const c = loadRecordsConfig({
      PUSHBASE_KAFKA_BROKERS: 'a:1, b:2',
      PUSHBASE_KAFKA_TOPIC: 'events',
      PUSHBASE_RECORDS_KAFKA_CLIENT_ID: 'records-a',
      PUSHBASE_REDIS_URL: 'redis://r:6380',
      PUSHBASE_REDIS_PREFIX: 'p:',
      PUSHBASE_GRPC_HOST: '0.0.0.0',
      PUSHBASE_GRPC_TOKEN: 'a-grpc-token-of-at-least-32-characters-0123',
      PUSHBASE_RECORDS_GRPC_PORT: '7001',
      PUSHBASE_GRPC_DRAIN_MS: '5000',
      PUSHBASE_RECORDS_APPEND_TIMEOUT_MS: '20000',
      PUSHBASE_RECORDS_LINGER_MS: '',
      PUSHBASE_RECORDS_WRITE_WORKERS: '0',
    });
    expect(c.kafka).toEqual({ brokers: ['a:1', 'b:2'], topic: 'events', clientId: 'records-a', appendTimeoutMs: 20_000, requestTimeoutMs: 6666, produceTimeoutMs: 3333, lingerMs: 1 });
    expect(c.grpc).toEqual({ host: '0.0.0.0', port: 7001, drainMs: 5000, token: 'a-grpc-token-of-at-least-32-characters-0123' });
    expect(c.redis).toEqual({ url: 'redis://r:6380', prefix: 'p:' });
    expect(c.writeWorkers).toBe(0);
  });

  it('refuses to listen beyond loopback without PUSHBASE_GRPC_TOKEN, and a token shorter than 32 characters', () => {
    expect(() => loadRecordsConfig({ PUSHBASE_GRPC_HOST: '0.0.0.0' })).toThrow(/PUSHBASE_GRPC_TOKEN is required unless PUSHBASE_GRPC_HOST is a loopback address/);
    expect(loadRecordsConfig({ PUSHBASE_GRPC_HOST: '0.0.0.0', PUSHBASE_GRPC_TOKEN: 'a-grpc-token-of-at-least-32-characters-0123' }).grpc.token).toBe('a-grpc-token-of-at-least-32-characters-0123');
    expect(loadRecordsConfig({ PUSHBASE_GRPC_HOST: '::1' }).grpc.token).toBeUndefined();
    expect(() => loadRecordsConfig({ PUSHBASE_GRPC_TOKEN: 'short' })).toThrow(/PUSHBASE_GRPC_TOKEN must be at least 32/);
  });

  it('refuses bad values, naming each', () => {
    expect(() => loadRecordsConfig({ PUSHBASE_KAFKA_BROKERS: 'nope', PUSHBASE_RECORDS_GRPC_PORT: '70000' })).toThrow(/PUSHBASE_KAFKA_BROKERS[\s\S]*PUSHBASE_RECORDS_GRPC_PORT/);
    expect(() => loadRecordsConfig({ PUSHBASE_GRPC_DRAIN_MS: '-1' })).toThrow(/PUSHBASE_GRPC_DRAIN_MS/);
    expect(() => loadRecordsConfig({ PUSHBASE_GRPC_DRAIN_MS: '1.5' })).toThrow(/PUSHBASE_GRPC_DRAIN_MS/);
    expect(() => loadRecordsConfig({ PUSHBASE_RECORDS_WRITE_WORKERS: '-1' })).toThrow(/PUSHBASE_RECORDS_WRITE_WORKERS/);
    // An append timeout at the gRPC clients' write deadline would turn settled writes into caller timeouts.
    expect(() => loadRecordsConfig({ PUSHBASE_RECORDS_APPEND_TIMEOUT_MS: '59000' })).toThrow(/write deadline/);
  });
});

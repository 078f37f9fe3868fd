import { loadGatewayConfig } from '../src/config';

/* `pushbase gateway`'s one config schema: the listeners' variables of `pushbase serve` plus its own. */

const REQUIRED = { PUSHBASE_SCHEMA_ADDRESS: '127.0.0.1:50051', PUSHBASE_RECORDS_ADDRESS: 'records.internal:50052' };

it('takes the same listener defaults as pushbase serve and the service addresses as given', () => {
  const c = loadGatewayConfig(REQUIRED);
  expect(c).toMatchObject({
    port: 8443,
    adminPort: 8444,
    adminHost: '127.0.0.1',
    dataDir: './.data',
    rateLimitPerMinute: 60,
    behindTlsProxy: false,
    tls: undefined,
    schemaAddress: '127.0.0.1:50051',
    recordsAddress: 'records.internal:50052',
    redis: { url: 'redis://127.0.0.1:6379', prefix: 'pushbase:' },
    clickhouse: { url: 'http://127.0.0.1:8123', database: 'pushbase' },
  });
});

it('reads the listener variables as pushbase serve does', () => {
  const c = loadGatewayConfig({ ...REQUIRED, PUSHBASE_PORT: '0', PUSHBASE_RATE_LIMIT_PER_MINUTE: '5', PUSHBASE_TLS_CERT: 'c.pem', PUSHBASE_TLS_KEY: 'k.pem', PUSHBASE_REDIS_PREFIX: 'x:' });
  expect(c).toMatchObject({ port: 0, rateLimitPerMinute: 5, tls: { certFile: 'c.pem', keyFile: 'k.pem' }, redis: { prefix: 'x:' } });
});

it('lists every problem at once: a missing address, a malformed one, a bad prefix; and a lone certificate', () => {
  let message = '';
  try {
    loadGatewayConfig({ PUSHBASE_RECORDS_ADDRESS: 'no-port', PUSHBASE_REDIS_PREFIX: 'no-colon' });
  } catch (e) {
    message = (e as Error).message;
  }
  expect(message).toMatch(/PUSHBASE_SCHEMA_ADDRESS is required/);
  expect(message).toMatch(/PUSHBASE_RECORDS_ADDRESS must be host:port/);
  expect(message).toMatch(/PUSHBASE_REDIS_PREFIX must be/);
  expect(() => loadGatewayConfig({ ...REQUIRED, PUSHBASE_TLS_CERT: 'c.pem' })).toThrow(/Set both PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY/);
});

it('sends PUSHBASE_GRPC_TOKEN when given (at least 32 characters), nothing when not', () => {
  expect(loadGatewayConfig(REQUIRED).grpcToken).toBeUndefined();
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_GRPC_TOKEN: '' }).grpcToken).toBeUndefined();
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_GRPC_TOKEN: 'a-grpc-token-of-at-least-32-characters-0123' }).grpcToken).toBe('a-grpc-token-of-at-least-32-characters-0123');
  expect(() => loadGatewayConfig({ ...REQUIRED, PUSHBASE_GRPC_TOKEN: 'x'.repeat(31) })).toThrow(/PUSHBASE_GRPC_TOKEN must be at least 32/);
});

it('takes the records service as replicas, ip:port separated by commas, all of one family, each once', () => {
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_RECORDS_ADDRESS: '10.0.0.7:50052,10.0.0.8:50052' }).recordsAddress).toBe('10.0.0.7:50052,10.0.0.8:50052');
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_RECORDS_ADDRESS: '[fd00::7]:50052,[fd00::8]:50052' }).recordsAddress).toBe('[fd00::7]:50052,[fd00::8]:50052');
  for (const bad of ['records-0:50052,records-1:50052', '10.0.0.7:50052,[fd00::8]:50052', '10.0.0.7:50052,10.0.0.7:50052', '10.0.0.7:50052,', '10.0.0.7,10.0.0.8:1', '10.0.0.7:50052, 10.0.0.8:50052']) {
    expect(() => loadGatewayConfig({ ...REQUIRED, PUSHBASE_RECORDS_ADDRESS: bad })).toThrow(/PUSHBASE_RECORDS_ADDRESS must be host:port .*or replicas' ip:port separated by commas/);
  }
  // The schema service takes one address.
  expect(() => loadGatewayConfig({ ...REQUIRED, PUSHBASE_SCHEMA_ADDRESS: '10.0.0.7:50051,10.0.0.8:50051' })).toThrow(/PUSHBASE_SCHEMA_ADDRESS must be host:port/);
});

it("takes an account's write budget as 0 (no bound) or at least 64 KiB a second", () => {
  expect(loadGatewayConfig(REQUIRED).accountShare).toMatchObject({ writeBytesPerSecond: 1024 * 1024, writeBurstBytes: 4 * 1024 * 1024 });
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND: '0' }).accountShare.writeBytesPerSecond).toBe(0);
  expect(loadGatewayConfig({ ...REQUIRED, PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND: '65536' }).accountShare.writeBytesPerSecond).toBe(65_536);
  for (const bad of ['1000', '-1', '1.5', 'lots']) {
    expect(() => loadGatewayConfig({ ...REQUIRED, PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND: bad })).toThrow(/PUSHBASE_ACCOUNT_WRITE_BYTES_PER_SECOND/);
  }
});

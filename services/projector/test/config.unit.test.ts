import { MAX_INSERT_ROWS } from '@pushbase/clickhouse';
import { loadMigrateConfig, loadProjectorConfig } from '../src/config';
import { MAX_ROWS_PER_EVENT } from '../src/project';

describe('loadProjectorConfig', () => {
  it('has defaults for everything, empty meaning unset', () => {
    expect(loadProjectorConfig({ PUSHBASE_PROJECTOR_MAX_ROWS: '' })).toStrictEqual({
      kafka: { brokers: ['127.0.0.1:9092'], topic: 'pushbase.dataset-events', accountsTopic: 'pushbase.dataset-events.accounts', groupId: 'pushbase-projector' },
      clickhouse: { url: 'http://127.0.0.1:8123', database: 'pushbase', viewsDatabase: 'pushbase_views' },
      redis: { url: 'redis://127.0.0.1:6379', prefix: 'pushbase:' },
      idempotencyTtlMs: 86_400_000,
      maxRows: 4_000_000,
      flushRows: 50_000,
      flushIntervalMs: 250,
      nice: 0,
      stallMs: 180_000,
      metrics: { host: '127.0.0.1', port: 0 },
      telemetry: { logLevel: 'info', traces: { exporter: 'none', protocol: 'http/protobuf', serviceName: undefined } },
    });
  });

  it('reads every variable', () => {
    const c = loadProjectorConfig({
      PUSHBASE_KAFKA_BROKERS: 'a:1, b:2',
      PUSHBASE_KAFKA_TOPIC: 'events.v1',
      PUSHBASE_PROJECTOR_GROUP: 'proj-2',
      PUSHBASE_CLICKHOUSE_URL: 'http://ch:8123',
      PUSHBASE_CLICKHOUSE_DATABASE: 'pb_live',
      PUSHBASE_PROJECTOR_MAX_ROWS: '50',
      PUSHBASE_PROJECTOR_FLUSH_ROWS: '1000',
      PUSHBASE_PROJECTOR_FLUSH_MS: '250',
      PUSHBASE_PROJECTOR_NICE: '10',
      PUSHBASE_REDIS_URL: 'redis://cache:6380',
      PUSHBASE_REDIS_PREFIX: 'pb-live:',
      PUSHBASE_METRICS_PORT: '9464',
      PUSHBASE_PROJECTOR_STALL_MS: '60000',
      PUSHBASE_IDEMPOTENCY_TTL_HOURS: '2',
    });
    expect(c).toMatchObject({ stallMs: 60_000, idempotencyTtlMs: 7_200_000 });
    expect(() => loadProjectorConfig({ PUSHBASE_PROJECTOR_STALL_MS: '4999' })).toThrow(/PUSHBASE_PROJECTOR_STALL_MS/);
    expect(c).toMatchObject({ kafka: { brokers: ['a:1', 'b:2'], topic: 'events.v1', accountsTopic: 'events.v1.accounts', groupId: 'proj-2' }, clickhouse: { database: 'pb_live' }, redis: { url: 'redis://cache:6380', prefix: 'pb-live:' }, maxRows: 50, flushRows: 1000, flushIntervalMs: 250, nice: 10, metrics: { host: '127.0.0.1', port: 9464 } });
    expect(Object.isFrozen(c)).toBe(true);
    expect(() => loadProjectorConfig({ PUSHBASE_PROJECTOR_NICE: '20' })).toThrow(/PUSHBASE_PROJECTOR_NICE/);
    expect(() => loadProjectorConfig({ PUSHBASE_PROJECTOR_NICE: '-1' })).toThrow(/PUSHBASE_PROJECTOR_NICE/);
    // The accounts topic follows the dataset topic's name unless set; blank is unset, a bad name refused.
    expect(loadProjectorConfig({ PUSHBASE_KAFKA_ACCOUNTS_TOPIC: 'accts' }).kafka.accountsTopic).toBe('accts');
    expect(loadProjectorConfig({ PUSHBASE_KAFKA_TOPIC: 't', PUSHBASE_KAFKA_ACCOUNTS_TOPIC: ' ' }).kafka.accountsTopic).toBe('t.accounts');
    expect(() => loadProjectorConfig({ PUSHBASE_KAFKA_ACCOUNTS_TOPIC: 'a b' })).toThrow(/PUSHBASE_KAFKA_ACCOUNTS_TOPIC/);
  });

  it('keeps a write within one atomic insert', () => {
    expect(() => loadProjectorConfig({ PUSHBASE_PROJECTOR_FLUSH_ROWS: String(MAX_INSERT_ROWS - MAX_ROWS_PER_EVENT) })).not.toThrow();
    expect(() => loadProjectorConfig({ PUSHBASE_PROJECTOR_FLUSH_ROWS: String(MAX_INSERT_ROWS - MAX_ROWS_PER_EVENT + 1) })).toThrow(/PUSHBASE_PROJECTOR_FLUSH_ROWS/);
  });

  it('lists every bad value at once', () => {
    expect(() => loadProjectorConfig({ PUSHBASE_KAFKA_BROKERS: 'nohost', PUSHBASE_KAFKA_TOPIC: 'a b', PUSHBASE_PROJECTOR_MAX_ROWS: '0', PUSHBASE_PROJECTOR_FLUSH_MS: '1.5' })).toThrow(
      /PUSHBASE_KAFKA_BROKERS[\s\S]*PUSHBASE_KAFKA_TOPIC[\s\S]*PUSHBASE_PROJECTOR_MAX_ROWS[\s\S]*PUSHBASE_PROJECTOR_FLUSH_MS/,
    );
  });
});

describe('loadMigrateConfig', () => {
  it('has defaults for everything and reads the topic settings', () => {
    expect(loadMigrateConfig({})).toStrictEqual({
      kafka: { brokers: ['127.0.0.1:9092'], topic: 'pushbase.dataset-events', accountsTopic: 'pushbase.dataset-events.accounts', partitions: 6, replicationFactor: 1 },
      clickhouse: { url: 'http://127.0.0.1:8123', database: 'pushbase' },
    });
    expect(loadMigrateConfig({ PUSHBASE_KAFKA_PARTITIONS: '12', PUSHBASE_KAFKA_REPLICATION_FACTOR: '3' }).kafka).toMatchObject({ partitions: 12, replicationFactor: 3 });
  });

  it('lists every bad value at once', () => {
    expect(() => loadMigrateConfig({ PUSHBASE_KAFKA_PARTITIONS: '0', PUSHBASE_KAFKA_REPLICATION_FACTOR: 'x', PUSHBASE_CLICKHOUSE_DATABASE: 'a b' })).toThrow(
      /PUSHBASE_KAFKA_PARTITIONS[\s\S]*PUSHBASE_KAFKA_REPLICATION_FACTOR[\s\S]*PUSHBASE_CLICKHOUSE_DATABASE/,
    );
  });
});

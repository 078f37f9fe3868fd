import * as path from 'node:path';
import { legacyKafkaConfig, readServicesConfig, serviceUrls } from '../../deploy/local/config';

describe('local services configuration', () => {
  it('defaults to the standard loopback ports and the .services folder', () => {
    const c = readServicesConfig({}, '/repo');
    expect(c.dir).toBe(path.resolve('/repo/.services'));
    expect(c.kafka).toEqual({ host: '127.0.0.1', port: 9092, controllerPort: 9093 });
    expect(c.clickhouse).toEqual({ host: '127.0.0.1', port: 8123, tcpPort: 9000, interserverPort: 9009 });
    expect(c.redis).toEqual({ host: '127.0.0.1', port: 6379 });
    expect(c.mode).toBeUndefined();
    expect(c.kafkaVersion).toBe('4.4.0');
    expect(c.legacyKafka).toEqual({ version: '3.9.2', endpoint: { host: '127.0.0.1', port: 9192, controllerPort: 9193 } });
    expect(serviceUrls(c)).toEqual({
      PUSHBASE_KAFKA_BROKERS: '127.0.0.1:9092',
      PUSHBASE_CLICKHOUSE_URL: 'http://127.0.0.1:8123',
      PUSHBASE_REDIS_URL: 'redis://127.0.0.1:6379',
    });
  });

  it('moves every ClickHouse port with a moved HTTP port, so a second server never collides with the first', () => {
    const c = readServicesConfig({ PUSHBASE_CLICKHOUSE_URL: 'http://localhost:18123', PUSHBASE_SERVICES_DIR: '/tmp/x' }, '/repo');
    expect(c.clickhouse).toEqual({ host: 'localhost', port: 18123, tcpPort: 18124, interserverPort: 18125 });
    expect(c.dir).toBe(path.resolve('/tmp/x'));
  });

  it('takes ports from the URLs and the mode from PUSHBASE_TEST_SERVICES', () => {
    const c = readServicesConfig({ PUSHBASE_KAFKA_BROKERS: '127.0.0.2:29092', PUSHBASE_REDIS_URL: 'redis://[::1]:16379', PUSHBASE_TEST_SERVICES: 'containers' }, '/repo');
    expect(c.kafka).toEqual({ host: '127.0.0.2', port: 29092, controllerPort: 29093 });
    expect(c.redis).toEqual({ host: '::1', port: 16379 });
    expect(serviceUrls(c).PUSHBASE_REDIS_URL).toBe('redis://[::1]:16379');
    expect(c.mode).toBe('containers');
  });

  it('runs another Kafka release when told, 3.9.x or 4.x', () => {
    expect(readServicesConfig({ PUSHBASE_KAFKA_VERSION: '3.9.1' }, '/repo').kafkaVersion).toBe('3.9.1');
    expect(readServicesConfig({ PUSHBASE_KAFKA_VERSION: '4.0.0' }, '/repo').kafkaVersion).toBe('4.0.0');
    expect(readServicesConfig({ PUSHBASE_KAFKA_VERSION: ' ' }, '/repo').kafkaVersion).toBe('4.4.0');
  });

  it('gives the legacy broker a folder of its own inside the services folder, and its jars beside the main ones', () => {
    const c = readServicesConfig({ PUSHBASE_SERVICES_DIR: '/tmp/s', PUSHBASE_KAFKA_JARS_DIR: '/jars/4', PUSHBASE_KAFKA_LEGACY_BROKERS: '127.0.0.1:19192' }, '/repo');
    const legacy = legacyKafkaConfig(c);
    expect(legacy).toMatchObject({ dir: path.resolve('/tmp/s/legacy'), kafkaVersion: '3.9.2', kafkaJarsDir: path.resolve('/tmp/s/kafka-3.9.2') });
    expect(legacy.kafka).toEqual({ host: '127.0.0.1', port: 19192, controllerPort: 19193 });
    expect(() => legacyKafkaConfig(readServicesConfig({ PUSHBASE_KAFKA_LEGACY_BROKERS: '127.0.0.1:9093' }, '/repo'))).toThrow(/collides/);
  });

  it.each([
    [{ PUSHBASE_KAFKA_VERSION: '3.8.1' }, /PUSHBASE_KAFKA_VERSION: must be a released Apache Kafka version of 3.9 or 4.x/],
    [{ PUSHBASE_KAFKA_VERSION: '5.0.0' }, /PUSHBASE_KAFKA_VERSION/],
    [{ PUSHBASE_KAFKA_VERSION: '4.4' }, /PUSHBASE_KAFKA_VERSION/],
    [{ PUSHBASE_KAFKA_VERSION: 'latest' }, /PUSHBASE_KAFKA_VERSION/],
    [{ PUSHBASE_KAFKA_LEGACY_VERSION: '4.0.0' }, /PUSHBASE_KAFKA_LEGACY_VERSION: must be a released Apache Kafka version of 3.9/],
    [{ PUSHBASE_KAFKA_LEGACY_BROKERS: '10.0.0.5:9192' }, /loopback only/],
    [{ PUSHBASE_REDIS_URL: 'redis://10.0.0.5:6379' }, /loopback only/],
    [{ PUSHBASE_KAFKA_BROKERS: '0.0.0.0:9092' }, /loopback only/],
    [{ PUSHBASE_KAFKA_BROKERS: '127.0.0.1:9092,127.0.0.1:9094' }, /one node/],
    [{ PUSHBASE_CLICKHOUSE_URL: 'http://127.0.0.1' }, /names no port/],
    [{ PUSHBASE_TEST_SERVICES: 'docker' }, /PUSHBASE_TEST_SERVICES/],
  ])('refuses %j', (env, message) => {
    expect(() => readServicesConfig(env, '/repo')).toThrow(message);
  });
});

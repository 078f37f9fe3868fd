import { z } from 'zod';
import { loadConfig } from '@pushbase/embedded';
import { loadGatewayConfig } from '@pushbase/gateway';
import { loadProjectorConfig } from '@pushbase/projector';
import { loadRecordsConfig } from '@pushbase/records';
import { loadSchemaConfig } from '@pushbase/schema';
import { blankToUndefined, integer, kafkaName, parseEnv, shutdownEnv, text } from '../src';

/* The config kit, and a variable every service reads through it meaning one thing everywhere. */

describe('the config kit', () => {
  it('reads blank as unset, so the default holds', () => {
    expect(['', '  ', undefined].map(blankToUndefined)).toEqual([undefined, undefined, undefined]);
    expect(blankToUndefined(' x ')).toBe(' x ');
    const schema = z.object({ N: integer(5, 1, 10), S: text('d') });
    expect(parseEnv(schema, { N: ' ', S: '' })).toEqual({ N: 5, S: 'd' });
    expect(parseEnv(schema, { N: '7', S: 'e' })).toEqual({ N: 7, S: 'e' });
  });

  it('lists every problem of a bad environment, one a line', () => {
    const schema = z.object({ N: integer(5, 1, 10), T: kafkaName('T', 'topic') });
    expect(() => parseEnv(schema, { N: '11', T: 'a b' })).toThrow(/^Invalid configuration:\n {2}N: .*\n {2}T: T must be 1 to 249 of A-Z a-z 0-9 \. _ -$/);
  });

  it('takes PUSHBASE_SHUTDOWN_TIMEOUT_MS from 0 to 600000, 10000 when unset', () => {
    const schema = z.object(shutdownEnv);
    expect(parseEnv(schema, {}).PUSHBASE_SHUTDOWN_TIMEOUT_MS).toBe(10_000);
    expect(['0', '600000'].map((v) => parseEnv(schema, { PUSHBASE_SHUTDOWN_TIMEOUT_MS: v }).PUSHBASE_SHUTDOWN_TIMEOUT_MS)).toEqual([0, 600_000]);
    for (const bad of ['-1', '600001', '1.5', 'soon']) expect(() => parseEnv(schema, { PUSHBASE_SHUTDOWN_TIMEOUT_MS: bad })).toThrow(/PUSHBASE_SHUTDOWN_TIMEOUT_MS/);
  });
});

describe('PUSHBASE_SHUTDOWN_TIMEOUT_MS in every service', () => {
  const services: Record<string, (env: NodeJS.ProcessEnv) => { shutdownTimeoutMs: number }> = {
    embedded: loadConfig,
    gateway: (env) => loadGatewayConfig({ PUSHBASE_SCHEMA_ADDRESS: '127.0.0.1:1', PUSHBASE_RECORDS_ADDRESS: '127.0.0.1:2', ...env }),
    records: loadRecordsConfig,
    schema: loadSchemaConfig,
  };
  it.each(Object.keys(services))('%s: 0 to 600000, 10000 when unset or blank', (name) => {
    const load = services[name]!;
    expect([{}, { PUSHBASE_SHUTDOWN_TIMEOUT_MS: ' ' }, { PUSHBASE_SHUTDOWN_TIMEOUT_MS: '0' }, { PUSHBASE_SHUTDOWN_TIMEOUT_MS: '600000' }].map((env) => load(env).shutdownTimeoutMs)).toEqual([10_000, 10_000, 0, 600_000]);
    for (const bad of ['-1', '600001']) expect(() => load({ PUSHBASE_SHUTDOWN_TIMEOUT_MS: bad })).toThrow(/^Invalid configuration:\n {2}PUSHBASE_SHUTDOWN_TIMEOUT_MS: /);
  });
});

describe('the Kafka variables in every service that reads the topic', () => {
  const services: Record<string, (env: NodeJS.ProcessEnv) => unknown> = { projector: loadProjectorConfig, records: loadRecordsConfig, schema: loadSchemaConfig };
  it.each(Object.keys(services))('%s: brokers, topic and projector group checked alike', (name) => {
    const load = services[name]!;
    for (const variable of ['PUSHBASE_KAFKA_TOPIC', 'PUSHBASE_PROJECTOR_GROUP']) {
      expect(() => load({ [variable]: 'no spaces' })).toThrow(new RegExp(`^Invalid configuration:\\n {2}${variable}: ${variable} must be 1 to 249 of A-Z a-z 0-9 \\. _ -$`));
    }
    expect(() => load({ PUSHBASE_KAFKA_BROKERS: 'a:1,,b' })).toThrow(/^Invalid configuration:\n {2}PUSHBASE_KAFKA_BROKERS: /);
  });
});

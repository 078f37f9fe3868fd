import { z } from 'zod';
import { telemetryConfigOf, telemetryEnv } from '../src';

const parse = (env: Record<string, string>) => telemetryConfigOf(z.object(telemetryEnv).parse(env));

describe('telemetry settings', () => {
  it('are off by default, blank meaning unset', () => {
    expect(parse({ OTEL_TRACES_EXPORTER: ' ', PUSHBASE_LOG_LEVEL: '' })).toEqual({ logLevel: 'info', traces: { exporter: 'none', protocol: 'http/protobuf', serviceName: undefined } });
  });

  it('take the traces protocol before the general one', () => {
    expect(parse({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }).traces).toMatchObject({ exporter: 'otlp', protocol: 'http/json' });
  });

  it('refuse what they cannot honour, at start rather than at every export', () => {
    expect(() => parse({ OTEL_TRACES_EXPORTER: 'jaeger' })).toThrow(/OTEL_TRACES_EXPORTER/);
    expect(() => parse({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL/);
    expect(() => parse({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => parse({ PUSHBASE_LOG_LEVEL: 'verbose' })).toThrow(/PUSHBASE_LOG_LEVEL/);
  });
});

import { z } from 'zod';
import { blankToUndefined } from '@pushbase/config';

/*
 * The logging and tracing variables every service spreads into its one config schema (as metricsEnv).
 * Tracing is off unless OTEL_TRACES_EXPORTER says otherwise: where to send spans is the operator's choice,
 * and off, nothing but the OpenTelemetry API's no-op runs on the hot path. The exporter itself reads the
 * standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout); the SDK reads OTEL_TRACES_SAMPLER
 * and the OTEL_BSP_* batch settings. Unset and empty both mean "use the default".
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const PROTOCOLS = ['http/protobuf', 'http/json'] as const;

export const telemetryEnv = {
  // debug adds a line per HTTP request and per gRPC call (with request_id and trace_id).
  PUSHBASE_LOG_LEVEL: z.preprocess(blankToUndefined, z.enum(LOG_LEVELS).default('info')),
  // The standard variable, but "none" by default (the specification's default is otlp): no spans leave
  // a process unless asked. console writes them to stdout, for a look without a collector.
  OTEL_TRACES_EXPORTER: z.preprocess(blankToUndefined, z.enum(['none', 'otlp', 'console']).default('none')),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.preprocess(blankToUndefined, z.enum(PROTOCOLS).optional()),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.preprocess(blankToUndefined, z.enum(PROTOCOLS).optional()),
  // Checked here so that a typo fails the start instead of every export.
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.preprocess(blankToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess(blankToUndefined, z.url({ protocol: /^https?$/ }).optional()),
  OTEL_SERVICE_NAME: z.preprocess(blankToUndefined, z.string().optional()),
};

export interface TracesConfig {
  readonly exporter: 'none' | 'otlp' | 'console';
  readonly protocol: (typeof PROTOCOLS)[number];
  /** Overrides the resource's service.name (default pushbase-<service>, pushbase for the embedded server). */
  readonly serviceName: string | undefined;
}

export interface TelemetryConfig {
  readonly logLevel: LogLevel;
  readonly traces: TracesConfig;
}

interface TelemetryEnv {
  PUSHBASE_LOG_LEVEL: LogLevel;
  OTEL_TRACES_EXPORTER: TracesConfig['exporter'];
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?: TracesConfig['protocol'] | undefined;
  OTEL_EXPORTER_OTLP_PROTOCOL?: TracesConfig['protocol'] | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
}

export const telemetryConfigOf = (env: TelemetryEnv): TelemetryConfig =>
  Object.freeze({
    logLevel: env.PUSHBASE_LOG_LEVEL,
    traces: Object.freeze({
      exporter: env.OTEL_TRACES_EXPORTER,
      protocol: env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
      serviceName: env.OTEL_SERVICE_NAME,
    }),
  });

/** Off: what a service runs with when its caller passes no telemetry settings (tests, tools). */
export const TELEMETRY_OFF: TelemetryConfig = Object.freeze({ logLevel: 'info', traces: Object.freeze({ exporter: 'none', protocol: 'http/protobuf', serviceName: undefined }) });

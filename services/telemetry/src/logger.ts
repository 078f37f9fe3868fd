import { isSpanContextValid, trace } from '@opentelemetry/api';
import pino, { type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { LogLevel } from './config';
import { redactCredentials } from './redact';

/*
 * pushbase's one log format: pino's JSON lines on stdout, `{"level":"info","time":"<ISO>","service":…,
 * …fields,"msg":…}`. `level` is the label and `time` an ISO string (not pino's numbers) because that is
 * what the lines said before pino and what people grep for; launchers and tests read `msg` and the fields
 * (the "listening" line's ports), never the field order. Inside a traced span every line also carries
 * `trace_id` and `span_id`, so a line found in the logs leads to its trace and back.
 */

export type JsonLogger = PinoLogger;

export interface LoggerOptions {
  /** The `service` field of every line: gateway, schema, records, projector, pushbase (embedded), … */
  readonly service: string;
  readonly level?: LogLevel;
  /** Where lines go; stdout, written synchronously (a line is out before a crash), by default. */
  readonly destination?: DestinationStream;
}

/**
 * Never logged even if a caller passes them: credentials of the HTTP API (an Authorization header holds the
 * API key in Basic auth) and of the admin listener. The one key pushbase prints on purpose (a generated
 * key, shown once at the first start) is logged under `api_key`, which is left alone.
 */
const REDACT = ['authorization', '*.authorization', 'headers.authorization', '*.headers.authorization', 'cookie', '*.cookie', 'headers.cookie', '*.headers.cookie', 'password', '*.password', 'admin_token'];

/** The active span's ids, when a recording span is active (tracing on, inside a request). */
function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const sc = span.spanContext();
  return isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}

/** A service's logger; `.child({ request_id })` for the lines of one request. */
export function createLogger(options: LoggerOptions): JsonLogger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: options.service },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin: traceFields,
      redact: { paths: REDACT, censor: '[redacted]' },
      // A connection URL's password can hide inside any field or message (an error's text, a config dump).
      hooks: { streamWrite: redactCredentials },
    },
    options.destination ?? pino.destination({ fd: 1, sync: true }),
  );
}

/** The shape most of pushbase's components take: a level, a message, fields. */
export type LevelledLog = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;

/** The shape the embedded server's and the gateway's components take: a message and fields, at info. */
export type MessageLog = (msg: string, fields?: Record<string, unknown>) => void;

export const levelledLog =
  (logger: JsonLogger): LevelledLog =>
  (level, msg, fields) => {
    if (fields === undefined) logger[level](msg);
    else logger[level](fields, msg);
  };

/** Messages that start with "warning" (the embedded server's convention) are logged at warn. */
export const messageLog =
  (logger: JsonLogger): MessageLog =>
  (msg, fields) => {
    const level = msg.startsWith('warning') ? 'warn' : 'info';
    if (fields === undefined) logger[level](msg);
    else logger[level](fields, msg);
  };

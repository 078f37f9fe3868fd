import { Kafka, logLevel, type LogEntry, type logCreator } from 'kafkajs';

/*
 * How every pushbase Kafka client connects. The services' config.ts (one zod schema each) parse
 * PUSHBASE_KAFKA_BROKERS and friends and hand the result here; this package reads no environment.
 */

export type KafkaLogLevel = 'error' | 'warn' | 'info' | 'debug';

export interface KafkaConnection {
  /** `host:port` of one or more brokers. */
  readonly brokers: readonly string[];
  readonly clientId?: string;
  /** TCP connect timeout per attempt. Default 3000 ms. */
  readonly connectionTimeoutMs?: number;
  /** How long a request waits for its response. Default 30000 ms. */
  readonly requestTimeoutMs?: number;
  /**
   * kafkajs's retry of a failed request (and of connecting): `retries` attempts after the first, backing
   * off from `initialRetryTimeMs` (×2, capped at `maxRetryTimeMs`). Bounded on purpose, so a broker that
   * cannot be reached turns into an error within seconds instead of a request that hangs.
   * Default 5 retries from 200 ms, at most 3000 ms apart.
   */
  readonly retry?: { readonly retries?: number; readonly initialRetryTimeMs?: number; readonly maxRetryTimeMs?: number };
  /** Where kafkajs's log lines go. Default: stderr, warnings and errors only. */
  readonly log?: (level: KafkaLogLevel, message: string) => void;
  /** The lowest level passed to `log`. Default 'warn'. */
  readonly logLevel?: KafkaLogLevel;
}

/** `"a:9092, b:9092"` → `['a:9092', 'b:9092']`; refuses an empty list or an entry without a port. */
export function parseBrokers(list: string): string[] {
  const brokers = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (brokers.length === 0) throw new Error('No Kafka broker given: expected host:port[,host:port…]');
  for (const b of brokers) {
    if (!/^[^\s:]+:\d{1,5}$/.test(b) && !/^\[[0-9a-fA-F:.]+\]:\d{1,5}$/.test(b)) throw new Error(`Kafka broker ${JSON.stringify(b)} is not host:port`);
  }
  return brokers;
}

const LEVELS: Record<KafkaLogLevel, logLevel> = { error: logLevel.ERROR, warn: logLevel.WARN, info: logLevel.INFO, debug: logLevel.DEBUG };
const NAMES: Partial<Record<logLevel, KafkaLogLevel>> = { [logLevel.ERROR]: 'error', [logLevel.WARN]: 'warn', [logLevel.INFO]: 'info', [logLevel.DEBUG]: 'debug' };

const toStderr = (level: KafkaLogLevel, message: string): void => {
  process.stderr.write(`pushbase: kafka ${level}: ${message}\n`);
};

function logCreatorFor(connection: KafkaConnection): logCreator {
  const log = connection.log ?? toStderr;
  const threshold = LEVELS[connection.logLevel ?? 'warn'];
  return () =>
    ({ namespace, level, log: entry }: LogEntry) => {
      const { message, timestamp: _t, logger: _l, ...extra } = entry;
      const details = Object.keys(extra).length > 0 ? ` ${JSON.stringify(extra)}` : '';
      // Said once per producer, about a choice made on purpose and made safe (see appender.ts).
      const known = message.startsWith('Limiting retries for the idempotent producer');
      const effective = known ? logLevel.INFO : level;
      if (effective <= threshold) log(NAMES[effective] ?? 'info', `${namespace}: ${message}${details}`);
    };
}

/** A kafkajs client with pushbase's timeouts, bounded retries and logging. Cheap: it connects nothing yet. */
export function createKafka(connection: KafkaConnection): Kafka {
  const retry = connection.retry ?? {};
  return new Kafka({
    brokers: [...connection.brokers],
    clientId: connection.clientId ?? 'pushbase',
    connectionTimeout: connection.connectionTimeoutMs ?? 3000,
    requestTimeout: connection.requestTimeoutMs ?? 30_000,
    // Explicit, so the behaviour does not change with NODE_ENV (kafkajs picks other defaults under 'test').
    retry: {
      retries: retry.retries ?? 5,
      initialRetryTime: retry.initialRetryTimeMs ?? 200,
      maxRetryTime: retry.maxRetryTimeMs ?? 3000,
      multiplier: 2,
      factor: 0.2,
    },
    logLevel: LEVELS[connection.logLevel ?? 'warn'],
    logCreator: logCreatorFor(connection),
  });
}

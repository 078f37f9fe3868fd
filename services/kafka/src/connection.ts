import { Kafka, logLevel, type ISocketFactory, type LogEntry, type logCreator } from 'kafkajs';

/*
 * How every pushbase Kafka client connects. The services' config.ts (one zod schema each) parse
 * PUSHBASE_KAFKA_BROKERS and friends and hand the result here; this package reads no environment.
 */

export type KafkaLogLevel = 'error' | 'warn' | 'info' | 'debug';

/** kafkajs's lines as a service's own, under the message `kafka` (its debug lines as info). */
export const kafkaLogTo =
  (log: (level: 'info' | 'warn' | 'error', msg: string, fields: { message: string }) => void) =>
  (level: KafkaLogLevel, message: string): void =>
    log(level === 'error' ? 'error' : level === 'warn' ? 'warn' : 'info', 'kafka', { message });

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
  /** How sockets to brokers are made (kafkajs's seam): tests use it to cut connections mid-request. */
  readonly socketFactory?: ISocketFactory;
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

/**
 * kafkajs lines that are part of normal operation, demoted to info: the retry limit it warns about once per
 * producer is a choice made safe in appender.ts, and a broker's answer that kafkajs handles by retrying
 * (leadership moving, a group rebalancing) is logged per response as an error although nothing failed. When
 * the retries run out, the caller reports the failure itself (an append rejects, a consumer crashes).
 */
const RETRIED_RESPONSES = [
  'This server is not the leader for that topic-partition',
  'There is no leader for this topic-partition as we are in the middle of a leadership election',
  'The group is rebalancing, so a rejoin is needed',
  'The group coordinator is not available',
  'This is not the correct coordinator for this group',
  "The coordinator is loading and hence can't process requests for this group",
  // A transaction's coordinator still completing the previous commit (transactional-producer.ts retries).
  'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing',
];
function expected(namespace: string, message: string, extra: Record<string, unknown>): boolean {
  if (message.startsWith('Limiting retries for the idempotent producer')) return true;
  return namespace === 'Connection' && message.startsWith('Response ') && RETRIED_RESPONSES.some((m) => extra.error === m);
}

function logCreatorFor(connection: KafkaConnection): logCreator {
  const log = connection.log ?? toStderr;
  const threshold = LEVELS[connection.logLevel ?? 'warn'];
  return () =>
    ({ namespace, level, log: entry }: LogEntry) => {
      const { message, timestamp: _t, logger: _l, ...extra } = entry;
      const details = Object.keys(extra).length > 0 ? ` ${JSON.stringify(extra)}` : '';
      const effective = expected(namespace, message, extra) ? logLevel.INFO : level;
      if (effective <= threshold) log(NAMES[effective] ?? 'info', `${namespace}: ${message}${details}`);
    };
}

/**
 * kafkajs 2.2.4, its last release, sets a timer with a negative delay after every response while no broker
 * throttles (upstream issue 1751). Node has always run such a timer after 1 ms; since Node 24 it also prints
 * a TimeoutNegativeWarning, once per process, to stderr, where a CLI's clean stderr (`pushbase replay`)
 * reads it as a fault. That warning is dropped when kafkajs sets it; every other warning prints as before.
 */
let kafkajsTimerWarningDropped = false;
function dropKafkajsTimerWarning(): void {
  if (kafkajsTimerWarningDropped) return;
  kafkajsTimerWarningDropped = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = (...args: unknown[]) => {
    const options = args[1];
    const type = typeof options === 'string' ? options : (options as { type?: unknown } | undefined)?.type;
    // Only when a warning is emitted (once per process here): the stack says who set the timer.
    if (type === 'TimeoutNegativeWarning' && /[\\/]kafkajs[\\/]/.test(new Error().stack ?? '')) return;
    emit(...args);
  };
}

/** A kafkajs client with pushbase's timeouts, bounded retries and logging. Cheap: it connects nothing yet. */
export function createKafka(connection: KafkaConnection): Kafka {
  dropKafkajsTimerWarning();
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
    ...(connection.socketFactory ? { socketFactory: connection.socketFactory } : {}),
  });
}

import * as path from 'node:path';
import { z } from 'zod';

/*
 * Where the test and development servers live: one schema for the environment, parsed once by the command
 * (`npm run services:*`) or by jest's global setup. The URLs are the same variables the services read.
 */

const blankToUndefined = (v: unknown): unknown => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const text = (def: string) => z.preprocess(blankToUndefined, z.string().default(def));

const schema = z.object({
  PUSHBASE_KAFKA_BROKERS: text('127.0.0.1:9092'),
  PUSHBASE_CLICKHOUSE_URL: text('http://127.0.0.1:8123'),
  PUSHBASE_REDIS_URL: text('redis://127.0.0.1:6379'),
  PUSHBASE_SERVICES_DIR: z.preprocess(blankToUndefined, z.string().optional()),
  PUSHBASE_KAFKA_JARS_DIR: z.preprocess(blankToUndefined, z.string().optional()),
  PUSHBASE_TEST_SERVICES: z.preprocess(blankToUndefined, z.enum(['local', 'containers']).optional()),
});

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

export interface ServicesConfig {
  /** Data, logs, pid files and the Kafka jars: one git-ignored folder. */
  readonly dir: string;
  /**
   * Where Kafka's jars are collected (`<dir>/kafka-<version>` by default). A private set of servers in a
   * temporary folder (the fault tests) points it at a lasting folder, so Maven collects them once.
   */
  readonly kafkaJarsDir: string | undefined;
  /** undefined: containers where a Docker engine is reachable, else local processes. */
  readonly mode: 'local' | 'containers' | undefined;
  readonly kafka: Endpoint & { readonly controllerPort: number };
  readonly clickhouse: Endpoint & { readonly tcpPort: number; readonly interserverPort: number };
  readonly redis: Endpoint;
}

function hostPort(raw: string, what: string): Endpoint {
  // `new URL` needs a scheme; a broker list entry is bare host:port.
  const url = new URL(raw.includes('://') ? raw : `tcp://${raw}`);
  const port = Number(url.port);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`${what}: ${raw} names no port`);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Parses the environment; rejects anything but loopback addresses, the only place these servers listen. */
export function readServicesConfig(env: NodeJS.ProcessEnv, repoRoot: string): ServicesConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'config'}: ${i.message}`).join('\n  ');
    throw new Error(`Invalid services configuration:\n  ${problems}`);
  }
  const c = parsed.data;
  const brokers = c.PUSHBASE_KAFKA_BROKERS.split(',').map((b) => b.trim()).filter((b) => b !== '');
  if (brokers.length !== 1) throw new Error(`PUSHBASE_KAFKA_BROKERS: the local Kafka is one node; got ${c.PUSHBASE_KAFKA_BROKERS}`);
  const kafka = hostPort(brokers[0]!, 'PUSHBASE_KAFKA_BROKERS');
  const clickhouse = hostPort(c.PUSHBASE_CLICKHOUSE_URL, 'PUSHBASE_CLICKHOUSE_URL');
  const redis = hostPort(c.PUSHBASE_REDIS_URL, 'PUSHBASE_REDIS_URL');
  for (const [name, e] of [['PUSHBASE_KAFKA_BROKERS', kafka], ['PUSHBASE_CLICKHOUSE_URL', clickhouse], ['PUSHBASE_REDIS_URL', redis]] as const) {
    if (!isLoopback(e.host)) throw new Error(`${name}: local servers listen on loopback only, not on ${e.host}`);
  }
  // ClickHouse's defaults (HTTP 8123, native 9000, interserver 9009) when its HTTP port is the default;
  // moved together, next to the HTTP port, when it is not, so a second server never collides with the first.
  const chDefault = clickhouse.port === 8123;
  return {
    dir: path.resolve(repoRoot, c.PUSHBASE_SERVICES_DIR ?? '.services'),
    kafkaJarsDir: c.PUSHBASE_KAFKA_JARS_DIR === undefined ? undefined : path.resolve(repoRoot, c.PUSHBASE_KAFKA_JARS_DIR),
    mode: c.PUSHBASE_TEST_SERVICES,
    // KRaft's controller listener sits right above the broker port (9093 for 9092).
    kafka: { ...kafka, controllerPort: kafka.port + 1 },
    clickhouse: { ...clickhouse, tcpPort: chDefault ? 9000 : clickhouse.port + 1, interserverPort: chDefault ? 9009 : clickhouse.port + 2 },
    redis,
  };
}

/** The URLs the services and tests read, for servers at these endpoints. */
export function serviceUrls(c: Pick<ServicesConfig, 'kafka' | 'clickhouse' | 'redis'>): Record<'PUSHBASE_KAFKA_BROKERS' | 'PUSHBASE_CLICKHOUSE_URL' | 'PUSHBASE_REDIS_URL', string> {
  const at = (e: Endpoint): string => `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`;
  return {
    PUSHBASE_KAFKA_BROKERS: at(c.kafka),
    PUSHBASE_CLICKHOUSE_URL: `http://${at(c.clickhouse)}`,
    PUSHBASE_REDIS_URL: `redis://${at(c.redis)}`,
  };
}

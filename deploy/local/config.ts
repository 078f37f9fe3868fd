import * as path from 'node:path';
import { z } from 'zod';
import { blankToUndefined, text } from '@pushbase/config';

/*
 * Where the test and development servers live: one schema for the environment, parsed once by the command
 * (`npm run services:*`) or by jest's global setup. The URLs are the same variables the services read.
 */


/**
 * The Kafka `services:up` and the tests run: the newest 4.x whose jars the Maven registry serves.
 * docs/kafka.md lists the versions tested and what changed between them.
 */
export const DEFAULT_KAFKA_VERSION = '4.4.0';
/**
 * The older line still supported (clusters not yet on 4.x): the Kafka suites run on it too, against a
 * second broker (the int-kafka-3.9 jest project).
 */
export const DEFAULT_LEGACY_KAFKA_VERSION = '3.9.2';

// 3.9 is the last line with KRaft and the storage tool pushbase formats with, and 4.x runs nothing else;
// a 5.x may move the broker's main classes or logging again, so it is refused until tried.
const kafkaVersion = (def: string, line: RegExp, lines: string) =>
  text(def).refine((v) => line.test(v), { message: `must be a released Apache Kafka version of ${lines} (x.y.z)` });

const schema = z.object({
  PUSHBASE_KAFKA_BROKERS: text('127.0.0.1:9092'),
  PUSHBASE_CLICKHOUSE_URL: text('http://127.0.0.1:8123'),
  PUSHBASE_REDIS_URL: text('redis://127.0.0.1:6379'),
  PUSHBASE_SERVICES_DIR: z.preprocess(blankToUndefined, z.string().optional()),
  PUSHBASE_KAFKA_JARS_DIR: z.preprocess(blankToUndefined, z.string().optional()),
  PUSHBASE_KAFKA_VERSION: kafkaVersion(DEFAULT_KAFKA_VERSION, /^(3\.9|4\.\d{1,2})\.\d{1,2}$/, '3.9 or 4.x'),
  PUSHBASE_KAFKA_LEGACY_VERSION: kafkaVersion(DEFAULT_LEGACY_KAFKA_VERSION, /^3\.9\.\d{1,2}$/, '3.9'),
  PUSHBASE_KAFKA_LEGACY_BROKERS: text('127.0.0.1:9192'),
  PUSHBASE_TEST_SERVICES: z.preprocess(blankToUndefined, z.enum(['local', 'containers']).optional()),
});

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

export interface ServicesConfig {
  /** Data, logs, pid files and the Kafka jars: one git-ignored folder. */
  readonly dir: string;
  /** The Apache Kafka release to run (PUSHBASE_KAFKA_VERSION). */
  readonly kafkaVersion: string;
  /**
   * Where Kafka's jars are collected (`<dir>/kafka-<version>` by default). A private set of servers in a
   * temporary folder (the fault tests) points it at a lasting folder, so Maven collects them once.
   */
  readonly kafkaJarsDir: string | undefined;
  /** undefined: containers where a Docker engine is reachable, else local processes. */
  readonly mode: 'local' | 'containers' | undefined;
  readonly kafka: KafkaEndpoint;
  readonly clickhouse: Endpoint & { readonly tcpPort: number; readonly interserverPort: number };
  readonly redis: Endpoint;
  /** The second, 3.9.x broker of the int-kafka-3.9 jest project (PUSHBASE_KAFKA_LEGACY_*). */
  readonly legacyKafka: { readonly version: string; readonly endpoint: KafkaEndpoint };
  /**
   * A second Kafka listener, named HOST, advertised at its own address. Never set from the environment:
   * deploy/cluster's broker serves the pods on the node's address and the host through a loopback bridge.
   */
  readonly kafkaHostListener?: Endpoint;
}

export type KafkaEndpoint = Endpoint & { readonly controllerPort: number };

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
  const kafka = oneBroker(c.PUSHBASE_KAFKA_BROKERS, 'PUSHBASE_KAFKA_BROKERS');
  const legacyKafka = oneBroker(c.PUSHBASE_KAFKA_LEGACY_BROKERS, 'PUSHBASE_KAFKA_LEGACY_BROKERS');
  const clickhouse = hostPort(c.PUSHBASE_CLICKHOUSE_URL, 'PUSHBASE_CLICKHOUSE_URL');
  const redis = hostPort(c.PUSHBASE_REDIS_URL, 'PUSHBASE_REDIS_URL');
  const all = [
    ['PUSHBASE_KAFKA_BROKERS', kafka],
    ['PUSHBASE_KAFKA_LEGACY_BROKERS', legacyKafka],
    ['PUSHBASE_CLICKHOUSE_URL', clickhouse],
    ['PUSHBASE_REDIS_URL', redis],
  ] as const;
  for (const [name, e] of all) {
    if (!isLoopback(e.host)) throw new Error(`${name}: local servers listen on loopback only, not on ${e.host}`);
  }
  // ClickHouse's defaults (HTTP 8123, native 9000, interserver 9009) when its HTTP port is the default;
  // moved together, next to the HTTP port, when it is not, so a second server never collides with the first.
  const chDefault = clickhouse.port === 8123;
  return {
    dir: path.resolve(repoRoot, c.PUSHBASE_SERVICES_DIR ?? '.services'),
    kafkaVersion: c.PUSHBASE_KAFKA_VERSION,
    kafkaJarsDir: c.PUSHBASE_KAFKA_JARS_DIR === undefined ? undefined : path.resolve(repoRoot, c.PUSHBASE_KAFKA_JARS_DIR),
    mode: c.PUSHBASE_TEST_SERVICES,
    // KRaft's controller listener sits right above the broker port (9093 for 9092).
    kafka: { ...kafka, controllerPort: kafka.port + 1 },
    clickhouse: { ...clickhouse, tcpPort: chDefault ? 9000 : clickhouse.port + 1, interserverPort: chDefault ? 9009 : clickhouse.port + 2 },
    redis,
    legacyKafka: { version: c.PUSHBASE_KAFKA_LEGACY_VERSION, endpoint: { ...legacyKafka, controllerPort: legacyKafka.port + 1 } },
  };
}

function oneBroker(list: string, what: string): Endpoint {
  const brokers = list.split(',').map((b) => b.trim()).filter((b) => b !== '');
  if (brokers.length !== 1) throw new Error(`${what}: the local Kafka is one node; got ${list}`);
  return hostPort(brokers[0]!, what);
}

/**
 * The services folder of the legacy broker: `<dir>/legacy`, its own `kafka/` (data, logs, pid) and lock,
 * run by the same code as the main one (`up(…, ['kafka'])`); its jars sit beside the main ones, in
 * `<dir>/kafka-<version>`, where a main broker of that version would find them too.
 */
export function legacyKafkaConfig(c: ServicesConfig): ServicesConfig {
  const { version, endpoint } = c.legacyKafka;
  if (endpoint.port === c.kafka.port || endpoint.port === c.kafka.controllerPort || endpoint.controllerPort === c.kafka.port) {
    throw new Error(`PUSHBASE_KAFKA_LEGACY_BROKERS (port ${endpoint.port}) collides with PUSHBASE_KAFKA_BROKERS (port ${c.kafka.port}, controller ${c.kafka.controllerPort})`);
  }
  return { ...c, dir: path.join(c.dir, 'legacy'), kafkaVersion: version, kafkaJarsDir: path.join(c.dir, `kafka-${version}`), kafka: endpoint };
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

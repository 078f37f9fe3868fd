import { GenericContainer, getContainerRuntimeClient, RandomPortGenerator, Wait, type StartedTestContainer } from 'testcontainers';
import { DEFAULT_KAFKA_VERSION } from './config';

/*
 * The same three servers as Docker containers, for machines with a Docker engine. Each gets a random host
 * port; the URLs are handed to the tests exactly as the local path hands its own. testcontainers' reaper
 * removes them when the test run's process ends, even if it ends without a teardown.
 */

/** Apache's own image of a Kafka release (deploy/compose.yaml runs the default one). */
export const kafkaImage = (version: string): string => `apache/kafka:${version}`;
export const KAFKA_IMAGE = kafkaImage(DEFAULT_KAFKA_VERSION);
/** The current ClickHouse the tests prove through chDB (docs/clickhouse.md); the SQL runs on it and on Debian's 18.16. */
export const CLICKHOUSE_IMAGE = 'clickhouse/clickhouse-server:26.7';
export const REDIS_IMAGE = 'redis:7.4';

export interface StartedContainers {
  readonly urls: Record<'PUSHBASE_KAFKA_BROKERS' | 'PUSHBASE_CLICKHOUSE_URL' | 'PUSHBASE_REDIS_URL', string>;
  /** The second, older broker's address, when one was asked for. */
  readonly legacyKafkaBrokers: string | undefined;
  stop(): Promise<void>;
}

export interface ContainersOptions {
  readonly kafkaVersion: string;
  /** Also a second broker of this (older) release, for the int-kafka-3.9 jest project. */
  readonly legacyKafkaVersion?: string | undefined;
}

/** True when testcontainers finds a container runtime (DOCKER_HOST, the Docker socket, …). */
export async function dockerEngineReachable(): Promise<boolean> {
  try {
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function startKafka(version: string): Promise<{ container: StartedTestContainer; brokers: string }> {
  // A client must reach the broker at the address it advertises, which has to be known before the broker
  // starts: so the host port is chosen first and bound to the container's listener, not left to Docker.
  const hostPort = await new RandomPortGenerator().generatePort();
  const client = await getContainerRuntimeClient();
  const host = client.info.containerRuntime.host;
  const container = await new GenericContainer(kafkaImage(version))
    .withExposedPorts({ container: 9092, host: hostPort })
    .withEnvironment({
      KAFKA_NODE_ID: '1',
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
      KAFKA_LISTENERS: 'PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093',
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${hostPort}`,
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
      KAFKA_INTER_BROKER_LISTENER_NAME: 'PLAINTEXT',
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
      KAFKA_DEFAULT_REPLICATION_FACTOR: '1',
      KAFKA_MIN_INSYNC_REPLICAS: '1',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
      KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS: '10',
      KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS: '10',
      KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
      KAFKA_HEAP_OPTS: '-Xms1g -Xmx1g',
    })
    .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
    .withStartupTimeout(180_000)
    .start();
  return { container, brokers: `${host}:${hostPort}` };
}

async function startClickHouse(): Promise<{ container: StartedTestContainer; url: string }> {
  const container = await new GenericContainer(CLICKHOUSE_IMAGE)
    .withExposedPorts(8123)
    // The image's entry point gives the passwordless default user network access only when told to.
    .withEnvironment({ CLICKHOUSE_SKIP_USER_SETUP: '1' })
    .withUlimits({ nofile: { soft: 262144, hard: 262144 } })
    .withWaitStrategy(Wait.forHttp('/ping', 8123).forStatusCode(200))
    .withStartupTimeout(120_000)
    .start();
  return { container, url: `http://${container.getHost()}:${container.getMappedPort(8123)}` };
}

async function startRedis(): Promise<{ container: StartedTestContainer; url: string }> {
  const container = await new GenericContainer(REDIS_IMAGE)
    .withExposedPorts(6379)
    .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
    .withStartupTimeout(60_000)
    .start();
  return { container, url: `redis://${container.getHost()}:${container.getMappedPort(6379)}` };
}

export async function startContainers(opts: ContainersOptions): Promise<StartedContainers> {
  const legacy = opts.legacyKafkaVersion;
  const [main, legacyResult] = await Promise.all([
    Promise.allSettled([startKafka(opts.kafkaVersion), startClickHouse(), startRedis()]),
    legacy === undefined ? Promise.resolve(undefined) : Promise.allSettled([startKafka(legacy)]).then(([r]) => r),
  ]);
  const results = legacyResult === undefined ? main : [...main, legacyResult];
  const containers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.container] : []));
  const stop = async (): Promise<void> => {
    await Promise.all(containers.map((c) => c.stop()));
  };
  const [kafka, clickhouse, redis] = main;
  if (kafka?.status !== 'fulfilled' || clickhouse?.status !== 'fulfilled' || redis?.status !== 'fulfilled' || legacyResult?.status === 'rejected') {
    await stop();
    const why = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
    throw new Error(`containers did not start:\n${why.join('\n')}`);
  }
  return {
    urls: { PUSHBASE_KAFKA_BROKERS: kafka.value.brokers, PUSHBASE_CLICKHOUSE_URL: clickhouse.value.url, PUSHBASE_REDIS_URL: redis.value.url },
    legacyKafkaBrokers: legacyResult?.status === 'fulfilled' ? legacyResult.value.brokers : undefined,
    stop,
  };
}

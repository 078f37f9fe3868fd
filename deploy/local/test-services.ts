import { legacyKafkaConfig, readServicesConfig, serviceUrls } from './config';
import { dockerEngineReachable, startContainers } from './containers';
import { down, up, type Say } from './local-servers';

/*
 * What jest's global setup calls: Kafka, ClickHouse and Redis answering before any suite runs, as
 * containers (PUSHBASE_TEST_SERVICES=containers, the default where a Docker engine is reachable) or as
 * local processes (local, the default elsewhere). The URLs it returns are what the tests must use; `stop`
 * stops only what this run started, never a server that already answered.
 */

export type ServiceUrls = Record<'PUSHBASE_KAFKA_BROKERS' | 'PUSHBASE_CLICKHOUSE_URL' | 'PUSHBASE_REDIS_URL', string>;

export interface TestServicesOptions {
  /**
   * Also the second, older Kafka (PUSHBASE_KAFKA_LEGACY_VERSION, 3.9.x) that the int-kafka-3.9 project
   * runs the Kafka suites against, started beside the others.
   */
  readonly legacyKafka?: boolean;
}

export interface TestServices {
  readonly mode: 'local' | 'containers';
  readonly urls: ServiceUrls;
  /** The legacy broker's address and release, when it was asked for. */
  readonly legacyKafka: { readonly brokers: string; readonly version: string } | undefined;
  /** What this run started ("kafka", …, "legacy kafka", or "containers"); empty when everything already answered. */
  readonly started: readonly string[];
  stop(): Promise<void>;
}

export async function startTestServices(env: NodeJS.ProcessEnv, repoRoot: string, say: Say, opts: TestServicesOptions = {}): Promise<TestServices> {
  const config = readServicesConfig(env, repoRoot);
  let mode = config.mode;
  if (mode === undefined) {
    mode = (await dockerEngineReachable()) ? 'containers' : 'local';
  }
  const legacyVersion = opts.legacyKafka === true ? config.legacyKafka.version : undefined;
  if (mode === 'containers') {
    const containers = await startContainers({ kafkaVersion: config.kafkaVersion, legacyKafkaVersion: legacyVersion });
    const legacyKafka = legacyVersion === undefined || containers.legacyKafkaBrokers === undefined ? undefined : { brokers: containers.legacyKafkaBrokers, version: legacyVersion };
    return { mode, urls: containers.urls, legacyKafka, started: ['containers'], stop: () => containers.stop() };
  }
  const legacy = legacyVersion === undefined ? undefined : legacyKafkaConfig(config);
  // Side by side: each JVM spends most of its start waiting on itself, not on the other.
  const [main, old] = await Promise.allSettled([up(config, say), legacy === undefined ? Promise.resolve([]) : up(legacy, say, ['kafka'])]);
  if (main.status === 'rejected' || old.status === 'rejected') {
    // Stop whichever did start; `up` already stopped what it started before failing.
    if (main.status === 'fulfilled') await down(config, say, main.value);
    if (legacy !== undefined && old.status === 'fulfilled') await down(legacy, say, old.value);
    const why = [main, old].flatMap((r) => (r.status === 'rejected' ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    throw new Error(why.join('\n\n'));
  }
  return {
    mode,
    urls: serviceUrls(config),
    legacyKafka: legacy === undefined ? undefined : { brokers: serviceUrls(legacy).PUSHBASE_KAFKA_BROKERS, version: legacy.kafkaVersion },
    started: [...main.value, ...old.value.map((n) => `legacy ${n}`)],
    stop: async () => {
      await down(config, say, main.value);
      if (legacy !== undefined) await down(legacy, say, old.value);
    },
  };
}

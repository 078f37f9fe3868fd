import { readServicesConfig, serviceUrls } from './config';
import { dockerEngineReachable, startContainers } from './containers';
import { down, up, type Say } from './local-servers';

/*
 * What jest's global setup calls: Kafka, ClickHouse and Redis answering before any suite runs, as
 * containers (PUSHBASE_TEST_SERVICES=containers, the default where a Docker engine is reachable) or as
 * local processes (local, the default elsewhere). The URLs it returns are what the tests must use; `stop`
 * stops only what this run started, never a server that already answered.
 */

export type ServiceUrls = Record<'PUSHBASE_KAFKA_BROKERS' | 'PUSHBASE_CLICKHOUSE_URL' | 'PUSHBASE_REDIS_URL', string>;

export interface TestServices {
  readonly mode: 'local' | 'containers';
  readonly urls: ServiceUrls;
  /** What this run started ("kafka", …, or "containers"); empty when everything already answered. */
  readonly started: readonly string[];
  stop(): Promise<void>;
}

export async function startTestServices(env: NodeJS.ProcessEnv, repoRoot: string, say: Say): Promise<TestServices> {
  const config = readServicesConfig(env, repoRoot);
  let mode = config.mode;
  if (mode === undefined) {
    mode = (await dockerEngineReachable()) ? 'containers' : 'local';
  }
  if (mode === 'containers') {
    const containers = await startContainers();
    return { mode, urls: containers.urls, started: ['containers'], stop: () => containers.stop() };
  }
  const started = await up(config, say);
  return {
    mode,
    urls: serviceUrls(config),
    started,
    stop: async () => {
      await down(config, say, started);
    },
  };
}

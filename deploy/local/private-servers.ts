import { mkdtemp, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { kafkaJarsDir } from './kafka';
import { down, status, up, type Say } from './local-servers';
import type { ServerName } from './server';
import { readServicesConfig, serviceUrls, type ServicesConfig } from './config';
import { freePort } from './ports';

/*
 * A private Kafka, ClickHouse and Redis for tests that stop servers (the fault tests): local processes in a
 * temporary folder on free loopback ports, so the shared servers on the default ports are never touched.
 * One server can be stopped (SIGTERM, or SIGKILL as a crash) and started again on the same data, by the pid
 * this folder recorded; `close` stops all three and removes the folder.
 */

export type ServiceUrls = ReturnType<typeof serviceUrls>;

export interface PrivateServers {
  readonly config: ServicesConfig;
  /** PUSHBASE_KAFKA_BROKERS, PUSHBASE_CLICKHOUSE_URL, PUSHBASE_REDIS_URL of this set. */
  readonly urls: ServiceUrls;
  /** The running server's pid, or undefined when it is stopped. */
  pid(name: ServerName): Promise<number | undefined>;
  /** Stops one server and waits until its process has exited. */
  stop(name: ServerName, signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Starts a stopped server again on its data and waits until it answers. */
  start(name: ServerName): Promise<void>;
  /** Stops every server of the set and removes its folder. */
  close(): Promise<void>;
}

export interface PrivateServersOptions {
  /** The folder to make the temporary one in. */
  readonly parentDir: string;
  /** A lasting folder for Kafka's jars, so Maven collects them once, not once per set. */
  readonly kafkaJarsDir: string;
  /** The Kafka release to run: by default PUSHBASE_KAFKA_VERSION's, the one the rest of the run uses. */
  readonly kafkaVersion?: string;
  readonly say?: Say;
}

export async function startPrivateServers(opts: PrivateServersOptions): Promise<PrivateServers> {
  const say = opts.say ?? ((): void => undefined);
  const dir = await mkdtemp(path.join(opts.parentDir, 'private-servers-'));
  const [kafka, clickhouse, redis] = [await freePort(2), await freePort(3), await freePort()];
  const config = readServicesConfig(
    {
      PUSHBASE_SERVICES_DIR: dir,
      PUSHBASE_KAFKA_JARS_DIR: opts.kafkaJarsDir,
      PUSHBASE_KAFKA_VERSION: opts.kafkaVersion ?? process.env.PUSHBASE_KAFKA_VERSION,
      PUSHBASE_KAFKA_BROKERS: `127.0.0.1:${kafka}`,
      PUSHBASE_CLICKHOUSE_URL: `http://127.0.0.1:${clickhouse}`,
      PUSHBASE_REDIS_URL: `redis://127.0.0.1:${redis}`,
    },
    dir,
  );
  const close = async (): Promise<void> => {
    await down(config, say).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const started = await up(config, say);
    // A server answering already on a port just found free belongs to someone else: never use it.
    if (started.length !== 3) throw new Error(`a private server's port was taken meanwhile (started only ${started.join(', ')})`);
  } catch (e) {
    await close();
    throw e;
  }
  return {
    config,
    urls: serviceUrls(config),
    pid: async (name) => (await status(config)).find((s) => s.name === name)?.pid,
    stop: async (name, signal = 'SIGTERM') => {
      const stopped = await down(config, say, [name], { signal });
      if (stopped.length !== 1) throw new Error(`${name} of ${dir} was not running`);
    },
    start: async (name) => {
      const started = await up(config, say, [name]);
      if (started.length !== 1) throw new Error(`${name} of ${dir} was already running`);
    },
    close,
  };
}

/** The lasting jars folder of `env`'s services folder and Kafka version: `<repo>/.services/kafka-<version>`. */
export function defaultKafkaJarsDir(env: NodeJS.ProcessEnv, repoRoot: string): string {
  return kafkaJarsDir(readServicesConfig(env, repoRoot));
}

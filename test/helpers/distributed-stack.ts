import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectClickHouse, dropDatabase } from '@pushbase/clickhouse';
import { createKafka, defaultAccountsTopic, parseBrokers } from '@pushbase/kafka';
import { openRedis } from '@pushbase/redis';
import { DistributedStack, type ServiceExit, type ServiceName } from '../../services/cli/src/distributed';
import { BUNDLE, ROOT } from './server';

/*
 * The four-process stack (the supervisor of `npm run start:distributed`) for tests and the benchmark, on
 * names of its own — a random topic, ClickHouse database, Redis prefix and projector group — on the servers
 * it is given (the shared ones of the test run by default, a private set for the fault tests). Shaped like
 * TestServer where the fault workload needs it (port, ca, adminPort, adminToken), so one workload drives
 * both. `drop` removes the names from the servers afterwards.
 */

export interface ServerUrls {
  readonly PUSHBASE_KAFKA_BROKERS: string;
  readonly PUSHBASE_CLICKHOUSE_URL: string;
  readonly PUSHBASE_REDIS_URL: string;
}

export interface TestStackOptions {
  /** account → API key. */
  readonly keys: Readonly<Record<string, string>>;
  /** Kafka, ClickHouse and Redis; the test run's (process.env) by default. */
  readonly servers?: ServerUrls;
  /** More environment for every service (limits, projector settings, …). */
  readonly env?: Readonly<Record<string, string>>;
  /** Node flags per service (e.g. --cpu-prof). */
  readonly nodeArgs?: Partial<Record<ServiceName, readonly string[]>>;
  /** Every line every process writes, with its service's name. */
  readonly onLine?: (service: string, line: string) => void;
  readonly readyTimeoutMs?: number;
  /**
   * Each service in a session of its own, as `npm run start:distributed` starts them (the benchmark). On
   * Linux a session is also a scheduling group (autogroup): without it the four services share one
   * group's share of the CPU, against the servers' groups, unlike any deployment.
   */
  readonly detached?: boolean;
}

export const serverUrlsOf = (env: NodeJS.ProcessEnv): ServerUrls => ({
  PUSHBASE_KAFKA_BROKERS: env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092',
  PUSHBASE_CLICKHOUSE_URL: env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123',
  PUSHBASE_REDIS_URL: env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379',
});

export class TestStack {
  readonly adminToken = randomBytes(18).toString('base64url');
  readonly names: { readonly topic: string; readonly database: string; readonly redisPrefix: string; readonly group: string };
  /** The last lines of every service, for a failure message. */
  readonly output: string[] = [];
  /** Services that exited without being asked to. */
  readonly unexpectedExits: { service: ServiceName; exit: ServiceExit }[] = [];
  ca = '';
  private stack: DistributedStack | undefined;
  private readonly dataDir: string;
  readonly servers: ServerUrls;

  constructor(private readonly opts: TestStackOptions) {
    const id = randomBytes(5).toString('hex');
    this.names = { topic: `pb-stack-${id}`, database: `pb_stack_${id}`, redisPrefix: `pb-stack-${id}:`, group: `pb-stack-${id}` };
    this.servers = opts.servers ?? serverUrlsOf(process.env);
    this.dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-stack-'));
  }

  get port(): number {
    return this.running.gateway.port;
  }
  get adminPort(): number {
    return this.running.gateway.adminPort;
  }
  get running(): DistributedStack {
    if (this.stack === undefined) throw new Error('the stack is not started');
    return this.stack;
  }

  /** The environment every service gets. */
  get env(): Record<string, string> {
    return {
      ...this.servers,
      PUSHBASE_KAFKA_TOPIC: this.names.topic,
      PUSHBASE_CLICKHOUSE_DATABASE: this.names.database,
      PUSHBASE_REDIS_PREFIX: this.names.redisPrefix,
      PUSHBASE_PROJECTOR_GROUP: this.names.group,
      PUSHBASE_PORT: '0',
      PUSHBASE_HOST: '127.0.0.1',
      PUSHBASE_ADMIN_PORT: '0',
      PUSHBASE_ADMIN_TOKEN: this.adminToken,
      PUSHBASE_DATA_DIR: this.dataDir,
      PUSHBASE_API_KEYS: Object.entries(this.opts.keys)
        .map(([account, key]) => `${key}:${account}`)
        .join(','),
      ...this.opts.env,
    };
  }

  async start(): Promise<this> {
    this.stack = await DistributedStack.start({
      bundle: BUNDLE,
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      readyTimeoutMs: this.opts.readyTimeoutMs ?? 120_000,
      ...(this.opts.detached === undefined ? {} : { detached: this.opts.detached }),
      ...(this.opts.nodeArgs === undefined ? {} : { nodeArgs: this.opts.nodeArgs }),
      onLine: (service, line) => {
        this.output.push(`${service}: ${line}`);
        if (this.output.length > 400) this.output.splice(0, 100);
        this.opts.onLine?.(service, line);
      },
      onUnexpectedExit: (service, exit) => this.unexpectedExits.push({ service, exit }),
    });
    const certFile = this.stack.gateway.certFile;
    if (certFile === null) throw new Error('the gateway serves plain HTTP; the tests expect its own certificate');
    this.ca = readFileSync(certFile, 'utf8');
    return this;
  }

  pid(service: ServiceName): number | undefined {
    return this.stack?.pid(service);
  }
  kill(service: ServiceName): Promise<ServiceExit> {
    return this.running.kill(service);
  }
  signal(service: ServiceName, sig: NodeJS.Signals): Promise<ServiceExit> {
    return this.running.signal(service, sig);
  }
  /** Every running service gets `sig` at once (DistributedStack.signalAllNow): for an exit handler. */
  signalAllNow(sig: NodeJS.Signals): void {
    this.stack?.signalAllNow(sig);
  }
  restart(service: ServiceName): Promise<void> {
    return this.running.restart(service);
  }

  /** Stops every service in order (SIGTERM); the names stay on the servers until `drop`. */
  async stop(): Promise<void> {
    await this.stack?.stop();
  }

  /** Removes the stack's topic, database and Redis keys from the servers, and its data folder. */
  async drop(): Promise<void> {
    const admin = createKafka({ brokers: parseBrokers(this.servers.PUSHBASE_KAFKA_BROKERS), clientId: 'pushbase-test-stack' }).admin();
    try {
      await admin.connect();
      await admin.deleteTopics({ topics: [this.names.topic, defaultAccountsTopic(this.names.topic)] }).catch(() => undefined);
    } finally {
      await admin.disconnect();
    }
    const conn = connectClickHouse(this.servers.PUSHBASE_CLICKHOUSE_URL);
    try {
      for (const db of [this.names.database, `${this.names.database}_views`]) await dropDatabase(conn, db);
    } finally {
      await conn.close();
    }
    const redis = await openRedis(this.servers.PUSHBASE_REDIS_URL);
    try {
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${this.names.redisPrefix}*`, 'COUNT', 1000);
        cursor = next;
        if (found.length > 0) await redis.del(...found);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

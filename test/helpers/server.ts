import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest, type RequestOptions as HttpsRequestOptions } from 'node:https';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createKafka, parseBrokers } from '@pushbase/kafka';
import type { Admin } from 'kafkajs';
import { DistributedStack, SERVICES, ServiceProcess, type ServiceExit } from '../../services/cli/src/distributed';
import { HighWatermarks } from './high-watermarks';
import { CLUSTER_GROUP, CLUSTER_TOPIC, clusterEndpoints, portOf, provisionAccounts, servedCertificate, translatePath } from './cluster-target';
import { stackNamesOf, type StackNames } from './stack-names';
import { eventually } from './eventually';

export const ROOT = path.resolve(__dirname, '../..');
/** The bundle that `npm start` runs; jest's global setup builds it fresh for every test run. */
export const BUNDLE = path.join(ROOT, 'dist/pushbase.js');

/**
 * Which pushbase a TestServer starts: `pushbase serve` (embedded, the default), or the four services of
 * `npm run start:distributed` as separate processes when PUSHBASE_E2E_MODE is `distributed` (the jest
 * project e2e-distributed sets it). The e2e suites run unchanged against both.
 */
export type E2EMode = 'embedded' | 'distributed' | 'cluster';
export const E2E_MODE: E2EMode = process.env.PUSHBASE_E2E_MODE === 'distributed' || process.env.PUSHBASE_E2E_MODE === 'cluster' ? process.env.PUSHBASE_E2E_MODE : 'embedded';

export interface ServerOptions {
  /** Reuse a data directory (restart tests); a fresh temporary one otherwise. */
  readonly dataDir?: string;
  /** account → API key; two accounts by default. */
  readonly keys?: Record<string, string>;
  readonly env?: Record<string, string>;
  /** How long `start()` waits for the "listening" line; 30 s by default (a big log replays longer; distributed: at least 120 s for the four services). */
  readonly startTimeoutMs?: number;
  /** Which pushbase to start; E2E_MODE (the jest project's) by default. */
  readonly mode?: E2EMode;
  /** Extra node flags for the server process, e.g. `--cpu-prof` (not allowed in NODE_OPTIONS). */
  readonly nodeArgs?: readonly string[];
}

export interface Response {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  readonly body: any;
}

export interface RequestOptions {
  /** API key for Basic auth; omit for no Authorization header. */
  readonly key?: string;
  /** Serialised as JSON unless `raw` is given. */
  readonly body?: unknown;
  readonly raw?: string | Buffer;
  readonly headers?: Record<string, string>;
}

/**
 * A second gateway process on a distributed TestServer's stack: the same services, Redis prefix and
 * certificate, its own ports (`ready.port`, `ready.admin_port`); `env` overrides (another
 * PUSHBASE_RECORDS_ADDRESS). The caller stops it (`signal('SIGTERM', …)`).
 */
export function startSecondGateway(server: TestServer, env: Readonly<Record<string, string>> = {}): Promise<ServiceProcess> {
  return ServiceProcess.start('gateway', {
    bundle: BUNDLE,
    cwd: ROOT,
    env: {
      ...server.stack!.env,
      PUSHBASE_PORT: '0',
      PUSHBASE_ADMIN_PORT: '0',
      PUSHBASE_TLS_CERT: server.certFile,
      PUSHBASE_TLS_KEY: path.join(path.dirname(server.certFile), 'key.pem'),
      ...env,
    },
    readyTimeoutMs: 120_000,
  });
}

/**
 * A second records process on a distributed TestServer's stack (a replica: the same topic, Redis and
 * token), on a free gRPC port of its own: `ready.grpc_port`, `ready.metrics_port`. The caller stops it.
 */
export function startRecordsReplica(server: TestServer): Promise<ServiceProcess> {
  return ServiceProcess.start('records', {
    bundle: BUNDLE,
    cwd: ROOT,
    env: { ...server.stack!.env, PUSHBASE_RECORDS_GRPC_PORT: '0', PUSHBASE_METRICS_PORT: '0' },
    readyTimeoutMs: 120_000,
  });
}

export class TestServer {
  /** The token this server's admin listener takes (cluster: the installation's, from endpoints.json). */
  adminToken = randomBytes(18).toString('base64url');
  readonly keys: Record<string, string>;
  readonly dataDir: string;
  port = 0;
  adminPort = 0;
  ca = '';
  /** Path of the server's certificate (PEM), as printed in its "listening" line: for NODE_EXTRA_CA_CERTS. */
  certFile = '';
  plainHttp = false;
  proc: ChildProcess | undefined;
  /** What the server wrote (distributed: the gateway; its "listening" line is the one tests read). */
  readonly output: string[] = [];
  /** Distributed: the other services' lines, prefixed with their names, for failure messages. */
  readonly servicesOutput: string[] = [];
  private readonly env: Record<string, string>;
  private readonly startTimeoutMs: number;
  private readonly nodeArgs: readonly string[];
  /** Distributed mode: the supervisor of the four processes, and the names they own on the servers. */
  stack: DistributedStack | undefined;
  readonly names: StackNames | undefined;
  private kafkaAdmin: { admin: Admin; ends: HighWatermarks } | undefined;
  /** Cluster mode (cluster-target.ts): the suite's account names → this server's own accounts, once started. */
  readonly cluster: { accounts: Record<string, string>; kafka: string } | undefined;

  constructor(opts: ServerOptions = {}) {
    this.dataDir = opts.dataDir ?? mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-e2e-'));
    this.keys = opts.keys ?? { acme: `key-acme-${randomBytes(8).toString('hex')}`, globex: `key-globex-${randomBytes(8).toString('hex')}` };
    this.env = opts.env ?? {};
    this.startTimeoutMs = opts.startTimeoutMs ?? 30_000;
    this.nodeArgs = opts.nodeArgs ?? [];
    this.names = (opts.mode ?? E2E_MODE) === 'distributed' ? stackNamesOf(this.dataDir) : undefined;
    this.cluster = (opts.mode ?? E2E_MODE) === 'cluster' ? { accounts: {}, kafka: '' } : undefined;
  }

  get distributed(): boolean {
    return this.names !== undefined;
  }

  /**
   * The server's processes that are running now, by name (distributed: each service; embedded: `pushbase`),
   * with their pids: a suite compares two readings to tell that nothing died or was restarted meanwhile.
   */
  runningProcesses(): Record<string, number | undefined> {
    const alive = (pid: number | undefined, exited: boolean): number | undefined => (pid === undefined || exited ? undefined : pid);
    if (this.stack !== undefined) {
      const stack = this.stack;
      return Object.fromEntries(SERVICES.map((service) => [service, stack.pid(service)]));
    }
    return { pushbase: alive(this.proc?.pid, this.proc === undefined || this.proc.exitCode !== null || this.proc.signalCode !== null) };
  }

  /** The environment of the server's process(es): random ports, the test's keys and admin token, the data directory. */
  private serverEnv(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      PUSHBASE_PORT: '0',
      PUSHBASE_HOST: '127.0.0.1',
      PUSHBASE_ADMIN_PORT: '0',
      PUSHBASE_ADMIN_TOKEN: this.adminToken,
      PUSHBASE_DATA_DIR: this.dataDir,
      PUSHBASE_API_KEYS: Object.entries(this.keys)
        .map(([account, key]) => `${key}:${account}`)
        .join(','),
      ...(this.names === undefined
        ? {}
        : {
            PUSHBASE_KAFKA_TOPIC: this.names.topic,
            PUSHBASE_CLICKHOUSE_DATABASE: this.names.database,
            PUSHBASE_REDIS_PREFIX: this.names.redisPrefix,
            PUSHBASE_PROJECTOR_GROUP: this.names.group,
            // Tests read soon after they write: write small batches often rather than wait for big ones.
            PUSHBASE_PROJECTOR_FLUSH_MS: '50',
          }),
      ...this.env,
    };
  }

  get baseUrl(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /**
   * Starts `pushbase serve` as a child process on random ports and waits for its "listening" line; in
   * distributed mode, migrates and starts the four services on the stack's own names and waits until each
   * is ready.
   */
  async start(): Promise<this> {
    if (this.names !== undefined) return this.startDistributed();
    if (this.cluster !== undefined) return this.startOnCluster(this.cluster);
    const proc = spawn(process.execPath, [...this.nodeArgs, '--enable-source-maps', BUNDLE, 'serve'], {
      cwd: ROOT,
      env: this.serverEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    proc.stderr?.on('data', (d: Buffer) => this.output.push(d.toString()));
    const lines = createInterface({ input: proc.stdout });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start in ${this.startTimeoutMs / 1000} s:\n${this.output.join('')}`)), this.startTimeoutMs);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code} before listening:\n${this.output.join('')}`));
      });
      lines.on('line', (line) => {
        this.output.push(line);
        try {
          const msg = JSON.parse(line);
          if (msg.msg === 'listening') {
            this.port = msg.port;
            this.adminPort = msg.admin_port;
            // No certificate of its own when it runs behind a TLS-terminating proxy (plain HTTP).
            this.plainHttp = msg.cert_file === null;
            this.certFile = msg.cert_file ?? '';
            this.ca = this.plainHttp ? '' : readFileSync(msg.cert_file, 'utf8');
            clearTimeout(timer);
            resolve();
          }
        } catch {
          /* not a log line */
        }
      });
    });
    return this;
  }

  /** Cluster mode: the installation's gateway through its loopback bridges; accounts and keys of our own. */
  private async startOnCluster(cluster: { accounts: Record<string, string>; kafka: string }): Promise<this> {
    const e = clusterEndpoints();
    this.port = portOf(e.public);
    this.adminPort = portOf(e.admin);
    this.adminToken = e.adminToken;
    this.plainHttp = false;
    this.ca = await servedCertificate(this.port);
    // For clients in child processes (NODE_EXTRA_CA_CERTS), as a local server's "listening" line names it.
    this.certFile = path.join(this.dataDir, 'cluster-gateway.pem');
    writeFileSync(this.certFile, this.ca);
    cluster.kafka = e.kafka;
    const { accounts, keys } = await provisionAccounts(e, Object.keys(this.keys), this.env);
    Object.assign(cluster.accounts, accounts);
    // The suite reads its keys from this object after start (they are the installation's now).
    Object.assign(this.keys, keys);
    return this;
  }

  private async startDistributed(): Promise<this> {
    this.stack = await DistributedStack.start({
      bundle: BUNDLE,
      cwd: ROOT,
      env: this.serverEnv(),
      readyTimeoutMs: Math.max(this.startTimeoutMs, 120_000),
      nodeArgs: { gateway: this.nodeArgs },
      onLine: (service, line) => {
        if (service === 'gateway') this.output.push(line);
        else this.servicesOutput.push(`${service} | ${line}`);
        if (this.servicesOutput.length > 2000) this.servicesOutput.splice(0, 1000);
      },
      onUnexpectedExit: (service, exit) => this.servicesOutput.push(`${service} exited unexpectedly: ${exit.signal ?? exit.code}`),
    });
    const { port, adminPort, certFile } = this.stack.gateway;
    this.port = port;
    this.adminPort = adminPort;
    this.plainHttp = certFile === null;
    this.certFile = certFile ?? '';
    this.ca = certFile === null ? '' : readFileSync(certFile, 'utf8');
    return this;
  }

  /**
   * SIGTERM and wait for exit; resolves to the exit code (distributed: every service in order, 0 when all
   * exited 0, else the first other exit).
   */
  async stop(): Promise<number | null> {
    // The installation outlives the suite (the cluster's teardown removes it): only our Kafka client goes.
    if (this.cluster !== undefined) return this.stopDistributed(() => Promise.resolve([]));
    if (this.stack !== undefined) return this.stopDistributed(() => this.stack!.stop().then((exits) => Object.values(exits)));
    return this.signal('SIGTERM');
  }

  /** kill -9: no chance to flush anything (distributed: all four services at once). */
  async kill9(): Promise<void> {
    if (this.cluster !== undefined) throw new Error('the cluster target cannot kill its server: the pod fault tests do that (test/k8s)');
    if (this.stack !== undefined) {
      const stack = this.stack;
      await this.stopDistributed(() => Promise.all(SERVICES.map((service) => (stack.pid(service) === undefined ? Promise.resolve({ code: null, signal: null }) : stack.kill(service)))));
      return;
    }
    await this.signal('SIGKILL');
  }

  private async stopDistributed(stopAll: () => Promise<ServiceExit[]>): Promise<number | null> {
    const exits = await stopAll();
    await this.kafkaAdmin?.admin.disconnect();
    await this.kafkaAdmin?.ends.close();
    this.kafkaAdmin = undefined;
    const failed = exits.find((e) => e.code !== 0);
    return failed === undefined ? 0 : failed.code;
  }

  /**
   * Distributed mode: resolves once the projector has applied every event written to the topic so far —
   * the group's committed offsets have reached every partition's high watermark as it was when called
   * (its consumer commits past transaction markers; high-watermarks.ts says why not the last stable
   * offset) — so a read of the admin listener shows every write acknowledged before it. Waits with a
   * deadline; the embedded read side is immediate.
   */
  async caughtUp(timeoutMs = 60_000): Promise<void> {
    const names = this.names ?? (this.cluster === undefined ? undefined : { topic: CLUSTER_TOPIC, group: CLUSTER_GROUP });
    if (names === undefined) return;
    if (this.kafkaAdmin === undefined) {
      const brokers = this.cluster?.kafka ?? process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092';
      const kafka = createKafka({ brokers: parseBrokers(brokers), clientId: 'pushbase-e2e-reads' });
      const admin = kafka.admin();
      await admin.connect();
      this.kafkaAdmin = { admin, ends: new HighWatermarks(kafka) };
    }
    const { admin, ends: watermarks } = this.kafkaAdmin;
    const ends = await watermarks.of(names.topic);
    await eventually(async () => {
      const [committed] = await admin.fetchOffsets({ groupId: names.group, topics: [names.topic] });
      const at = new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      return [...ends].every(([partition, end]) => end === 0 || (at.get(partition) ?? -1) >= end);
    }, { timeoutMs }).catch((e: unknown) => {
      throw new Error(`the projector of ${names.topic} did not catch up with ${JSON.stringify([...ends])} within ${timeoutMs / 1000} s: ${String(e)}\n${this.servicesOutput.slice(-20).join('\n')}`);
    });
  }

  private async signal(sig: NodeJS.Signals): Promise<number | null> {
    const proc = this.proc;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return proc?.exitCode ?? null;
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.kill(sig);
    return exited;
  }

  /** A request to the public HTTPS API, trusting the server's certificate. */
  request(method: string, urlPath: string, opts: RequestOptions = {}): Promise<Response> {
    return requestTo(this, method, this.path(urlPath), opts);
  }

  /** The path as sent: on the cluster, the suite's account names are this server's accounts. */
  path(urlPath: string): string {
    return this.cluster === undefined ? urlPath : translatePath(urlPath, this.cluster.accounts);
  }

  /** A request to the admin listener with the bearer token (distributed: once the read side has caught up). */
  async admin(urlPath: string, token: string = this.adminToken): Promise<Response> {
    await this.caughtUp();
    return send(httpRequest, { host: '127.0.0.1', port: this.adminPort, method: 'GET', path: this.path(urlPath), headers: { authorization: `Bearer ${token}` } }, undefined);
  }

  /** The records of a dataset as the read side shows them, oldest insertion first. */
  async records(account: string, id: string): Promise<any[]> {
    const res = await this.admin(`/admin/accounts/${account}/datasets/${encodeURIComponent(id)}/records`);
    if (res.status !== 200) throw new Error(`records of ${account}/${id}: ${res.status} ${res.text}`);
    return res.body.records;
  }
}

/**
 * A request with a JSON body to an admin listener with the bearer token (the account and key routes), at
 * once: unlike TestServer.admin, it does not wait for the read side. `adminPort` picks another gateway's
 * listener of the same stack (same token).
 */
export function adminRequest(target: { readonly adminPort: number; readonly adminToken: string }, method: string, urlPath: string, body?: unknown, adminPort: number = target.adminPort): Promise<Response> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = { authorization: `Bearer ${target.adminToken}`, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) };
  return send(httpRequest, { host: '127.0.0.1', port: adminPort, method, path: urlPath, headers }, payload);
}

/** A request to a gateway's public API at `target` (trusting its certificate, or plain HTTP behind a TLS proxy). */
export function requestTo(target: { readonly port: number; readonly ca: string; readonly plainHttp: boolean }, method: string, urlPath: string, opts: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key !== undefined) headers.authorization = `Basic ${Buffer.from(`${opts.key}:`).toString('base64')}`;
  let payload: string | Buffer | undefined = opts.raw;
  if (payload === undefined && opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  if (target.plainHttp) return send(httpRequest, { host: '127.0.0.1', port: target.port, method, path: urlPath, headers }, payload);
  return send(httpsRequest, { host: '127.0.0.1', port: target.port, method, path: urlPath, headers, ca: target.ca, servername: 'localhost' }, payload);
}

function send(
  fn: (o: HttpsRequestOptions, cb: (res: import('node:http').IncomingMessage) => void) => import('node:http').ClientRequest,
  options: HttpsRequestOptions,
  payload: string | Buffer | undefined,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = fn({ ...options, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}


import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

/*
 * The distributed stack as separate processes, one supervisor for `pushbase distributed` (`npm run
 * start:distributed`) and the tests (e2e against the distributed stack, fault tests). A service that exits
 * unasked is reported, not restarted: a silent restart would hide the crash. Its API, which the fault tests
 * build on: docs/architecture.md → The supervisor.
 */

export const SERVICES = ['projector', 'schema', 'records', 'gateway'] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface GatewayEndpoint {
  readonly port: number;
  readonly adminPort: number;
  /** Path of the certificate the gateway serves; null behind a TLS-terminating proxy (plain HTTP). */
  readonly certFile: string | null;
}

export interface ServiceExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface StartServiceOptions {
  /** The bundle, dist/pushbase.js. */
  readonly bundle: string;
  readonly env: NodeJS.ProcessEnv;
  /** Every line the process writes on stdout or stderr. */
  readonly onLine?: (line: string) => void;
  /** Extra node flags (e.g. --cpu-prof). */
  readonly nodeArgs?: readonly string[];
  readonly readyTimeoutMs?: number;
  readonly cwd?: string;
  /**
   * Start the process in a session (so a process group) of its own, so a Ctrl-C at the terminal reaches
   * only the supervisor, which then stops the services in order (the foreground `pushbase distributed`).
   * On Linux with autogroups the session is also the service's scheduling group (projector/src/priority.ts).
   */
  readonly detached?: boolean;
}

/** A running `pushbase <service>` process. */
export class ServiceProcess {
  /** The service's "listening" line (servers) or its first partition assignment (the projector). */
  ready!: Record<string, unknown>;
  /** The service's "listening" line, once written (the projector's comes before it is ready). */
  listening: Record<string, unknown> | undefined;
  readonly exited: Promise<ServiceExit>;
  private expected = false;

  private constructor(
    readonly service: ServiceName,
    readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number | undefined {
    return this.child.exitCode === null && this.child.signalCode === null ? this.child.pid : undefined;
  }

  /** Whether the process has exited although nobody asked it to. */
  get expectedExit(): boolean {
    return this.expected;
  }

  /** Sends `sig` and resolves once the process is gone; a process already gone resolves at once. */
  async signal(sig: NodeJS.Signals, killAfterMs?: number): Promise<ServiceExit> {
    this.expected = true;
    if (this.pid !== undefined) this.child.kill(sig);
    if (killAfterMs !== undefined && sig !== 'SIGKILL') {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), killAfterMs);
      timer.unref();
      void this.exited.then(() => clearTimeout(timer));
    }
    return this.exited;
  }

  static async start(service: ServiceName, options: StartServiceOptions): Promise<ServiceProcess> {
    const child = spawn(process.execPath, [...(options.nodeArgs ?? []), '--enable-source-maps', options.bundle, service], {
      cwd: options.cwd ?? process.cwd(),
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.detached === true,
    });
    const proc = new ServiceProcess(service, child);
    const onLine = options.onLine ?? (() => undefined);
    const tail: string[] = [];
    const remember = (line: string): void => {
      tail.push(line);
      if (tail.length > 40) tail.shift();
      onLine(line);
    };
    createInterface({ input: child.stderr }).on('line', remember);
    const timeoutMs = options.readyTimeoutMs ?? 60_000;
    proc.ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${service} was not ready within ${timeoutMs / 1000} s:\n${tail.join('\n')}`));
      }, timeoutMs);
      void proc.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`${service} exited (${signal ?? code}) before it was ready:\n${tail.join('\n')}`));
      });
      createInterface({ input: child.stdout }).on('line', (line) => {
        remember(line);
        const msg = parseLine(line);
        if (msg?.msg === 'listening') proc.listening = msg;
        if (msg !== undefined && isReady(service, msg)) {
          clearTimeout(timer);
          resolve(msg);
        }
      });
    });
    return proc;
  }
}

function parseLine(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

// The projector writes no "listening" line (it serves nothing); it is ready once it reads its partitions.
const isReady = (service: ServiceName, msg: Record<string, unknown>): boolean => msg.msg === (service === 'projector' ? 'partitions assigned' : 'listening');

/** Where to connect to a service listening on `host` (a wildcard address means this machine). */
const connectHost = (host: string | undefined): string => (host === undefined || host === '' || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);

export interface StackOptions extends Omit<StartServiceOptions, 'onLine' | 'nodeArgs'> {
  /** Every line of every process, with the name of its service ('migrate' for the migration). */
  readonly onLine?: (service: ServiceName | 'migrate', line: string) => void;
  /** A service exited without being asked to; it is not restarted. */
  readonly onUnexpectedExit?: (service: ServiceName, exit: ServiceExit) => void;
  /** Node flags per service. */
  readonly nodeArgs?: Partial<Record<ServiceName, readonly string[]>>;
  /** How long stop() waits for a service after SIGTERM before SIGKILL; 30 s by default. */
  readonly stopTimeoutMs?: number;
}

export class DistributedStack {
  private readonly running = new Map<ServiceName, ServiceProcess>();
  private readonly serviceEnv = new Map<ServiceName, NodeJS.ProcessEnv>();
  private stopping: Promise<Record<ServiceName, ServiceExit>> | undefined;
  env: NodeJS.ProcessEnv;
  addresses = { schema: '', records: '' };
  gateway: GatewayEndpoint = { port: 0, adminPort: 0, certFile: null };

  private constructor(private readonly options: StackOptions) {
    // The gateway and the gRPC services share a secret (PUSHBASE_GRPC_TOKEN); unless one is given, a fresh
    // one per stack, which restarts and extra services started with `env` keep.
    const given = options.env.PUSHBASE_GRPC_TOKEN;
    this.env = { ...options.env, PUSHBASE_GRPC_TOKEN: given !== undefined && given.trim() !== '' ? given : randomBytes(32).toString('base64url') };
  }

  /**
   * Runs `pushbase migrate`, then starts the projector, schema and records (reading their gRPC ports from
   * their "listening" lines) and the gateway pointed at them; resolves once every service is ready.
   */
  static async start(options: StackOptions): Promise<DistributedStack> {
    const stack = new DistributedStack(options);
    try {
      await stack.migrate();
      const env = stack.env;
      const grpcHost = connectHost(env.PUSHBASE_GRPC_HOST);
      const launches = [
        stack.launch('projector', env),
        stack.launch('schema', { ...env, PUSHBASE_SCHEMA_GRPC_PORT: env.PUSHBASE_SCHEMA_GRPC_PORT ?? '0' }),
        stack.launch('records', { ...env, PUSHBASE_RECORDS_GRPC_PORT: env.PUSHBASE_RECORDS_GRPC_PORT ?? '0' }),
      ] as const;
      // Every launch settled before a failure is thrown: one still starting would be ready after stop().
      await Promise.allSettled(launches);
      const [, schema, records] = await Promise.all(launches);
      stack.addresses = { schema: `${grpcHost}:${String(schema.ready.grpc_port)}`, records: `${grpcHost}:${String(records.ready.grpc_port)}` };
      stack.env = { ...env, PUSHBASE_SCHEMA_ADDRESS: stack.addresses.schema, PUSHBASE_RECORDS_ADDRESS: stack.addresses.records };
      await stack.launch('gateway', stack.env);
      return stack;
    } catch (e) {
      await stack.stop();
      throw e;
    }
  }

  /** Where a running service serves GET /metrics; undefined when it is not running. */
  metricsPort(service: ServiceName): number | undefined {
    const proc = this.running.get(service);
    if (proc?.pid === undefined) return undefined;
    const port = service === 'gateway' ? proc.ready.admin_port : proc.listening?.metrics_port;
    return typeof port === 'number' ? port : undefined;
  }

  pid(service: ServiceName): number | undefined {
    return this.running.get(service)?.pid;
  }

  /** Sends `sig` to one service; resolves with its exit. */
  async signal(service: ServiceName, sig: NodeJS.Signals): Promise<ServiceExit> {
    const proc = this.running.get(service);
    if (proc === undefined) throw new Error(`${service} was never started`);
    return proc.signal(sig);
  }

  kill(service: ServiceName): Promise<ServiceExit> {
    return this.signal(service, 'SIGKILL');
  }

  /**
   * Sends `sig` to every running service and returns at once, for an exit handler, where nothing
   * asynchronous runs any more: services in sessions of their own would otherwise outlive whoever started
   * them. stop() is the orderly way. A service that has just exited is skipped (ChildProcess.kill ignores it).
   */
  signalAllNow(sig: NodeJS.Signals): void {
    for (const proc of this.running.values()) if (proc.pid !== undefined) proc.child.kill(sig);
  }

  /** Starts one service again with its environment and ports; resolves once it is ready. */
  async restart(service: ServiceName): Promise<void> {
    if (this.stopping !== undefined) throw new Error('the stack is stopping');
    const previous = this.running.get(service);
    if (previous?.pid !== undefined) await previous.signal('SIGTERM', this.options.stopTimeoutMs ?? 30_000);
    const env = { ...(this.serviceEnv.get(service) ?? this.env) };
    // The same ports again, so that whoever holds the address (the gateway, clients) finds it there.
    if (service === 'schema' && previous !== undefined) env.PUSHBASE_SCHEMA_GRPC_PORT = String(previous.ready.grpc_port);
    if (service === 'records' && previous !== undefined) env.PUSHBASE_RECORDS_GRPC_PORT = String(previous.ready.grpc_port);
    // Prometheus keeps scraping the address it was given.
    const metricsPort = previous?.listening?.metrics_port;
    if (service !== 'gateway' && typeof metricsPort === 'number') env.PUSHBASE_METRICS_PORT = String(metricsPort);
    if (service === 'gateway' && previous !== undefined) {
      env.PUSHBASE_PORT = String(previous.ready.port);
      env.PUSHBASE_ADMIN_PORT = String(previous.ready.admin_port);
    }
    await this.launch(service, env);
  }

  /** Stops every service: the gateway, then records and schema, the projector last. */
  stop(): Promise<Record<ServiceName, ServiceExit>> {
    const timeout = this.options.stopTimeoutMs ?? 30_000;
    const stopOne = (service: ServiceName): Promise<ServiceExit> => this.running.get(service)?.signal('SIGTERM', timeout) ?? Promise.resolve({ code: null, signal: null });
    return (this.stopping ??= (async () => {
      const gateway = await stopOne('gateway');
      const [records, schema] = await Promise.all([stopOne('records'), stopOne('schema')]);
      const projector = await stopOne('projector');
      return { gateway, records, schema, projector };
    })());
  }

  private async launch(service: ServiceName, env: NodeJS.ProcessEnv): Promise<ServiceProcess> {
    const onLine = this.options.onLine;
    const { bundle, readyTimeoutMs, cwd, detached } = this.options;
    const proc = await ServiceProcess.start(service, {
      bundle,
      ...(readyTimeoutMs === undefined ? {} : { readyTimeoutMs }),
      ...(cwd === undefined ? {} : { cwd }),
      ...(detached === undefined ? {} : { detached }),
      env,
      nodeArgs: this.options.nodeArgs?.[service] ?? [],
      ...(onLine === undefined ? {} : { onLine: (line: string) => onLine(service, line) }),
    });
    this.running.set(service, proc);
    this.serviceEnv.set(service, env);
    if (service === 'gateway') {
      const r = proc.ready;
      this.gateway = { port: Number(r.port), adminPort: Number(r.admin_port), certFile: typeof r.cert_file === 'string' ? r.cert_file : null };
    }
    void proc.exited.then((exit) => {
      if (!proc.expectedExit && this.stopping === undefined) this.options.onUnexpectedExit?.(service, exit);
    });
    return proc;
  }

  /** `pushbase migrate`: the topic and the ClickHouse tables, idempotent. */
  private async migrate(): Promise<void> {
    const onLine = this.options.onLine;
    const child = spawn(process.execPath, ['--enable-source-maps', this.options.bundle, 'migrate'], {
      cwd: this.options.cwd ?? process.cwd(),
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    const take = (line: string): void => {
      lines.push(line);
      onLine?.('migrate', line);
    };
    createInterface({ input: child.stdout }).on('line', take);
    createInterface({ input: child.stderr }).on('line', take);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    if (code !== 0) throw new Error(`pushbase migrate failed (exit ${code}):\n${lines.join('\n')}`);
  }
}

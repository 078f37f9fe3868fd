/*
 * What the chart renders, run: each container's command and environment (the Secret's values included)
 * given to the real `pushbase` processes on this machine's Kafka, ClickHouse and Redis, the migrate hook
 * first. Their probes, as the chart declares them, must find them healthy (gRPC health on the gRPC
 * services' ports, /healthz on the gateway's admin port), a write through the gateway with the Secret's
 * API key must reach the gRPC services at the addresses the chart gives, the Secret's admin token must open
 * the admin listener, and SIGTERM must stop each with exit 0.
 *
 * Only what a cluster provides differently is replaced, and checked before it is: the listen addresses
 * (0.0.0.0 in a pod; loopback here, where tests listen on nothing else), the Service names in the gateway's
 * gRPC addresses (cluster DNS; 127.0.0.1 here) and the data directory (an emptyDir in the pod).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ServiceProcess, type ServiceName } from '../../services/cli/src/distributed';
import { healthClient } from '../../services/grpc/test/support';
import { BUNDLE, ROOT, requestTo } from '../helpers/server';
import { stackNamesOf } from '../helpers/stack-names';
import { envOf, named, render, type K8sObject } from './chart';
import { eventually } from '../helpers/eventually';

const run = promisify(execFile);

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('the chart rendered, run as processes', () => {
  const dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'chart-run-'));
  // A topic, database, Redis prefix and group of its own, removed by the global teardown.
  const names = stackNamesOf(dataDir);
  const adminToken = randomBytes(24).toString('base64url');
  const apiKey = randomBytes(24).toString('base64url');
  const running = new Map<string, ServiceProcess>();
  const lines: string[] = [];
  let objects: K8sObject[];
  let secrets: Record<string, string>;

  beforeAll(async () => {
    const [schemaPort, recordsPort, port, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    objects = render('run', [
      '--set-string', `kafka.brokers=${process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092'}`,
      '--set-string', `clickhouse.url=${process.env.PUSHBASE_CLICKHOUSE_URL ?? 'http://127.0.0.1:8123'}`,
      '--set-string', `redis.url=${process.env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379'}`,
      '--set-string', `kafka.topic=${names.topic}`,
      '--set-string', `clickhouse.database=${names.database}`,
      '--set-string', `redis.prefix=${names.redisPrefix}`,
      '--set-string', `projector.group=${names.group}`,
      '--set', 'kafka.partitions=2,kafka.replicationFactor=1,projector.replicas=1',
      '--set', `schema.grpcPort=${schemaPort},records.grpcPort=${recordsPort},gateway.port=${port},gateway.adminPort=${adminPort}`,
      '--set', 'schema.drainMs=1000,records.drainMs=1000',
      '--set-string', `auth.adminToken=${adminToken}`,
      '--set-string', `auth.apiKeys=${apiKey}:acme`,
    ]);
    const secret = named(objects, 'Secret', 'run-pushbase-auth');
    secrets = Object.fromEntries(Object.entries(secret.data ?? {}).map(([key, value]) => [`${secret.metadata.name}/${key}`, Buffer.from(value, 'base64').toString()]));
  });

  afterAll(async () => {
    await Promise.all([...running.values()].map((p) => p.signal('SIGKILL')));
  });

  /** The environment of a Deployment's or Job's container, adapted to this machine where a cluster differs. */
  function processEnv(kind: 'Deployment' | 'Job', name: string): { args: string[]; env: NodeJS.ProcessEnv } {
    const container = named(objects, kind, name).spec.template.spec.containers[0];
    const env = envOf(container, secrets);
    for (const host of ['PUSHBASE_HOST', 'PUSHBASE_ADMIN_HOST', 'PUSHBASE_GRPC_HOST', 'PUSHBASE_METRICS_HOST'] as const) {
      if (env[host] === undefined) continue;
      expect(env[host]).toBe('0.0.0.0');
      env[host] = '127.0.0.1';
    }
    for (const address of ['PUSHBASE_SCHEMA_ADDRESS', 'PUSHBASE_RECORDS_ADDRESS'] as const) {
      if (env[address] === undefined) continue;
      expect(env[address]).toMatch(/^run-pushbase-(schema|records):\d+$/);
      env[address] = env[address].replace(/^[^:]+/, '127.0.0.1');
    }
    // Each pod has a network of its own, so every one listens on the chart's metrics port; here they share
    // one machine, so each picks a free port (its "listening" line says which).
    if (env.PUSHBASE_METRICS_PORT !== undefined) {
      expect(env.PUSHBASE_METRICS_PORT).toBe(String(container.ports.find((p: { name: string }) => p.name === 'metrics').containerPort));
      env.PUSHBASE_METRICS_PORT = '0';
    }
    if (env.PUSHBASE_DATA_DIR !== undefined) {
      expect(env.PUSHBASE_DATA_DIR).toBe('/var/lib/pushbase');
      env.PUSHBASE_DATA_DIR = dataDir;
    }
    // What the image itself sets (deploy/Dockerfile), and a PATH.
    return { args: container.args, env: { PATH: process.env.PATH, NODE_ENV: 'production', ...env } };
  }

  async function start(name: string): Promise<ServiceProcess> {
    const { args, env } = processEnv('Deployment', name);
    expect(args).toHaveLength(1);
    const proc = await ServiceProcess.start(args[0] as ServiceName, { bundle: BUNDLE, env, cwd: ROOT, readyTimeoutMs: 120_000, onLine: (l) => lines.push(`${name}: ${l}`) });
    running.set(name, proc);
    return proc;
  }

  it('migrates with the hook Job, then starts every service, and each passes its probes as declared', async () => {
    const migrate = processEnv('Job', 'run-pushbase-migrate');
    expect(migrate.args).toEqual(['migrate']);
    await run(process.execPath, [BUNDLE, ...migrate.args], { env: migrate.env, cwd: ROOT, timeout: 120_000 });

    await Promise.all(['run-pushbase-projector', 'run-pushbase-schema', 'run-pushbase-records'].map((n) => start(n)));
    for (const name of ['run-pushbase-schema', 'run-pushbase-records']) {
      const container = named(objects, 'Deployment', name).spec.template.spec.containers[0];
      for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
        const { port, service } = container[probe].grpc as { port: number; service?: string };
        const client = healthClient(`127.0.0.1:${port}`);
        try {
          expect({ name, probe, status: await client.check(service ?? '') }).toEqual({ name, probe, status: 'SERVING' });
        } finally {
          client.close();
        }
      }
    }

    const gateway = await start('run-pushbase-gateway');
    const container = named(objects, 'Deployment', 'run-pushbase-gateway').spec.template.spec.containers[0];
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const { path: probePath, port } = container[probe].httpGet as { path: string; port: string };
      const containerPort = container.ports.find((p: { name: string }) => p.name === port).containerPort as number;
      expect(gateway.ready.admin_port).toBe(containerPort);
      const res = await fetch(`http://127.0.0.1:${containerPort}${probePath}`);
      expect({ probe, status: res.status }).toEqual({ probe, status: 200 });
    }
  }, 300_000);

  it("serves a write with the Secret's API key through the gRPC services, and the Secret's admin token reads it back", async () => {
    const gateway = running.get('run-pushbase-gateway')!;
    const target = { port: gateway.ready.port as number, ca: readFileSync(gateway.ready.cert_file as string, 'utf8'), plainHttp: false };
    const created = await requestTo(target, 'PUT', '/datasets/chart.run', { key: apiKey, body: { fields: { n: { type: 'number', name: 'N' } } } });
    expect({ status: created.status, text: created.text }).toEqual({ status: 201, text: expect.any(String) });
    const appended = await requestTo(target, 'POST', '/datasets/chart.run/data', { key: apiKey, body: { data: [{ n: 1 }, { n: 2 }] } });
    expect(appended.status).toBe(200);
    const adminPort = gateway.ready.admin_port as number;
    const records = await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${adminPort}/admin/accounts/acme/datasets/chart.run/records`, { headers: { authorization: `Bearer ${adminToken}` } });
      if (res.status !== 200) return undefined;
      const body = (await res.json()) as { records: unknown[] };
      return body.records.length === 2 ? body.records : undefined;
    }, { timeoutMs: 60_000 });
    expect(records).toEqual([{ n: 1 }, { n: 2 }]);

    // Each process's /metrics, where the pod annotations send Prometheus, shows the write's path.
    const scrape = async (port: number): Promise<string> => {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      return res.text();
    };
    const metricsPort = (name: string): number => running.get(name)!.listening?.metrics_port as number;
    const gatewayMetrics = await scrape(adminPort);
    expect(gatewayMetrics).toMatch(/^pushbase_http_requests_total\{route="\/datasets\/:id\/data",method="POST",status="200"\} 1$/m);
    expect(await scrape(metricsPort('run-pushbase-records'))).toMatch(/^pushbase_kafka_appends_total\{outcome="committed"\} 1$/m);
    // The write's gRPC call, timed at both ends: the gateway's client and records' server.
    expect(gatewayMetrics).toMatch(/^pushbase_grpc_client_handling_seconds_count\{service="pushbase.v1.RecordService",method="Append",code="OK"\} 1$/m);
    expect(await scrape(metricsPort('run-pushbase-records'))).toMatch(/^pushbase_grpc_server_handling_seconds_count\{service="pushbase.v1.RecordService",method="Append",code="OK"\} 1$/m);
    expect(await scrape(metricsPort('run-pushbase-schema'))).toMatch(/^pushbase_grpc_server_handling_seconds_count\{service="pushbase.v1.SchemaService",method="FindOrCreate",code="OK"\} 1$/m);
    expect(await scrape(metricsPort('run-pushbase-schema'))).toMatch(/^pushbase_kafka_appends_total\{outcome="committed"\} 1$/m);
    expect(await scrape(metricsPort('run-pushbase-projector'))).toMatch(/^pushbase_projector_writes_total [1-9]/m);
  }, 120_000);

  it('stops every service on SIGTERM with exit 0 in its grace period, the gateway first and the projector last; the gRPC services answer NOT_SERVING to their readiness probe during the drain, still listening', async () => {
    for (const name of ['run-pushbase-gateway', 'run-pushbase-records', 'run-pushbase-schema', 'run-pushbase-projector']) {
      const proc = running.get(name)!;
      const spec = named(objects, 'Deployment', name).spec.template.spec;
      const container = spec.containers[0];
      // Within the grace period the chart gives it, as the kubelet would wait before SIGKILL.
      const sent = Date.now();
      const exited = proc.signal('SIGTERM', (spec.terminationGracePeriodSeconds as number) * 1000);
      if (container.readinessProbe?.grpc !== undefined) {
        const drainMs = Number(envOf(container, secrets).PUSHBASE_GRPC_DRAIN_MS);
        expect(drainMs).toBeGreaterThanOrEqual(1000);
        const probe = container.readinessProbe.grpc as { port: number; service?: string };
        const client = healthClient(`127.0.0.1:${probe.port}`);
        try {
          const status = await eventually(async () => ((await client.check(probe.service ?? '')) === 'NOT_SERVING' ? 'NOT_SERVING' : undefined), { timeoutMs: drainMs });
          // Answered by the service itself, so its listener was still open, within the drain.
          expect({ name, status, withinDrain: Date.now() - sent < drainMs }).toEqual({ name, status: 'NOT_SERVING', withinDrain: true });
        } finally {
          client.close();
        }
      }
      expect({ name, exit: await exited }).toEqual({ name, exit: { code: 0, signal: null } });
      running.delete(name);
    }
  }, 300_000);
});

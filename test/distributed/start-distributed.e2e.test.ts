import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { stackNamesOf } from '../helpers/stack-names';
import { BUNDLE, requestTo, ROOT } from '../helpers/server';
import { eventually } from '../helpers/eventually';
import { alive } from '../../deploy/proc';

/*
 * `npm run start:distributed` is `pushbase distributed`: the foreground supervisor of the four services.
 * The e2e suites drive the same supervisor through its API; this file runs the command itself, as a user
 * does, and checks what only the command does: one "listening" line once all four serve, a SIGTERM (what
 * Ctrl-C or a process manager sends) stopping all four cleanly with exit 0, and a service dying on its own
 * ending the supervisor with exit 1 and no process left behind.
 */

interface Supervisor {
  readonly proc: ChildProcess;
  readonly lines: string[];
  readonly listening: { port: number; admin_port: number; cert_file: string };
  readonly exited: Promise<number | null>;
}

const adminToken = randomBytes(18).toString('base64url');
const key = `key-${randomBytes(12).toString('hex')}`;

async function startSupervisor(): Promise<Supervisor> {
  const dataDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-distributed-'));
  // Its own topic, database, Redis prefix and group on the shared servers, removed by the global teardown.
  const names = stackNamesOf(dataDir);
  const proc = spawn(process.execPath, ['--enable-source-maps', BUNDLE, 'distributed'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PUSHBASE_PORT: '0',
      PUSHBASE_ADMIN_PORT: '0',
      PUSHBASE_ADMIN_TOKEN: adminToken,
      PUSHBASE_API_KEYS: `${key}:acme`,
      PUSHBASE_DATA_DIR: dataDir,
      PUSHBASE_KAFKA_TOPIC: names.topic,
      PUSHBASE_CLICKHOUSE_DATABASE: names.database,
      PUSHBASE_REDIS_PREFIX: names.redisPrefix,
      PUSHBASE_PROJECTOR_GROUP: names.group,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  proc.stderr?.on('data', (d: Buffer) => lines.push(d.toString()));
  const listening = await new Promise<Supervisor['listening']>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 180 s:\n${lines.join('\n')}`)), 180_000);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`pushbase distributed exited with ${code} before listening:\n${lines.join('\n')}`));
    });
    createInterface({ input: proc.stdout }).on('line', (line) => {
      lines.push(line);
      const m = /^supervisor \| (\{.*\})$/.exec(line);
      if (m === null) return;
      const msg = JSON.parse(m[1]!) as { msg: string; port: number; admin_port: number; cert_file: string };
      if (msg.msg === 'listening') {
        clearTimeout(timer);
        resolve(msg);
      }
    });
  });
  return { proc, lines, listening, exited };
}

/** The pids whose parent is `pid` (the supervisor's services), from ps by parent id. */
function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    return []; // ps exits 1 when there is none
  }
}

let running: Supervisor | undefined;

afterEach(async () => {
  // A failed test must not leave the supervisor or its services behind.
  if (running !== undefined && running.proc.exitCode === null && running.proc.signalCode === null) {
    const children = childPids(running.proc.pid!);
    running.proc.kill('SIGKILL');
    for (const pid of children) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await running.exited;
  }
  running = undefined;
}, 60_000);

it('serves the API once it says listening, and a SIGTERM stops all four services with exit 0', async () => {
  running = await startSupervisor();
  const { listening, proc } = running;
  const services = childPids(proc.pid!);
  expect(services).toHaveLength(4);
  // No PUSHBASE_GRPC_TOKEN given: the supervisor made one, and the gateway and both services have it.
  for (const service of ['gateway', 'schema', 'records']) {
    const line = running.lines.map((l) => new RegExp(`^${service} +\\| (\\{.*"msg":"listening".*\\})$`).exec(l)?.[1]).find((l) => l !== undefined);
    expect({ service, grpc_token: (JSON.parse(line ?? '{}') as { grpc_token?: unknown }).grpc_token }).toEqual({ service, grpc_token: true });
  }

  const gateway = { port: listening.port, ca: readFileSync(listening.cert_file, 'utf8'), plainHttp: false };
  const created = await requestTo(gateway, 'PUT', '/datasets/sales.by.day', { key, body: { fields: { day: { type: 'date', name: 'Day' } } } });
  expect(created.status).toBe(201);
  const pushed = await requestTo(gateway, 'POST', '/datasets/sales.by.day/data', { key, body: { data: [{ day: '2026-11-23' }] } });
  expect(pushed.status).toBe(200);
  // The projector is one of the four: the push becomes visible through the admin listener.
  await eventually(async () => {
    const res = await requestTo({ port: listening.admin_port, ca: '', plainHttp: true }, 'GET', '/admin/accounts/acme/datasets', { headers: { authorization: `Bearer ${adminToken}` } });
    const listed = (res.body?.datasets ?? []) as { id: string; record_count: number }[];
    return listed.find((d) => d.id === 'sales.by.day' && d.record_count === 1);
  }, { timeoutMs: 30_000 });

  proc.kill('SIGTERM');
  expect(await running.exited).toBe(0);
  const stopped = running.lines.find((l) => l.startsWith('supervisor | stopped:'));
  // Every service exited by itself with code 0, in the stop order (gateway first, projector last).
  expect(stopped).toBe('supervisor | stopped: gateway 0, records 0, schema 0, projector 0');
  for (const pid of services) expect(alive(pid)).toBe(false);
}, 300_000);

it('ends with exit 1, stopping the others, when a service dies on its own', async () => {
  running = await startSupervisor();
  const { proc } = running;
  const services = childPids(proc.pid!);
  expect(services).toHaveLength(4);
  const victim = services[0]!;
  process.kill(victim, 'SIGKILL');
  expect(await running.exited).toBe(1);
  expect(running.lines.some((l) => /exited unexpectedly/.test(l))).toBe(true);
  for (const pid of services) expect(alive(pid)).toBe(false);
}, 300_000);

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { pushbaseServices } from '@pushbase/contracts';
import { connectSchemaService } from '@pushbase/grpc';
import { healthClient } from '../../grpc/test/support';
import { BUNDLE } from '../../../test/helpers/server';
import { redisUrl, useTestRedis } from '../../../test/helpers/redis';
import { KAFKA_BROKERS, useTestTopics } from '../../../test/helpers/kafka';
import { create, outcome, readTopic } from './support';

/*
 * The shipped bundle as it runs in a deployment: two `pushbase schema` processes on one Kafka topic and one
 * Redis prefix, reached over gRPC; the dataset limit holds across them, health says SERVING, and SIGTERM
 * ends each with exit status 0.
 */

interface SchemaProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly lines: string[];
  readonly exited: Promise<number | null>;
}

async function startSchemaProcess(env: Record<string, string>): Promise<SchemaProcess> {
  const child = spawn(process.execPath, [BUNDLE, 'schema'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pushbase schema did not say "listening" within 30 s: ${lines.join('\n')} ${stderr}`)), 30_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      const msg = JSON.parse(line) as { msg?: string; grpc_port?: number };
      if (msg.msg === 'listening' && typeof msg.grpc_port === 'number') {
        clearTimeout(timer);
        resolve(msg.grpc_port);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`pushbase schema exited (${code}) before listening: ${stderr}`));
    });
  });
  return { child, port, lines, exited };
}

const running: SchemaProcess[] = [];
// Declared before the topics and keys, so it runs before they are deleted: whatever a failed test left
// running is stopped by its pid.
afterAll(() => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
});
const kafka = useTestTopics();
const db = useTestRedis();

it('pushbase schema: two processes keep the dataset limit across them over gRPC, report health, and exit 0 on SIGTERM', async () => {
  const topic = await kafka.create('pushbase-schema-cli', 1);
  const prefix = db.prefix();
  const env = {
    PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
    PUSHBASE_KAFKA_TOPIC: topic,
    PUSHBASE_REDIS_URL: redisUrl(),
    PUSHBASE_REDIS_PREFIX: prefix,
    PUSHBASE_GRPC_HOST: '127.0.0.1',
    PUSHBASE_SCHEMA_GRPC_PORT: '0',
  };
  const procs = await Promise.all([startSchemaProcess(env), startSchemaProcess(env)]);
  running.push(...procs);
  const protos = pushbaseServices();
  const clients = procs.map((p) => connectSchemaService(`127.0.0.1:${p.port}`, { protos }));
  const health = healthClient(`127.0.0.1:${procs[0].port}`);
  try {
    await expect(health.check('')).resolves.toBe('SERVING');
    await expect(health.check('pushbase.v1.SchemaService')).resolves.toBe('SERVING');

    const account = `acct-${randomBytes(4).toString('hex')}`;
    const outcomes = await Promise.all(Array.from({ length: 110 }, (_, i) => outcome(create(clients[i % 2]!, account, `ds-${i}`))));
    expect(outcomes.filter((o) => o === 'created')).toHaveLength(100);
    expect(outcomes.filter((o) => o === 'dataset_limit')).toHaveLength(10);
    await expect(clients[1]!.get({ account, id: 'nope' })).rejects.toMatchObject({ code: 'not_found' });
    const created = outcomes.indexOf('created');
    await expect(clients[1]!.get({ account, id: `ds-${created}` })).resolves.toMatchObject({ id: `ds-${created}` });
    expect((await readTopic(topic)).filter((e) => e.type === 'DatasetDefined')).toHaveLength(100);
  } finally {
    health.close();
    for (const c of clients) c.close();
  }
  for (const p of procs) p.child.kill('SIGTERM');
  expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0]);
  for (const p of procs) expect(p.lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain('shutting down');
});

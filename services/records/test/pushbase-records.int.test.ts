import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { pushbaseServices } from '@pushbase/contracts';
import { connectRecordService } from '@pushbase/grpc';
import { healthClient } from '../../grpc/test/support';
import { BUNDLE } from '../../../test/helpers/server';
import { redisUrl, useTestRedis } from '../../../test/helpers/redis';
import { KAFKA_BROKERS, useTestTopics } from '../../../test/helpers/kafka';
import { body, readTopic, SchemaFixture } from './support';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The shipped bundle as a deployment runs it: `pushbase records` says where it listens, reports SERVING,
 * writes over gRPC into the topic (decided in its write-worker threads, refusals crossing back with their
 * code and message), and on SIGTERM turns NOT_SERVING, keeps answering for the drain delay
 * (PUSHBASE_GRPC_DRAIN_MS), drains and exits 0.
 */

const DRAIN_MS = 3000;

const children: ChildProcess[] = [];
// Declared before the topics and keys, so it runs before they are deleted: whatever a failed test left
// running is stopped by its pid.
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
const kafka = useTestTopics();
const db = useTestRedis();

it('pushbase records: listens, serves writes into the topic, reports health, and on SIGTERM answers through the drain delay, then exits 0', async () => {
  const topic = await kafka.create('pushbase-records-cli', 2);
  const prefix = db.prefix();
  const account = `acct-${randomBytes(4).toString('hex')}`;
  await new SchemaFixture(db.redis, prefix).create(account, 'sales', { amount: { type: 'number', name: 'Amount' } }, 'inc-1');

  const child = spawn(process.execPath, [BUNDLE, 'records'], {
    env: {
      ...process.env,
      PUSHBASE_KAFKA_BROKERS: KAFKA_BROKERS.join(','),
      PUSHBASE_KAFKA_TOPIC: topic,
      PUSHBASE_REDIS_URL: redisUrl(),
      PUSHBASE_REDIS_PREFIX: prefix,
      PUSHBASE_GRPC_HOST: '127.0.0.1',
      PUSHBASE_RECORDS_GRPC_PORT: '0',
      PUSHBASE_GRPC_DRAIN_MS: String(DRAIN_MS),
      PUSHBASE_RECORDS_WRITE_WORKERS: '2',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines: { msg?: string; grpc_port?: number; write_workers?: number }[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pushbase records did not say "listening" within 30 s: ${JSON.stringify(lines)} ${stderr}`)), 30_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const msg = JSON.parse(line) as { msg?: string; grpc_port?: number; write_workers?: number };
      lines.push(msg);
      if (msg.msg === 'listening' && typeof msg.grpc_port === 'number') {
        clearTimeout(timer);
        resolve(msg.grpc_port);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`pushbase records exited (${code}) before listening: ${stderr}`));
    });
  });

  const client = connectRecordService(`127.0.0.1:${port}`, { protos: pushbaseServices() });
  const health = healthClient(`127.0.0.1:${port}`);
  try {
    await expect(health.check('')).resolves.toBe('SERVING');
    await expect(health.check('pushbase.v1.RecordService')).resolves.toBe('SERVING');
    expect(lines.find((l) => l.msg === 'listening')?.write_workers).toBe(2);
    await client.append({ account, id: 'sales', json: body([{ amount: 1 }]) });
    await client.replace({ account, id: 'sales', json: body([{ amount: 2 }]) });
    // Refused in a worker: nothing is written, and the answer keeps the domain's code and message.
    await expect(client.append({ account, id: 'sales', json: body([{ amount: 1 }, { amount: 'x' }]) })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/amount/) });
    await expect(client.append({ account, id: 'sales', json: Buffer.from('{"data": [') })).rejects.toMatchObject({ code: 'invalid' });
    await expect(client.append({ account, id: 'nope', json: body([{ amount: 1 }]) })).rejects.toMatchObject({ code: 'not_found' });

    const signalled = Date.now();
    child.kill('SIGTERM');
    // Probes see NOT_SERVING while writes are still taken from those that have not noticed yet.
    await eventually(async () => (await health.check('')) === 'NOT_SERVING', { what: 'health NOT_SERVING', timeoutMs: 10_000 });
    await client.append({ account, id: 'sales', json: body([{ amount: 3 }]) });
    expect(await exited).toBe(0);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(DRAIN_MS);
  } finally {
    health.close();
    client.close();
  }
  // What the workers encoded is what the topic holds: the incarnation validated against, the records as sent.
  const events = await readTopic(kafka.admin, topic);
  expect(events.map((e) => [e.type, e.incarnation, 'records' in e ? e.records : undefined])).toEqual([
    ['RecordsAppended', 'inc-1', [{ amount: 1 }]],
    ['RecordsReplaced', 'inc-1', [{ amount: 2 }]],
    ['RecordsAppended', 'inc-1', [{ amount: 3 }]],
  ]);
  expect(lines.map((l) => l.msg)).toContain('shutting down');
});

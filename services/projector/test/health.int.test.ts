/*
 * The projector's probes against real Kafka, ClickHouse and Redis: /readyz once it reads, /healthz ok while
 * it folds and catches up, then 503 "stalled" once a write hangs between landing and its commit (the
 * afterWrite hook never returns) for longer than PUSHBASE_PROJECTOR_STALL_MS while events wait.
 */
import { randomBytes } from 'node:crypto';
import { eventsOf, type Step } from './event-sequences';
import { endsOf, eventually, infra, produce, quietLog, randomName, untilCommitted, type Infra } from './support';
import { loadProjectorConfig, runProjector } from '../src';

jest.setTimeout(120_000);

const STALL_MS = 5000;
let env: Infra;
beforeAll(async () => {
  env = await infra(2);
});
afterAll(async () => {
  await env?.close();
});

async function probe(port: number, path: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.json() };
}

const steps = (seed: number): Step[] => [
  { kind: 'define', ds: 0, keyed: false },
  { kind: 'append', ds: 0, count: 3, seed, deleteBy: null, repeat: 1 },
];

it('answers /readyz once it reads, /healthz ok while it catches up, and 503 stalled once a write hangs with events waiting', async () => {
  const account = `acct-${randomBytes(5).toString('hex')}`;
  const group = randomName('pb-proj-health');
  let hang = false;
  const hung: (() => void)[] = [];
  const running = await runProjector(loadProjectorConfig(env.env(group, { PUSHBASE_PROJECTOR_STALL_MS: String(STALL_MS) })), {
    log: quietLog,
    // Once `hang` is set, a write that landed never gets to its commit: the hang health.ts is for.
    afterWrite: () => (hang ? new Promise<void>((resolve) => hung.push(resolve)) : undefined),
  });
  try {
    expect(await probe(running.metricsPort, '/readyz')).toEqual({ status: 200, body: { status: 'reading' } });
    const first = await produce(env.appender, eventsOf(steps(1), { account, datasets: ['sales'], incarnationPrefix: account }));
    await untilCommitted(env.admin, group, env.topic, endsOf(first));
    // Caught up: lag 0, however long it stays idle.
    await new Promise((r) => setTimeout(r, STALL_MS + 1500));
    expect(await probe(running.metricsPort, '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });

    hang = true;
    const producedAt = Date.now();
    const more = await produce(env.appender, eventsOf(steps(2), { account, datasets: ['sales'], incarnationPrefix: account }));
    const partition = more[0]!.partition;
    await eventually(() => hung.length > 0, { what: 'the write to hang', timeoutMs: 30_000 });
    let last: { status: number; body: unknown } = { status: 0, body: undefined };
    await eventually(async () => {
      last = await probe(running.metricsPort, '/healthz');
      return last.status === 503;
    }, { what: '/healthz to answer 503', timeoutMs: 30_000 });
    // Not before the stall time (counted from the last look that saw no lag: at most one look, a second
    // here, before the events came), and for the partition that waits.
    expect(Date.now() - producedAt).toBeGreaterThanOrEqual(STALL_MS - 1000);
    expect(last.body).toEqual({ status: 'stalled', partitions: [{ partition, lag: expect.any(Number), stalled_seconds: expect.any(Number) }] });
    expect((last.body as { partitions: { lag: number }[] }).partitions[0]!.lag).toBeGreaterThan(0);

    // Released: the commit goes out and the member is healthy again.
    hang = false;
    for (const resolve of hung.splice(0)) resolve();
    await untilCommitted(env.admin, group, env.topic, endsOf(more));
    await eventually(async () => (await probe(running.metricsPort, '/healthz')).status === 200, { what: '/healthz to answer 200 again', timeoutMs: 30_000 });
  } finally {
    hang = false;
    for (const resolve of hung.splice(0)) resolve();
    await running.stop();
  }
  expect(await fetch(`http://127.0.0.1:${running.metricsPort}/readyz`).then(() => 'served', () => 'closed')).toBe('closed');
});

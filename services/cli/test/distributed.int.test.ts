import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DistributedStack, type ServiceExit, type ServiceName } from '../src/distributed';
import { alive } from '../../../deploy/proc';

/*
 * The supervisor of `npm run start:distributed` and of the distributed tests, over stand-in services
 * (fake-bundle.js): the start order and the gRPC addresses handed to the gateway, the stop order, one
 * service killed and restarted on the same port, an unexpected exit reported, a failed migration, a service
 * that fails to start.
 */

const BUNDLE = path.join(__dirname, 'fake-bundle.js');

function setup(extra: Record<string, string> = {}) {
  const dir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-supervisor-'));
  const events = path.join(dir, 'events');
  writeFileSync(events, '');
  const pidFile = path.join(dir, 'pids');
  const unexpected: { service: ServiceName; exit: ServiceExit }[] = [];
  const lines: string[] = [];
  const start = () =>
    DistributedStack.start({
      bundle: BUNDLE,
      env: { ...process.env, FAKE_EVENTS: events, FAKE_PIDS: pidFile, ...extra },
      readyTimeoutMs: 30_000,
      stopTimeoutMs: 10_000,
      onLine: (service, line) => lines.push(`${service} ${line}`),
      onUnexpectedExit: (service, exit) => unexpected.push({ service, exit }),
    });
  const read = (): string[] => readFileSync(events, 'utf8').split('\n').filter((l) => l !== '');
  /** Every service process started so far, by its pid. */
  const pids = (): Map<string, number> =>
    new Map(
      (existsSync(pidFile) ? readFileSync(pidFile, 'utf8') : '')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => [l.split(' ')[0]!, Number(l.split(' ')[1])]),
    );
  return { start, read, unexpected, lines, pids };
}

/** Processes a failing test may have left behind, killed by pid after each test. */
const leftovers: number[] = [];
afterEach(() => {
  for (const pid of leftovers.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

const stacks: DistributedStack[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
});

it('migrates first, starts the gateway last with the addresses the services picked, and stops the gateway first and the projector last', async () => {
  const t = setup();
  const stack = await t.start();
  stacks.push(stack);
  const events = t.read();
  expect(events[0]).toBe('start migrate');
  expect(events.at(-1)).toBe('start gateway');
  expect(events.slice(1, 4).sort()).toEqual(['start projector', 'start records', 'start schema']);

  expect(stack.addresses.schema).toMatch(/^127\.0\.0\.1:\d+$/);
  expect(stack.addresses.records).toMatch(/^127\.0\.0\.1:\d+$/);
  expect(stack.addresses.schema).not.toBe(stack.addresses.records);
  const gatewayLine = t.lines.map((l) => /^gateway (\{.*"listening".*\})$/.exec(l)?.[1]).find((l) => l !== undefined);
  expect(JSON.parse(gatewayLine!)).toMatchObject({ schema: stack.addresses.schema, records: stack.addresses.records });
  expect(stack.gateway).toEqual({ port: expect.any(Number), adminPort: stack.gateway.port + 1, certFile: null });
  const pids = (['projector', 'schema', 'records', 'gateway'] as const).map((s) => stack.pid(s));
  expect(new Set(pids).size).toBe(4);

  const exits = await stack.stop();
  expect(Object.values(exits).every((e) => e.code === 0)).toBe(true);
  const stops = t.read().filter((e) => e.startsWith('stop'));
  expect(stops[0]).toBe('stop gateway');
  expect(stops.slice(1, 3).sort()).toEqual(['stop records', 'stop schema']);
  expect(stops[3]).toBe('stop projector');
  expect(t.unexpected).toEqual([]);
  for (const s of ['projector', 'schema', 'records', 'gateway'] as const) expect(stack.pid(s)).toBeUndefined();
});

it('kills one service and restarts it on the same port; an exit nobody asked for is reported, not restarted', async () => {
  const t = setup();
  const stack = await t.start();
  stacks.push(stack);
  const records = stack.addresses.records;
  const before = stack.pid('records');

  expect(await stack.kill('records')).toEqual({ code: null, signal: 'SIGKILL' });
  expect(stack.pid('records')).toBeUndefined();
  await stack.restart('records');
  expect(stack.pid('records')).not.toBe(before);
  expect(stack.pid('records')).toBeDefined();
  const restartedLine = t.lines.filter((l) => l.startsWith('records {') && l.includes('listening')).at(-1)!;
  expect(`127.0.0.1:${JSON.parse(restartedLine.slice('records '.length)).grpc_port}`).toBe(records);
  expect(t.unexpected).toEqual([]);

  process.kill(stack.pid('projector')!, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while (t.unexpected.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(t.unexpected).toEqual([{ service: 'projector', exit: { code: null, signal: 'SIGKILL' } }]);
  expect(stack.pid('projector')).toBeUndefined();
  await stack.stop();
});

it('refuses to start when the migration fails, saying why, and leaves nothing running', async () => {
  const t = setup({ FAKE_MIGRATE_FAILS: 'true' });
  await expect(t.start()).rejects.toThrow(/pushbase migrate failed \(exit 3\)[\s\S]*cannot reach ClickHouse/);
  expect(t.read()).toEqual(['start migrate']);
});

it('stops the services it started when one of them fails to start, and says which failed', async () => {
  const t = setup({ FAKE_FAILS: 'schema', FAKE_READY_AFTER_MS: '500' });
  await expect(t.start()).rejects.toThrow(/schema exited \(1\) before it was ready:[\s\S]*cannot bind its port/);
  const pids = t.pids();
  leftovers.push(...pids.values());
  expect([...pids.keys()].sort()).toEqual(['projector', 'records', 'schema']);
  expect([...pids].filter(([, pid]) => alive(pid))).toEqual([]);
  // The two that were still starting were ready, then stopped; the gateway never started.
  expect(t.read().filter((e) => e.startsWith('stop')).sort()).toEqual(['stop projector', 'stop records']);
});

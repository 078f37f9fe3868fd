/*
 * One account's share of the process (account-gate.ts): its requests beyond the share wait their turn
 * without holding up another account's, and beyond the queue they are refused.
 */
import { createServer } from 'node:http';
import { AccountGate, createGatewayApp, hashApiKey, MemoryKeyStore, memoryRateLimiter, SlidingWindowRateLimiter } from '../src';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

it('works on at most `concurrency` requests of an account at once, the rest in arrival order', async () => {
  const gate = new AccountGate({ concurrency: 2, maxQueued: 10 });
  const started: number[] = [];
  const hold = latch();
  const runs = [0, 1, 2, 3].map((i) =>
    gate.run('a', async () => {
      started.push(i);
      await hold.promise;
      return i;
    }),
  );
  await tick();
  expect(started).toEqual([0, 1]);
  hold.open();
  await expect(Promise.all(runs)).resolves.toEqual([0, 1, 2, 3]);
  expect(started).toEqual([0, 1, 2, 3]);
});

it('lets another account through while one account has its share in progress and more waiting', async () => {
  const gate = new AccountGate({ concurrency: 1, maxQueued: 10 });
  const hold = latch();
  const busy = [gate.run('noisy', () => hold.promise), gate.run('noisy', () => hold.promise)];
  await tick();
  await expect(gate.run('quiet', () => Promise.resolve('served'))).resolves.toBe('served');
  hold.open();
  await Promise.all(busy);
});

it('refuses with 429 account_busy beyond the queue, and forgets an account once idle', async () => {
  const gate = new AccountGate({ concurrency: 1, maxQueued: 2 });
  const hold = latch();
  const accepted = [1, 2, 3].map(() => gate.run('a', () => hold.promise));
  await tick();
  await expect(gate.run('a', () => Promise.resolve())).rejects.toMatchObject({ status: 429, code: 'account_busy', headers: { 'Retry-After': '1' } });
  expect(gate.accounts).toBe(1);
  hold.open();
  await Promise.all(accepted);
  expect(gate.accounts).toBe(0);
});

it('frees the turn of a request that failed', async () => {
  const gate = new AccountGate({ concurrency: 1, maxQueued: 1 });
  await expect(gate.run('a', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  await expect(gate.run('a', () => Promise.resolve(1))).resolves.toBe(1);
});

const BODY = '{"data":[]}';

describe('in the gateway', () => {
  it("hands the record service at most an account's share of its writes at once, counting their bodies; another account's go straight through", async () => {
    const keys = new MemoryKeyStore();
    keys.add(hashApiKey('key-noisy-0123456789abcdef'), 'noisy');
    keys.add(hashApiKey('key-quiet-0123456789abcdef'), 'quiet');
    const hold = latch();
    const inService: Record<string, number> = { noisy: 0, quiet: 0 };
    let noisyPeak = 0;
    const records = {
      append: async (req: { account: string }) => {
        inService[req.account]!++;
        noisyPeak = Math.max(noisyPeak, inService.noisy!);
        if (req.account === 'noisy') await hold.promise;
        inService[req.account]!--;
        return { replayed: false };
      },
      replace: () => Promise.resolve({ replayed: false }),
    };
    const app = createGatewayApp({
      schemas: { findOrCreate: () => Promise.reject(new Error('unused')), get: () => Promise.reject(new Error('unused')), delete: () => Promise.resolve({ replayed: false }) },
      records,
      keys,
      rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
      authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
      log: () => undefined,
      accountShare: { concurrency: 3, maxQueued: 100 },
      // Room for 3 bodies of an account: those in the record service still count (below).
      uploads: { bodyTimeoutMs: 30_000, bytesPerAccount: 3 * BODY.length, bytesPerProcess: 1_000_000 },
    });
    const handle = app.callback();
    const server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const post = (key: string) =>
      fetch(`http://127.0.0.1:${port}/datasets/d/data`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}`, 'content-type': 'application/json' }, body: BODY });
    try {
      const noisy = Array.from({ length: 3 }, () => post('key-noisy-0123456789abcdef'));
      for (let i = 0; i < 50 && inService.noisy! < 3; i++) await new Promise((r) => setTimeout(r, 10));
      expect((await post('key-quiet-0123456789abcdef')).status).toBe(200);
      expect(noisyPeak).toBe(3);
      // A body waiting for its turn, or in the service, is still in memory: the account's budget holds it.
      expect((await post('key-noisy-0123456789abcdef')).status).toBe(429);
      hold.open();
      expect((await Promise.all(noisy)).map((r) => r.status)).toEqual([200, 200, 200]);
      expect(noisyPeak).toBe(3);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

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
  const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 });
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
  const gate = new AccountGate({ concurrency: 1, maxQueued: 10, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 });
  const hold = latch();
  const busy = [gate.run('noisy', () => hold.promise), gate.run('noisy', () => hold.promise)];
  await tick();
  await expect(gate.run('quiet', () => Promise.resolve('served'))).resolves.toBe('served');
  hold.open();
  await Promise.all(busy);
});

it('refuses with 429 account_busy beyond the queue, and forgets an account once idle', async () => {
  const gate = new AccountGate({ concurrency: 1, maxQueued: 2, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 });
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
  const gate = new AccountGate({ concurrency: 1, maxQueued: 1, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 });
  await expect(gate.run('a', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  await expect(gate.run('a', () => Promise.resolve(1))).resolves.toBe(1);
});

/** A clock that moves only when work is done or a wait is slept through. */
function fakeClock(): { now: () => number; sleep: (ms: number) => Promise<void>; spend: (ms: number) => Promise<void>; slept: number[]; sleptMs: () => number } {
  let t = 0;
  const slept: number[] = [];
  return {
    now: () => t,
    sleep: (ms) => {
      slept.push(ms);
      t += ms;
      return Promise.resolve();
    },
    spend: (ms) => {
      t += ms;
      return Promise.resolve();
    },
    slept,
    sleptMs: () => slept.reduce((a, b) => a + b, 0),
  };
}

describe('the read budget', () => {
  it('never holds up an account whose reads stay inside it', async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 100, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    // 10 ms reads every 200 ms: 50 ms of reads a second.
    for (let i = 0; i < 100; i++) {
      await gate.run('light', () => clock.spend(10), 'read');
      await clock.spend(190);
    }
    expect(clock.slept).toEqual([]);
  });

  it("holds an account's reads to its read time a second once the first second's worth is spent", async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 100, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    let reads = 0;
    // 60 ms reads back to back for 20 s of the clock.
    while (clock.now() < 20_000) {
      await gate.run('heavy', () => clock.spend(60), 'read');
      reads++;
    }
    // Without the budget: 333 reads. With it: 100 ms of reads a second, plus the first second's worth.
    expect(reads * 60).toBeGreaterThanOrEqual(1_900);
    expect(reads * 60).toBeLessThanOrEqual(2_200);
    expect(clock.slept.length).toBeGreaterThan(0);
  });

  it("does not charge writes, nor make another account wait for one account's debt", async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 100, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    await gate.run('heavy', () => clock.spend(1_000), 'read');
    await gate.run('heavy', () => clock.spend(1_000));
    await gate.run('other', () => clock.spend(10), 'read');
    expect(clock.slept).toEqual([]);
    // heavy spent 1,000 ms with 100 to spend, refilled to 100 when charged: 900 in debt, less the 101 ms
    // refilled over the write and the other account's read: about 8 s to pay back.
    await gate.run('heavy', () => clock.spend(10), 'read');
    expect(clock.sleptMs()).toBeGreaterThanOrEqual(7_900);
    expect(clock.sleptMs()).toBeLessThanOrEqual(8_100);
  });

  it('charges a failed read at most a second of its budget, so an outage does not lock accounts out for long', async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 100, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    const timedOut = () => clock.spend(30_000).then(() => Promise.reject(new Error('store unavailable')));
    await expect(gate.run('a', timedOut, 'read')).rejects.toThrow('store unavailable');
    await expect(gate.run('a', timedOut, 'read')).rejects.toThrow('store unavailable');
    await gate.run('a', () => clock.spend(10), 'read');
    // Charged 100 each, refilled to full before each charge: 0 then -100 after the second; 1 s to pay back.
    expect(clock.sleptMs()).toBeLessThanOrEqual(1_100);
  });

  it('is off at 0', async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ concurrency: 2, maxQueued: 10, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    for (let i = 0; i < 10; i++) await gate.run('heavy', () => clock.spend(1_000), 'read');
    expect(clock.slept).toEqual([]);
  });
});

describe('the write budget', () => {
  const share = { concurrency: 2, maxQueued: 10, readMsPerSecond: 0, writeBytesPerSecond: 1_000, writeBurstBytes: 0 };

  it('never holds up an account whose writes stay inside it', async () => {
    const clock = fakeClock();
    const gate = new AccountGate(share, clock);
    // 100-byte bodies every 200 ms: 500 bytes a second.
    for (let i = 0; i < 100; i++) {
      await gate.run('light', () => clock.spend(5), 'write', 100);
      await clock.spend(195);
    }
    expect(clock.slept).toEqual([]);
  });

  it("holds an account's writes to its bytes a second once the first second's worth is spent", async () => {
    const clock = fakeClock();
    const gate = new AccountGate(share, clock);
    let bytes = 0;
    // 400-byte bodies back to back, each taking 1 ms, for 20 s of the clock.
    while (clock.now() < 20_000) {
      await gate.run('heavy', () => clock.spend(1), 'write', 400);
      bytes += 400;
    }
    // Without the budget: 8 MB. With it: 1,000 bytes a second, plus the first second's worth, the body that
    // overdrew it, and the last one, let through as the clock passed 20 s.
    expect(bytes).toBeGreaterThanOrEqual(20_000);
    expect(bytes).toBeLessThanOrEqual(21_800);
  });

  it('lets a body larger than a second through, then makes the next write pay its debt back', async () => {
    const clock = fakeClock();
    const gate = new AccountGate(share, clock);
    await gate.run('big', () => Promise.resolve(), 'write', 5_000);
    expect(clock.slept).toEqual([]);
    await gate.run('big', () => Promise.resolve(), 'write', 10);
    // 4,000 bytes in debt at 1,000 a second.
    expect(clock.sleptMs()).toBeGreaterThanOrEqual(4_000);
    expect(clock.sleptMs()).toBeLessThanOrEqual(4_100);
  });

  it("makes no other account wait for one account's debt, and does not charge reads or bodiless writes", async () => {
    const clock = fakeClock();
    const gate = new AccountGate(share, clock);
    await gate.run('heavy', () => Promise.resolve(), 'write', 1_500);
    await gate.run('other', () => Promise.resolve(), 'write', 500);
    await gate.run('heavy', () => clock.spend(10), 'read');
    expect(clock.slept).toEqual([]);
    // 500 in debt: a delete waits it out like any write, but adds nothing to it.
    await gate.run('heavy', () => Promise.resolve(), 'write');
    await gate.run('heavy', () => Promise.resolve(), 'write');
    expect(clock.sleptMs()).toBeGreaterThanOrEqual(490);
    expect(clock.sleptMs()).toBeLessThanOrEqual(600);
  });

  it('looks again every second, however deep the debt', async () => {
    const clock = fakeClock();
    const gate = new AccountGate(share, clock);
    await gate.run('big', () => Promise.resolve(), 'write', 10_000_000);
    await gate.run('big', () => Promise.resolve(), 'write', 10);
    expect(Math.max(...clock.slept)).toBe(1000);
    expect(clock.sleptMs()).toBeGreaterThanOrEqual(9_999_000);
  });

  it('lets an idle account send up to its burst at once, then holds it to its bytes a second', async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ ...share, writeBurstBytes: 4_000 }, clock);
    for (let i = 0; i < 4; i++) await gate.run('bulk', () => Promise.resolve(), 'write', 1_000);
    expect(clock.slept).toEqual([]);
    await gate.run('bulk', () => Promise.resolve(), 'write', 1_000);
    await gate.run('bulk', () => Promise.resolve(), 'write', 1_000);
    // The burst spent, the fifth body went into debt: the sixth waited about a second.
    expect(clock.sleptMs()).toBeGreaterThanOrEqual(1_000);
    expect(clock.sleptMs()).toBeLessThanOrEqual(1_100);
  });

  it('is off at 0', async () => {
    const clock = fakeClock();
    const gate = new AccountGate({ ...share, writeBytesPerSecond: 0, writeBurstBytes: 0 }, clock);
    for (let i = 0; i < 10; i++) await gate.run('heavy', () => Promise.resolve(), 'write', 1_000_000);
    expect(clock.slept).toEqual([]);
  });
});

const BODY = '{"data":[]}';

type GatewayDeps = Parameters<typeof createGatewayApp>[0];
const unused = (): Promise<never> => Promise.reject(new Error('unused'));

/** A gateway of two accounts, noisy and quiet (key `key-<account>-0123456789abcdef`), on a loopback port of its own. */
async function serve(deps: Pick<GatewayDeps, 'accountShare'> & Partial<GatewayDeps>): Promise<{ port: number; close: () => Promise<void> }> {
  const keys = new MemoryKeyStore();
  keys.add(hashApiKey('key-noisy-0123456789abcdef'), 'noisy');
  keys.add(hashApiKey('key-quiet-0123456789abcdef'), 'quiet');
  const app = createGatewayApp({
    schemas: { findOrCreate: unused, get: unused, delete: unused },
    records: { append: unused, replace: unused },
    keys,
    rateLimiter: new SlidingWindowRateLimiter(1000, 60_000),
    authFailureLimiter: memoryRateLimiter(100, 60, 'af'),
    log: () => undefined,
    ...deps,
  });
  const handle = app.callback();
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, close: () => new Promise((r) => server.close(() => r())) };
}

describe('in the gateway', () => {
  it("hands the record service at most an account's share of its writes at once, counting their bodies; another account's go straight through", async () => {
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
    const { port, close } = await serve({
      records,
      accountShare: { concurrency: 3, maxQueued: 100, readMsPerSecond: 0, writeBytesPerSecond: 0, writeBurstBytes: 0 },
      // Room for 3 bodies of an account: those in the record service still count (below).
      uploads: { bodyTimeoutMs: 30_000, bytesPerAccount: 3 * BODY.length, bytesPerProcess: 1_000_000 },
    });
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
      await close();
    }
  });

  it("makes a reader past its read time wait, and not another account's reads", async () => {
    const clock = fakeClock();
    // Every listing takes 100 ms of the store's time.
    const readModel = { listDatasets: () => clock.spend(100).then(() => []) };
    const { port, close } = await serve({
      accountShare: { concurrency: 2, maxQueued: 100, readMsPerSecond: 100, writeBytesPerSecond: 0, writeBurstBytes: 0 },
      gateClock: clock,
      read: { readModel: readModel as never, uiDir: undefined, ratePerMinute: 1000 },
    });
    const list = async (account: string): Promise<void> => {
      const res = await fetch(`http://127.0.0.1:${port}/read/v1/accounts/${account}/datasets`, { headers: { authorization: `Basic ${Buffer.from(`key-${account}-0123456789abcdef:`).toString('base64')}` } });
      expect(res.status).toBe(200);
    };
    try {
      // 100 ms of reads a second: two listings spend the budget, the third waits about 0.8 s.
      for (let i = 0; i < 3; i++) await list('noisy');
      expect(clock.sleptMs()).toBeGreaterThanOrEqual(700);
      // noisy is in debt again; quiet's budget is its own.
      const waited = clock.slept.length;
      await list('quiet');
      expect(clock.slept.length).toBe(waited);
    } finally {
      await close();
    }
  });

  it("charges a write's body to its account's write budget, and not another account's", async () => {
    const clock = fakeClock();
    const appended: string[] = [];
    const { port, close } = await serve({
      records: {
        append: (req: { account: string }) => {
          appended.push(req.account);
          return Promise.resolve({ replayed: false });
        },
        replace: unused,
      },
      accountShare: { concurrency: 2, maxQueued: 100, readMsPerSecond: 0, writeBytesPerSecond: 100, writeBurstBytes: 0 },
      gateClock: clock,
    });
    // 60 bytes of body.
    const body = JSON.stringify({ data: [{ note: 'x'.repeat(38) }] });
    const post = async (account: string): Promise<void> => {
      const res = await fetch(`http://127.0.0.1:${port}/datasets/d/data`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`key-${account}-0123456789abcdef:`).toString('base64')}`, 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(200);
    };
    try {
      expect(body.length).toBe(60);
      // 100 bytes a second: two bodies spend it (20 in debt), the third waits about 0.2 s.
      for (let i = 0; i < 3; i++) await post('noisy');
      expect(clock.sleptMs()).toBeGreaterThanOrEqual(200);
      const waited = clock.slept.length;
      await post('quiet');
      expect(clock.slept.length).toBe(waited);
      expect(appended).toEqual(['noisy', 'noisy', 'noisy', 'quiet']);
    } finally {
      await close();
    }
  });
});

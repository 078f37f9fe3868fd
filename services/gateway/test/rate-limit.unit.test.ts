import { memoryRateLimiter, SlidingWindowRateLimiter } from '../src/rate-limit';

describe('the rolling per-key window', () => {
  let now = 1_000_000;
  const clock = (): number => now;

  it('refuses the 61st request within any rolling minute and does not count refusals', async () => {
    const rl = new SlidingWindowRateLimiter(60, 60_000, clock);
    for (let i = 0; i < 60; i++) expect((await rl.consume('k')).allowed).toBe(true);
    const refused = await rl.consume('k');
    expect(refused).toEqual({ allowed: false, limit: 60, remaining: 0, resetMs: 60_000 });
    now += 30_000;
    for (let i = 0; i < 5; i++) expect((await rl.consume('k')).allowed).toBe(false);
    now += 30_000; // the first 60 leave the window together
    expect(await rl.consume('k')).toMatchObject({ allowed: true, remaining: 59 });
  });

  it('is rolling, not fixed: a burst across a window boundary cannot exceed the limit', async () => {
    now = 0;
    const rl = new SlidingWindowRateLimiter(3, 2_000, clock);
    expect((await rl.consume('k')).allowed).toBe(true); // t=0
    now = 1_500;
    expect((await rl.consume('k')).allowed).toBe(true);
    expect((await rl.consume('k')).allowed).toBe(true);
    now = 2_100; // only the t=0 request has left the window
    expect((await rl.consume('k')).allowed).toBe(true);
    expect(await rl.consume('k')).toEqual({ allowed: false, limit: 3, remaining: 0, resetMs: 1_400 });
  });

  it('keeps keys apart and forgets idle ones', async () => {
    now = 0;
    const rl = new SlidingWindowRateLimiter(1, 1_000, clock);
    expect((await rl.consume('a')).allowed).toBe(true);
    expect((await rl.consume('a')).allowed).toBe(false);
    expect((await rl.consume('b')).allowed).toBe(true);
    now = 5_000;
    expect(await rl.consume('a')).toMatchObject({ allowed: true, remaining: 0, resetMs: 1_000 });
  });
});

/*
 * A wall-clock step (NTP, a VM resumed after hours) must not move the limits. jest's fake timers stand in
 * for the machine: `setSystemTime` steps Date only, `advanceTimersByTime` lets real time pass (Date,
 * performance.now() and timers together).
 */
describe('a wall-clock step', () => {
  const HOUR = 3_600_000;
  beforeEach(() => {
    jest.useFakeTimers({ now: new Date('2026-03-29T01:00:00Z') });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('back by an hour does not keep a key refused for that hour: the per-key window runs on a monotonic clock', async () => {
    const rl = new SlidingWindowRateLimiter(2, 60_000);
    expect((await rl.consume('k')).allowed).toBe(true);
    expect((await rl.consume('k')).allowed).toBe(true);
    expect(await rl.consume('k')).toMatchObject({ allowed: false, resetMs: 60_000 });
    jest.setSystemTime(Date.now() - HOUR);
    jest.advanceTimersByTime(30_000);
    expect(await rl.consume('k')).toMatchObject({ allowed: false, resetMs: 30_000 });
    jest.advanceTimersByTime(30_000);
    expect(await rl.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('forward by an hour does not empty the window early', async () => {
    const rl = new SlidingWindowRateLimiter(2, 60_000);
    await rl.consume('k');
    await rl.consume('k');
    jest.setSystemTime(Date.now() + HOUR);
    expect(await rl.consume('k')).toMatchObject({ allowed: false, resetMs: 60_000 });
  });

  it('back by an hour neither lengthens the failed-auth guard\'s block nor its Retry-After', async () => {
    const guard = memoryRateLimiter(2, 60, `step-${Math.random()}`);
    await guard.consume('203.0.113.7');
    await guard.consume('203.0.113.7');
    expect(await guard.isBlocked('203.0.113.7')).toMatchObject({ allowed: false, resetMs: 60_000 });
    jest.setSystemTime(Date.now() - HOUR);
    // The library computes the wait from Date.now(): without the bound it would say 3660 s.
    expect(await guard.isBlocked('203.0.113.7')).toMatchObject({ allowed: false, resetMs: 60_000 });
    expect((await guard.consume('203.0.113.7')).resetMs).toBeLessThanOrEqual(60_000);
    // The window itself ends by a timer, on time.
    jest.advanceTimersByTime(60_000);
    expect(await guard.isBlocked('203.0.113.7')).toBeUndefined();
    expect(await guard.consume('203.0.113.7')).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('forward by an hour never yields a negative Retry-After from the guard', async () => {
    const guard = memoryRateLimiter(1, 60, `step-${Math.random()}`);
    await guard.consume('198.51.100.1');
    jest.setSystemTime(Date.now() + HOUR);
    const blocked = await guard.isBlocked('198.51.100.1');
    expect(blocked?.resetMs).toBeGreaterThanOrEqual(0);
  });
});

import { SlidingWindowRateLimiter } from '../src/rate-limit';

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

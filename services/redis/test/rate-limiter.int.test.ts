import { RedisRateLimiter } from '@pushbase/redis';
import type { Redis } from 'ioredis';
import { connectTestRedis, deleteUnder, randomPrefix } from '../../../test/helpers/redis';

/*
 * Two gateways, each with its own limiter and its own connection, on one Redis: the limit holds for the
 * key in total, in any rolling window, and refused requests never count.
 */
describe('RedisRateLimiter across two gateways', () => {
  let a: Redis;
  let b: Redis;
  let prefix: string;
  beforeEach(async () => {
    [a, b] = await Promise.all([connectTestRedis(), connectTestRedis()]);
    prefix = randomPrefix();
  });
  afterEach(async () => {
    await deleteUnder(a, prefix);
    await Promise.all([a.quit(), b.quit()]);
  });

  it('allows 60 in a minute in total: concurrent requests from both, the 61st refused', async () => {
    const gateways = [new RedisRateLimiter(a, { prefix }), new RedisRateLimiter(b, { prefix })];
    const decisions = await Promise.all(Array.from({ length: 150 }, (_, i) => gateways[i % 2]!.consume('acme')));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(60);
    const remaining = decisions.filter((d) => d.allowed).map((d) => d.remaining).sort((x, y) => x - y);
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i));
    await expect(gateways[0]!.consume('acme')).resolves.toMatchObject({ allowed: false, remaining: 0 });
    await expect(gateways[1]!.consume('acme')).resolves.toMatchObject({ allowed: false, remaining: 0 });
    // Another key has its own minute.
    await expect(gateways[1]!.consume('globex')).resolves.toMatchObject({ allowed: true, remaining: 59 });
  });

  it('rolls the window: requests come back as the oldest leave it, refused ones never counted', async () => {
    // 5 per 3 s keeps the test short; the first 3 requests at t0, the other 2 about 1.5 s later.
    const windowMs = 3000;
    const one = new RedisRateLimiter(a, { prefix, limit: 5, windowMs });
    const two = new RedisRateLimiter(b, { prefix, limit: 5, windowMs });
    const t0 = Date.now();
    for (let i = 0; i < 3; i++) await expect(one.consume('k')).resolves.toMatchObject({ allowed: true });
    await new Promise((r) => setTimeout(r, windowMs / 2));
    for (let i = 0; i < 2; i++) await expect(two.consume('k')).resolves.toMatchObject({ allowed: true });
    const laterExpiry = Date.now() + windowMs;
    const refused = await two.consume('k');
    expect(refused).toMatchObject({ allowed: false, remaining: 0 });
    // The first 3 leave the window about 1.5 s from now (Redis's clock, not ours).
    expect(refused.resetMs).toBeGreaterThan(windowMs / 2 - 700);
    expect(refused.resetMs).toBeLessThanOrEqual(windowMs / 2 + 50);

    // Poll from both gateways: every refusal here would fill the window for good if refusals counted.
    let polls = 0;
    const regained: number[] = [];
    while (regained.length < 3) {
      if (Date.now() - t0 > 3 * windowMs) throw new Error(`only ${regained.length} of 3 requests came back after ${polls} polls`);
      const d = await (polls++ % 2 === 0 ? one : two).consume('k');
      if (d.allowed) regained.push(Date.now() - t0);
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(polls).toBeGreaterThan(10);
    // Not before the first 3 left the window (allowing for the two clocks' read times)…
    expect(regained[0]).toBeGreaterThanOrEqual(windowMs - 300);
    // …and the last 2 are still in it, so the window is full again: the next request is refused.
    expect(Date.now()).toBeLessThan(laterExpiry - 200);
    await expect(one.consume('k')).resolves.toMatchObject({ allowed: false, remaining: 0 });
  }, 30_000);
});

import type { RateLimiter } from '@pushbase/contracts';

/** What every RateLimiter adapter (memory now, Redis later) promises, for a limit of `limit` per window. */
export function describeRateLimiterContract(name: string, limit: number, make: () => Promise<{ limiter: RateLimiter; cleanup(): Promise<void> }>): void {
  describe(`RateLimiter contract: ${name}`, () => {
    let f: { limiter: RateLimiter; cleanup(): Promise<void> };
    beforeEach(async () => {
      f = await make();
    });
    afterEach(async () => {
      await f.cleanup();
    });

    it(`allows ${limit} requests per key, refuses the next, and says when to retry`, async () => {
      for (let i = 1; i <= limit; i++) {
        const d = await f.limiter.consume('k1', limit);
        expect(d).toMatchObject({ allowed: true, limit, remaining: limit - i });
      }
      const refused = await f.limiter.consume('k1', limit);
      expect(refused).toMatchObject({ allowed: false, limit, remaining: 0 });
      expect(refused.resetMs).toBeGreaterThan(0);
      expect(refused.resetMs).toBeLessThanOrEqual(60_000);
    });

    it('counts keys separately', async () => {
      for (let i = 0; i < limit; i++) await f.limiter.consume('k1', limit);
      await expect(f.limiter.consume('k1', limit)).resolves.toMatchObject({ allowed: false });
      await expect(f.limiter.consume('k2', limit)).resolves.toMatchObject({ allowed: true, remaining: limit - 1 });
    });

    it('keeps refusing while over the limit without granting extra requests', async () => {
      for (let i = 0; i < limit; i++) await f.limiter.consume('k1', limit);
      for (let i = 0; i < 5; i++) await expect(f.limiter.consume('k1', limit)).resolves.toMatchObject({ allowed: false, remaining: 0 });
    });

    it('decides concurrent requests exactly: no more than the limit get through', async () => {
      const all = await Promise.all(Array.from({ length: limit * 2 }, () => f.limiter.consume('burst', limit)));
      expect(all.filter((d) => d.allowed)).toHaveLength(limit);
    });

    it('applies the limit given with each request: a quota changed takes effect at the next request', async () => {
      for (let i = 0; i < 3; i++) await expect(f.limiter.consume('q', 3)).resolves.toMatchObject({ allowed: true, limit: 3, remaining: 2 - i });
      await expect(f.limiter.consume('q', 3)).resolves.toMatchObject({ allowed: false, limit: 3, remaining: 0 });
      // Raised: the three already counted still count.
      await expect(f.limiter.consume('q', 5)).resolves.toMatchObject({ allowed: true, limit: 5, remaining: 1 });
      // Lowered below what was counted: refused until enough of them leave the window.
      const refused = await f.limiter.consume('q', 2);
      expect(refused).toMatchObject({ allowed: false, limit: 2, remaining: 0 });
      expect(refused.resetMs).toBeGreaterThan(0);
      expect(refused.resetMs).toBeLessThanOrEqual(60_000);
    });
  });
}

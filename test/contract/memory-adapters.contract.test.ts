import { MemoryProjection } from '@pushbase/app';
import { memoryRateLimiter, SlidingWindowRateLimiter } from '@pushbase/gateway';
import { describeProjectionContract } from './read-model.contract';
import { describeRateLimiterContract } from './rate-limiter.contract';

describeProjectionContract('MemoryProjection', () => {
  const store = new MemoryProjection();
  return Promise.resolve({ store, apply: store.apply, settle: () => Promise.resolve(), cleanup: () => Promise.resolve() });
});

describeRateLimiterContract('rate-limiter-flexible memory backend', 60, () =>
  Promise.resolve({ limiter: memoryRateLimiter(60, 60, `contract-${Math.random()}`), cleanup: () => Promise.resolve() }),
);

describeRateLimiterContract('sliding window (memory)', 60, () =>
  Promise.resolve({ limiter: new SlidingWindowRateLimiter(60, 60_000), cleanup: () => Promise.resolve() }),
);

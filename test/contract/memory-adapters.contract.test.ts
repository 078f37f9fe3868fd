import { MemoryProjection } from '@pushbase/app';
import { hashApiKey, MemoryKeyStore, SlidingWindowRateLimiter } from '@pushbase/gateway';
import { describeKeyStoreContract } from './key-store.contract';
import { describeProjectionContract } from './read-model.contract';
import { describeRateLimiterContract } from './rate-limiter.contract';
import { describeSchemaStoreContract } from './schema-store.contract';

describeProjectionContract('MemoryProjection', () => {
  const store = new MemoryProjection();
  return Promise.resolve({ store, apply: store.apply, settle: () => Promise.resolve(), cleanup: () => Promise.resolve() });
});

describeSchemaStoreContract('MemoryProjection', { redeliverySafe: false }, () => {
  const store = new MemoryProjection();
  return Promise.resolve({
    store,
    apply: (events) => {
      store.apply(events);
      return Promise.resolve();
    },
    cleanup: () => Promise.resolve(),
  });
});

describeRateLimiterContract('sliding window (memory)', 60, () =>
  Promise.resolve({ limiter: new SlidingWindowRateLimiter(60, 60_000), cleanup: () => Promise.resolve() }),
);

describeKeyStoreContract('MemoryKeyStore', () => {
  const store = new MemoryKeyStore();
  return Promise.resolve({
    store,
    add: (key: string, account: string) => {
      store.add(hashApiKey(key), account);
      return Promise.resolve();
    },
    revoke: (key: string) => {
      store.revoke(hashApiKey(key));
      return Promise.resolve();
    },
    rawContents: () => Promise.resolve(JSON.stringify(store.export())),
    cleanup: () => Promise.resolve(),
  });
});

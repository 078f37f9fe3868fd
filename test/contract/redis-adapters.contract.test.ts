import { hashApiKey } from '@pushbase/gateway';
import { RedisKeyStore, RedisRateLimiter, RedisSchemaStore } from '@pushbase/redis';
import type { Redis } from 'ioredis';
import { connectTestRedis, deleteUnder, dumpUnder, randomPrefix } from '../helpers/redis';
import { describeKeyStoreContract } from './key-store.contract';
import { describeRateLimiterContract } from './rate-limiter.contract';
import { describeSchemaStoreContract } from './schema-store.contract';

// The same behaviour suites as the memory adapters, against the real Redis (PUSHBASE_REDIS_URL), each test
// under its own random key prefix, removed afterwards.

async function onRedis<T>(build: (redis: Redis, prefix: string) => T): Promise<T & { cleanup(): Promise<void> }> {
  const redis = await connectTestRedis();
  const prefix = randomPrefix();
  return {
    ...build(redis, prefix),
    cleanup: async () => {
      await deleteUnder(redis, prefix);
      await redis.quit();
    },
  };
}

describeRateLimiterContract('Redis (one Lua script, Redis time)', 60, () => onRedis((redis, prefix) => ({ limiter: new RedisRateLimiter(redis, { prefix }) })));

describeSchemaStoreContract('Redis', { redeliverySafe: true }, () =>
  onRedis((redis, prefix) => {
    const store = new RedisSchemaStore(redis, { prefix });
    return { store, apply: (events: Parameters<RedisSchemaStore['apply']>[0]) => store.apply(events) };
  }),
);

describeKeyStoreContract('Redis', () =>
  onRedis((redis, prefix) => {
    const store = new RedisKeyStore(redis, { prefix });
    return {
      store,
      add: (key: string, account: string) => store.add(hashApiKey(key), account),
      revoke: async (key: string) => {
        await store.revoke(hashApiKey(key));
      },
      rawContents: () => dumpUnder(redis, prefix),
    };
  }),
);

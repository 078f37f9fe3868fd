import { hashApiKey } from '@pushbase/gateway';
import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, type AccountEvent } from '@pushbase/domain';
import { RedisAccountStore, RedisKeyStore, RedisRateLimiter, RedisSchemaStore } from '@pushbase/redis';
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

describeKeyStoreContract('Redis (the account store, fed account events)', () =>
  onRedis((redis, prefix) => {
    const accounts = new RedisAccountStore(redis, { prefix });
    const store = new RedisKeyStore(redis, { prefix });
    // Keys exist here only as the fold of the accounts topic: the fixture applies the events a topic would hold.
    let offset = 0;
    const keyIds = new Map<string, { account: string; key_id: string }>();
    const apply = (event: AccountEvent): Promise<number> => accounts.apply([{ event, position: { partition: 0, offset: offset++ } }]);
    const base = (account: string) => ({ schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at: Date.now() }) as const;
    return {
      store,
      add: async (key: string, account: string) => {
        await apply({ type: 'AccountCreated', ...base(account), quotas: DEFAULT_QUOTAS });
        const key_id = `kid_${offset}`;
        keyIds.set(key, { account, key_id });
        await apply({ type: 'KeyCreated', ...base(account), key_id, hash: hashApiKey(key), scope: 'write', label: null });
      },
      revoke: async (key: string) => {
        const k = keyIds.get(key)!;
        await apply({ type: 'KeyRevoked', ...base(k.account), key_id: k.key_id });
      },
      rawContents: () => dumpUnder(redis, prefix),
    };
  }),
);

import { createHash } from 'node:crypto';
import type { KeyStore, Principal } from '@pushbase/contracts';
import { effectiveQuotas, type QuotaLimits } from '@pushbase/domain';
import type { Redis } from 'ioredis';
import { redisError, where } from './connection';
import { checkPrefix, DEFAULT_PREFIX } from './keys';

/** SHA-256 in hex, the gateway's `hashApiKey`: keys are high-entropy, so no slow hash is needed. */
const hashOf = (apiKey: string): string => createHash('sha256').update(apiKey, 'utf8').digest('hex');

/**
 * API keys in Redis, as hashes only: one Redis hash maps each key's SHA-256 to its account. The only
 * thing Redis holds that the event log cannot rebuild (until accounts and keys go into the log too).
 */
export class RedisKeyStore implements KeyStore {
  private readonly key: string;
  private readonly quotas: QuotaLimits;

  /** `defaults`: the quotas every key here gets (the API's limits unless the operator changed them). */
  constructor(
    private readonly redis: Redis,
    options: { readonly prefix?: string; readonly defaults?: QuotaLimits } = {},
  ) {
    this.key = `${checkPrefix(options.prefix ?? DEFAULT_PREFIX)}api-keys`;
    this.quotas = effectiveQuotas(undefined, options.defaults);
  }

  /** Every key here has write scope and the default quotas; its id derives from its hash (stable everywhere). */
  async resolve(apiKey: string): Promise<Principal | undefined> {
    const hash = hashOf(apiKey);
    let account: string | null;
    try {
      account = await this.redis.hget(this.key, hash);
    } catch (e) {
      throw redisError(where(this.redis), 'an API key', e);
    }
    return account === null ? undefined : { account, key_id: `cfg_${hash.slice(0, 16)}`, scope: 'write', quotas: this.quotas };
  }

  /** Registers a key by its hash (the key itself never reaches this store). */
  async add(hash: string, account: string): Promise<void> {
    await this.redis.hset(this.key, hash, account);
  }

  /** True when the hash was registered. */
  async revoke(hash: string): Promise<boolean> {
    return (await this.redis.hdel(this.key, hash)) === 1;
  }

  /** Hashes and accounts, never a key. */
  async export(): Promise<{ hash: string; account: string }[]> {
    const all = await this.redis.hgetall(this.key);
    return Object.entries(all).map(([hash, account]) => ({ hash, account }));
  }
}

import { hashApiKey, type KeyStore, type Principal } from '@pushbase/contracts';
import { effectiveQuotas, type AccountQuotas, type KeyScope, type QuotaLimits } from '@pushbase/domain';
import type { Redis } from 'ioredis';
import { RedisAccountStore } from './account-store';
import { DEFAULT_PREFIX } from './keys';

/** A key from configuration (PUSHBASE_API_KEYS), by its hash: not an event, so not in Redis. */
export interface ConfiguredKey {
  readonly account: string;
  readonly key_id: string;
  readonly scope: KeyScope;
}

export interface RedisKeyStoreOptions {
  readonly prefix?: string;
  /** The quotas in force where an account sets none: the API's limits, or the operator's rate limit. */
  readonly defaults?: QuotaLimits;
  /** Keys of the configuration, by hash; they win over the account store (as PUSHBASE_API_KEYS always has). */
  readonly configured?: ReadonlyMap<string, ConfiguredKey>;
  /**
   * How long a configured key's account quotas are reused before Redis is asked again. Default 1000 ms:
   * a quota change reaches those keys within a second, and the hot path (the keys of PUSHBASE_API_KEYS,
   * which need no lookup to authenticate) costs no extra Redis round trip per request.
   */
  readonly quotaCacheMs?: number;
  /** How often the account store's reads look at the state for lost data (state.ts). Default 1000 ms. */
  readonly stateCheckMs?: number;
}

/**
 * The distributed gateway's keys: the account store in Redis (account-store.ts, the fold of the accounts
 * topic; only SHA-256 hashes there), asked on EVERY request, with no cache: a key revoked or an account
 * deleted is refused by every gateway from the moment the schema service applied the change (before it
 * answered the revocation), and at the latest when the projector's follower applies it from the topic
 * (about a second) should the schema service have stopped in between. Well inside the 5 seconds promised.
 * One scripted read per request (key, account, scope and the account's quotas at one moment).
 */
export class RedisKeyStore implements KeyStore {
  private readonly accounts: RedisAccountStore;
  private readonly defaults: QuotaLimits | undefined;
  private readonly configured: ReadonlyMap<string, ConfiguredKey>;
  private readonly quotaCacheMs: number;
  private readonly quotaCache = new Map<string, { readonly quotas: AccountQuotas | undefined; readonly until: number }>();

  constructor(redis: Redis, options: RedisKeyStoreOptions = {}) {
    this.accounts = new RedisAccountStore(redis, { prefix: options.prefix ?? DEFAULT_PREFIX, ...(options.stateCheckMs === undefined ? {} : { stateCheckMs: options.stateCheckMs }) });
    this.defaults = options.defaults;
    this.configured = options.configured ?? new Map();
    this.quotaCacheMs = options.quotaCacheMs ?? 1000;
  }

  /** How many keys come from the configuration. */
  get configuredCount(): number {
    return this.configured.size;
  }

  async resolve(apiKey: string): Promise<Principal | undefined> {
    const hash = hashApiKey(apiKey);
    const configured = this.configured.get(hash);
    if (configured !== undefined) return { ...configured, quotas: effectiveQuotas(await this.quotasOf(configured.account), this.defaults) };
    const found = await this.accounts.resolveHash(hash);
    if (found === undefined) return undefined;
    return { account: found.account, key_id: found.key_id, scope: found.scope, quotas: effectiveQuotas(found.quotas, this.defaults) };
  }

  /** A configured key's account quotas (an account of that name in the store may set them). */
  private async quotasOf(account: string): Promise<AccountQuotas | undefined> {
    const now = Date.now();
    const cached = this.quotaCache.get(account);
    if (cached !== undefined && cached.until > now) return cached.quotas;
    const quotas = await this.accounts.quotas(account);
    // Bounded by the configured keys' accounts: the variable's few entries.
    this.quotaCache.set(account, { quotas, until: now + this.quotaCacheMs });
    return quotas;
  }
}

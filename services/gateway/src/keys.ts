import { createHash, timingSafeEqual } from 'node:crypto';
import { configuredKeyId, hashApiKey, type KeyStore, type Principal } from '@pushbase/contracts';
import { ACCOUNT_NAME, effectiveQuotas, type KeyScope, type QuotaLimits } from '@pushbase/domain';

// The key material lives in @pushbase/contracts (the account admins and the Redis key store use it too); the gateway's callers import it from here as before.
export { configuredKeyId, hashApiKey, newApiKey, newKeyId } from '@pushbase/contracts';

/** The quotas in force for an account; the defaults (the API's limits) when it has none of its own. */
export type QuotasOf = (account: string) => QuotaLimits;
export const defaultQuotasOf =
  (defaults?: QuotaLimits): QuotasOf =>
  () =>
    effectiveQuotas(undefined, defaults);

interface MemoryKey {
  readonly account: string;
  readonly key_id: string;
  readonly scope: KeyScope;
}

/**
 * Keys held in memory by hash: PUSHBASE_API_KEYS (configuration, not events: removing one from the variable
 * revokes it at the next start). Quotas are looked up at each resolve, so an account's quota change in the
 * log applies to its configured keys from the next request.
 */
export class MemoryKeyStore implements KeyStore {
  private readonly keys = new Map<string, MemoryKey>();

  constructor(private readonly quotasOf: QuotasOf = defaultQuotasOf()) {}

  add(hash: string, account: string, scope: KeyScope = 'write'): void {
    this.keys.set(hash, { account, key_id: configuredKeyId(hash), scope });
  }

  revoke(hash: string): boolean {
    return this.keys.delete(hash);
  }

  resolve(apiKey: string): Promise<Principal | undefined> {
    const key = this.keys.get(hashApiKey(apiKey));
    return Promise.resolve(key === undefined ? undefined : { ...key, quotas: this.quotasOf(key.account) });
  }

  /** What the store holds, e.g. to persist it: hashes and accounts, never a key. */
  export(): { hash: string; account: string }[] {
    return [...this.keys].map(([hash, { account }]) => ({ hash, account }));
  }

  get size(): number {
    return this.keys.size;
  }
}

/**
 * Configured keys are found by their SHA-256, with no slow hash, and the failed-auth guard bounds noise, not
 * guessing: a short key could be guessed, so it stops the start rather than a warning nobody reads.
 */
export const MIN_CONFIGURED_KEY_LENGTH = 20;

/** A bad `PUSHBASE_API_KEYS`; `problem` is the message without the variable's name (for the config's list). */
export class BootstrapKeysError extends Error {
  override readonly name = 'BootstrapKeysError';
  constructor(readonly problem: string) {
    super(`PUSHBASE_API_KEYS: ${problem}`);
  }
}

/** Parses `PUSHBASE_API_KEYS` (`key:account,key:account`); a message never shows a key. */
export function parseBootstrapKeys(spec: string): { key: string; account: string }[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((pair) => {
      const i = pair.lastIndexOf(':');
      const key = i > 0 ? pair.slice(0, i) : '';
      const account = i > 0 ? pair.slice(i + 1) : '';
      if (key === '' || !ACCOUNT_NAME.test(account)) {
        throw new BootstrapKeysError(`"${pair.replace(/^.*?:/, '***:')}" is not key:account (account: 1-100 of A-Z a-z 0-9 . _ -)`);
      }
      if (key.length < MIN_CONFIGURED_KEY_LENGTH) {
        throw new BootstrapKeysError(
          `the key of account "${account}" has ${key.length} characters; a configured key needs at least ${MIN_CONFIGURED_KEY_LENGTH}, random ones (e.g. \`openssl rand -base64 30\`)`,
        );
      }
      return { key, account };
    });
}

export const safeEqual = (a: string, b: string): boolean => {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
};

/**
 * Several key stores asked in order, the first that knows the key wins: the distributed gateway's keys from
 * PUSHBASE_API_KEYS (in memory, as in embedded mode: removing one from the variable revokes it) before
 * the shared Redis key store.
 */
export class CombinedKeyStore implements KeyStore {
  private readonly stores: readonly KeyStore[];

  constructor(...stores: KeyStore[]) {
    this.stores = stores;
  }

  async resolve(apiKey: string): Promise<Principal | undefined> {
    for (const store of this.stores) {
      const principal = await store.resolve(apiKey);
      if (principal !== undefined) return principal;
    }
    return undefined;
  }
}

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyStore } from '@pushbase/contracts';

/** Keys are stored only as SHA-256 hashes; a high-entropy key needs no slow hash. */
export const hashApiKey = (apiKey: string): string => createHash('sha256').update(apiKey, 'utf8').digest('hex');

/** A fresh key: 32 random bytes, URL-safe, shown once. */
export const newApiKey = (): string => `pb_${randomBytes(32).toString('base64url')}`;

export class MemoryKeyStore implements KeyStore {
  private readonly accounts = new Map<string, string>();

  add(hash: string, account: string): void {
    this.accounts.set(hash, account);
  }

  revoke(hash: string): boolean {
    return this.accounts.delete(hash);
  }

  resolve(apiKey: string): Promise<string | undefined> {
    return Promise.resolve(this.accounts.get(hashApiKey(apiKey)));
  }

  /** What the store holds, e.g. to persist it: hashes and accounts, never a key. */
  export(): { hash: string; account: string }[] {
    return [...this.accounts].map(([hash, account]) => ({ hash, account }));
  }

  get size(): number {
    return this.accounts.size;
  }
}

/** Parses `PUSHBASE_API_KEYS` (`key:account,key:account`). */
export function parseBootstrapKeys(spec: string): { key: string; account: string }[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((pair) => {
      const i = pair.lastIndexOf(':');
      const key = i > 0 ? pair.slice(0, i) : '';
      const account = i > 0 ? pair.slice(i + 1) : '';
      if (key === '' || !/^[A-Za-z0-9._-]{1,100}$/.test(account)) {
        throw new Error(`PUSHBASE_API_KEYS: "${pair.replace(/^.*?:/, '***:')}" is not key:account (account: 1-100 of A-Z a-z 0-9 . _ -)`);
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

  async resolve(apiKey: string): Promise<string | undefined> {
    for (const store of this.stores) {
      const account = await store.resolve(apiKey);
      if (account !== undefined) return account;
    }
    return undefined;
  }
}

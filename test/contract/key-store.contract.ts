import type { KeyStore } from '@pushbase/contracts';

/**
 * What every KeyStore adapter promises (memory now, Redis later). `add` registers a key the way the
 * adapter's provisioning does; the store itself must keep only a hash (checked with `rawContents`).
 */
export interface KeyStoreFixture {
  readonly store: KeyStore;
  add(apiKey: string, account: string): Promise<void>;
  revoke(apiKey: string): Promise<void>;
  /** Everything the adapter persisted, as text, to check that no key is stored in the clear. */
  rawContents(): Promise<string>;
  cleanup(): Promise<void>;
}

export function describeKeyStoreContract(name: string, make: () => Promise<KeyStoreFixture>): void {
  describe(`KeyStore contract: ${name}`, () => {
    let f: KeyStoreFixture;
    beforeEach(async () => {
      f = await make();
    });
    afterEach(async () => {
      await f.cleanup();
    });

    it('maps each key to its account and nothing else', async () => {
      await f.add('key-one-0123456789', 'acme');
      await f.add('key-two-0123456789', 'globex');
      await expect(f.store.resolve('key-one-0123456789')).resolves.toMatchObject({ account: 'acme', scope: 'write' });
      await expect(f.store.resolve('key-two-0123456789')).resolves.toMatchObject({ account: 'globex', scope: 'write' });
      const [one, two] = [await f.store.resolve('key-one-0123456789'), await f.store.resolve('key-two-0123456789')];
      // A handle to list and revoke by, the same at every lookup, and never the key itself.
      expect(one?.key_id).toBe((await f.store.resolve('key-one-0123456789'))?.key_id);
      expect(one?.key_id).not.toBe(two?.key_id);
      expect(one?.key_id).not.toContain('key-one');
      expect(one?.quotas.requests_per_minute).toBeGreaterThan(0);
      expect(one?.quotas.datasets).toBeGreaterThan(0);
      await expect(f.store.resolve('key-one-012345678')).resolves.toBeUndefined();
      await expect(f.store.resolve('KEY-ONE-0123456789')).resolves.toBeUndefined();
      await expect(f.store.resolve('')).resolves.toBeUndefined();
    });

    it('forgets a revoked key', async () => {
      await f.add('key-one-0123456789', 'acme');
      await f.revoke('key-one-0123456789');
      await expect(f.store.resolve('key-one-0123456789')).resolves.toBeUndefined();
    });

    it('never keeps a key in the clear', async () => {
      await f.add('key-secret-0123456789', 'acme');
      const raw = await f.rawContents();
      expect(raw).not.toContain('key-secret-0123456789');
      expect(raw).toContain('acme');
    });
  });
}

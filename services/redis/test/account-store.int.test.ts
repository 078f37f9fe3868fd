import {
  ACCOUNT_EVENT_SCHEMA_VERSION,
  DEFAULT_QUOTAS,
  foldAccounts,
  type AccountEvent,
  type AccountQuotas,
  type AccountsState,
  type KeyScope,
} from '@pushbase/domain';
import { RedisAccountStore, RedisKeyStore } from '@pushbase/redis';
import type { Redis } from 'ioredis';
import { sha } from '../../../test/helpers/api-keys';
import { connectTestRedis, deleteUnder, dumpUnder, keysUnder, randomPrefix } from '../../../test/helpers/redis';

/*
 * The Redis account store against real Redis: it must equal the domain's fold of the accounts topic
 * (foldAccounts) after any delivery a topic's readers make — every event once, any suffix again (the
 * follower re-reading after the writer applied, a restart), a late older event after a newer one — and
 * an account's deletion must leave none of its keys resolvable.
 */

const base = (account: string, at: number) => ({ schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at }) as const;
const created = (account: string, at: number, quotas: AccountQuotas = DEFAULT_QUOTAS): AccountEvent => ({ type: 'AccountCreated', ...base(account, at), quotas });
const keyCreated = (account: string, at: number, key_id: string, key: string, scope: KeyScope = 'write'): AccountEvent => ({
  type: 'KeyCreated',
  ...base(account, at),
  key_id,
  hash: sha(key),
  scope,
  label: `label of ${key_id}`,
});
const revoked = (account: string, at: number, key_id: string): AccountEvent => ({ type: 'KeyRevoked', ...base(account, at), key_id });
const deleted = (account: string, at: number): AccountEvent => ({ type: 'AccountDeleted', ...base(account, at) });
const quotasSet = (account: string, at: number, quotas: AccountQuotas): AccountEvent => ({ type: 'AccountQuotasSet', ...base(account, at), quotas });

/** A topic's worth: accounts created, keyed, revoked, deleted and created again, events the fold ignores too. */
const TOPIC: readonly AccountEvent[] = [
  created('acme', 1),
  keyCreated('acme', 2, 'kid_a1', 'key-acme-one'),
  keyCreated('acme', 3, 'kid_a2', 'key-acme-two', 'read'),
  created('globex', 4, { datasets: 5, requests_per_minute: null }),
  keyCreated('globex', 5, 'kid_g1', 'key-globex-one'),
  revoked('acme', 6, 'kid_a1'),
  quotasSet('acme', 7, { datasets: null, requests_per_minute: 120 }),
  // Ignored by the fold: a second create, a key of an unknown account, a taken hash, a revoked key again.
  created('acme', 8),
  keyCreated('nobody', 9, 'kid_n1', 'key-nobody'),
  keyCreated('globex', 10, 'kid_g2', 'key-acme-two'),
  revoked('acme', 11, 'kid_a1'),
  deleted('globex', 12),
  keyCreated('initech', 13, 'kid_i0', 'key-initech-before'),
  created('globex', 14),
  keyCreated('globex', 15, 'kid_g3', 'key-globex-new'),
];
const positioned = (events: readonly AccountEvent[], from = 0) => events.map((event, i) => ({ event, position: { partition: 0, offset: from + i } }));

/** What the store shows, in the fold's terms. */
async function shown(store: RedisAccountStore): Promise<AccountsState> {
  const accounts = new Map();
  const keysByHash = new Map();
  for (const name of await store.list()) {
    const info = (await store.get(name))!;
    accounts.set(name, info);
    for (const k of info.keys.values()) keysByHash.set(k.hash, k);
  }
  return { accounts, keysByHash };
}

describe('RedisAccountStore (real Redis)', () => {
  let redis: Redis;
  let prefix: string;
  let store: RedisAccountStore;
  beforeEach(async () => {
    redis = await connectTestRedis();
    prefix = randomPrefix();
    store = new RedisAccountStore(redis, { prefix });
  });
  afterEach(async () => {
    await deleteUnder(redis, prefix);
    await redis.quit();
  });

  it('equals the fold of the topic, and every live key resolves to its account, scope and quotas', async () => {
    expect(await store.apply(positioned(TOPIC))).toBe(TOPIC.length);
    const fold = foldAccounts(TOPIC);
    expect(await shown(store)).toEqual(fold);
    expect([...fold.accounts.keys()].sort()).toEqual(['acme', 'globex']);
    await expect(store.resolveHash(sha('key-acme-two'))).resolves.toEqual({ account: 'acme', key_id: 'kid_a2', scope: 'read', quotas: { datasets: null, requests_per_minute: 120 } });
    await expect(store.resolveHash(sha('key-globex-new'))).resolves.toMatchObject({ account: 'globex', key_id: 'kid_g3', quotas: DEFAULT_QUOTAS });
    for (const gone of ['key-acme-one', 'key-globex-one', 'key-nobody', 'key-initech-before']) await expect(store.resolveHash(sha(gone))).resolves.toBeUndefined();
  });

  it('applying any suffix of the topic again changes nothing (redelivery), byte for byte', async () => {
    await store.apply(positioned(TOPIC));
    const once = await dumpUnder(redis, prefix);
    for (let from = TOPIC.length - 1; from >= 0; from--) {
      expect(await store.apply(positioned(TOPIC.slice(from), from))).toBe(0);
      expect(await dumpUnder(redis, prefix)).toBe(once);
    }
  });

  it('a late older event after a newer one of the account is skipped: a revoked key stays revoked', async () => {
    const events = positioned([created('acme', 1), keyCreated('acme', 2, 'kid_a1', 'key-late')]);
    const revocation = { event: revoked('acme', 3, 'kid_a1'), position: { partition: 0, offset: 2 } };
    // The writer applied up to the revocation; a lagging follower then delivers the key's creation.
    await store.apply([...events, revocation]);
    expect(await store.apply([events[1]!])).toBe(0);
    await expect(store.resolveHash(sha('key-late'))).resolves.toBeUndefined();
    expect(await store.position('acme')).toBe(2);
  });

  it("deleting an account drops its keys by hash and its quotas; its name can be created anew without them", async () => {
    await store.apply(positioned([created('acme', 1, { datasets: 3, requests_per_minute: 7 }), keyCreated('acme', 2, 'kid_a1', 'key-one'), keyCreated('acme', 3, 'kid_a2', 'key-two'), deleted('acme', 4)]));
    await expect(store.resolveHash(sha('key-one'))).resolves.toBeUndefined();
    await expect(store.resolveHash(sha('key-two'))).resolves.toBeUndefined();
    await expect(store.get('acme')).resolves.toBeUndefined();
    // Nothing of the account is left but its applied position (what makes a redelivery of it a no-op),
    // beside the state of the stores (how far the topic was applied).
    expect((await keysUnder(redis, prefix)).map((k) => k.slice(prefix.length)).sort()).toEqual(['accounts:position:acme', 'state']);
    await store.apply(positioned([created('acme', 5)], 4));
    await expect(store.get('acme')).resolves.toMatchObject({ quotas: DEFAULT_QUOTAS, keys: new Map() });
  });

  it('holds hashes only: no key in the clear anywhere under the prefix', async () => {
    await store.apply(positioned(TOPIC));
    const dump = await dumpUnder(redis, prefix);
    for (const key of ['key-acme-one', 'key-acme-two', 'key-globex-new']) expect(dump).not.toContain(key);
    expect(dump).toContain(sha('key-acme-two'));
  });

  it('RedisKeyStore: account keys with their quotas in force, configured keys first, a revocation at once', async () => {
    await store.apply(positioned(TOPIC));
    const defaults = { datasets: 100, requests_per_minute: 60 };
    const keys = new RedisKeyStore(redis, {
      prefix,
      defaults,
      configured: new Map([[sha('configured-key-0123456789'), { account: 'acme', key_id: 'cfg_1', scope: 'write' as const }]]),
    });
    await expect(keys.resolve('key-acme-two')).resolves.toEqual({ account: 'acme', key_id: 'kid_a2', scope: 'read', quotas: { datasets: 100, requests_per_minute: 120 } });
    await expect(keys.resolve('key-globex-new')).resolves.toEqual({ account: 'globex', key_id: 'kid_g3', scope: 'write', quotas: defaults });
    // A configured key takes its account's quotas from the store.
    await expect(keys.resolve('configured-key-0123456789')).resolves.toEqual({ account: 'acme', key_id: 'cfg_1', scope: 'write', quotas: { datasets: 100, requests_per_minute: 120 } });
    await expect(keys.resolve('key-acme-one')).resolves.toBeUndefined();
    await store.apply([{ event: revoked('acme', 20, 'kid_a2'), position: { partition: 0, offset: TOPIC.length } }]);
    // No cache: the very next resolve refuses it.
    await expect(keys.resolve('key-acme-two')).resolves.toBeUndefined();
  });
});

import { randomBytes } from 'node:crypto';
import { pushbaseServices } from '@pushbase/contracts';
import { connectAccountAdmin } from '@pushbase/grpc';
import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, DomainError, foldAccounts, type AccountEvent } from '@pushbase/domain';
import { decodeAccountMessage, KafkaEventConsumer, type PositionedAccountEvent } from '@pushbase/kafka';
import { encodeSchemaIntent, RedisAccountStore, RedisSchemaStore, schemaIntentKey } from '@pushbase/redis';
import { sha } from '../../../test/helpers/api-keys';
import { randomName, testConnection, useTestTopics } from '../../../test/helpers/kafka';
import { dumpUnder, keysUnder, useTestRedis } from '../../../test/helpers/redis';
import { importRedisApiKeys } from '../src';
import { create, readTopic, startReplica, type Replica } from './support';
import { eventually } from '../../../test/helpers/eventually';

/*
 * Accounts and keys through the schema service's AccountAdmin over gRPC (the gateway's adapter), against
 * the shared Kafka and Redis: every change is in the accounts topic and applied to the Redis account store
 * before it is answered, equal to the fold of the topic; deleting an account deletes its datasets through
 * the dataset topic; a change a crashed holder left as its intent is completed by the next decision of the
 * account; the key never leaves the gateway's adapter (only its hash is in Kafka and Redis).
 */

const kafka = useTestTopics();
const db = useTestRedis();
const replicas: Replica[] = [];
const protos = pushbaseServices();

afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.close()));
});

async function setting() {
  const topic = await kafka.create('pushbase-schema', 1);
  const accountsTopic = await kafka.create('pushbase-schema-accounts', 1);
  const prefix = db.prefix();
  const replica = await startReplica({ topic, prefix, accountsTopic });
  replicas.push(replica);
  const keys: string[] = [];
  const client = connectAccountAdmin(replica.address, {
    protos,
    newKey: () => {
      const key = `pb_${randomBytes(32).toString('base64url')}`;
      keys.push(key);
      return key;
    },
    hashKey: sha,
    defaults: { datasets: 100, requests_per_minute: 60 },
  });
  replicas.push({ ...replica, close: () => Promise.resolve(client.close()) });
  return { topic, accountsTopic, prefix, replica, client, keys, store: new RedisAccountStore(db.redis, { prefix }), schemaStore: new RedisSchemaStore(db.redis, { prefix }) };
}

/** The first `count` events of the one-partition accounts topic. */
async function readAccounts(topic: string, count: number): Promise<AccountEvent[]> {
  const events: PositionedAccountEvent[] = [];
  const consumer = new KafkaEventConsumer<PositionedAccountEvent>(
    { connection: testConnection(), topic, groupId: randomName('pushbase-accounts-read'), decode: decodeAccountMessage },
    {
      onBatch: (batch) => {
        events.push(...batch.events);
        return Promise.resolve();
      },
    },
  );
  await consumer.start();
  try {
    await eventually(() => events.length >= count, { what: `${count} events in ${topic}`, timeoutMs: 30_000 });
  } finally {
    await consumer.stop();
  }
  return events.map((e) => e.event);
}

const code = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return e instanceof DomainError ? e.code : String(e);
  }
};

describe('accounts and keys in the distributed schema service', () => {
  it('answers each change once it is in the accounts topic and the Redis store, which equals the fold; keys only as hashes', async () => {
    const { accountsTopic, prefix, client, keys, store } = await setting();
    const acme = await client.createAccount('acme', { datasets: 2, requests_per_minute: null });
    expect(acme).toMatchObject({ account: 'acme', quotas: { datasets: 2, requests_per_minute: null }, effective_quotas: { datasets: 2, requests_per_minute: 60 }, key_count: 0 });
    expect(await code(client.createAccount('acme', DEFAULT_QUOTAS))).toBe('conflict');
    expect(await code(client.createAccount('no:colons', DEFAULT_QUOTAS))).toBe('invalid');
    const k1 = await client.createKey('acme', { scope: 'read', label: 'grafana' });
    const k2 = await client.createKey('acme', { scope: 'write', label: null });
    expect(k1).toMatchObject({ account: 'acme', scope: 'read', label: 'grafana', key: keys[0] });
    // Answered only once applied: resolvable at once.
    await expect(store.resolveHash(sha(k1.key))).resolves.toMatchObject({ account: 'acme', key_id: k1.key_id, scope: 'read' });
    await client.revokeKey('acme', k1.key_id);
    await expect(store.resolveHash(sha(k1.key))).resolves.toBeUndefined();
    expect(await code(client.revokeKey('acme', k1.key_id))).toBe('not_found');
    expect(await code(client.createKey('nobody', { scope: 'write', label: null }))).toBe('not_found');
    await expect(client.setQuotas('acme', { datasets: null, requests_per_minute: 5 })).resolves.toMatchObject({ effective_quotas: { datasets: 100, requests_per_minute: 5 }, key_count: 1 });
    expect(await client.listKeys('acme')).toEqual([expect.objectContaining({ key_id: k2.key_id, scope: 'write', label: null })]);
    expect((await client.listAccounts()).map((a) => a.account)).toEqual(['acme']);

    const events = await readAccounts(accountsTopic, 5);
    expect(events.map((e) => e.type)).toEqual(['AccountCreated', 'KeyCreated', 'KeyCreated', 'KeyRevoked', 'AccountQuotasSet']);
    const fold = foldAccounts(events);
    expect((await store.get('acme'))?.keys).toEqual(fold.accounts.get('acme')?.keys);
    expect((await store.get('acme'))?.quotas).toEqual(fold.accounts.get('acme')?.quotas);
    const text = `${JSON.stringify(events)}\n${await dumpUnder(db.redis, prefix)}`;
    // Every key made (the refused one's too) is absent; the stored ones are there as hashes.
    for (const key of keys) expect(text).not.toContain(key);
    for (const key of [k1.key, k2.key]) expect(text).toContain(sha(key));
    // Nothing left of the decisions' protocol once they finished.
    expect((await keysUnder(db.redis, prefix)).filter((k) => k.includes('schema-lock:') || k.includes('schema-intent:'))).toEqual([]);
  });

  it("the account's datasets quota is the schema service's limit; deleting the account deletes its datasets (DatasetDeleted in the dataset topic), then its keys", async () => {
    const { topic, client, store, schemaStore, replica } = await setting();
    await client.createAccount('initech', { datasets: 2, requests_per_minute: null });
    const key = await client.createKey('initech', { scope: 'write', label: null });
    await create(replica.service, 'initech', 'one');
    await create(replica.service, 'initech', 'two');
    expect(await code(create(replica.service, 'initech', 'three'))).toBe('dataset_limit');
    await expect(client.deleteAccount('initech')).resolves.toEqual({ datasets_deleted: 2 });
    expect(await schemaStore.count('initech')).toBe(0);
    await expect(store.get('initech')).resolves.toBeUndefined();
    await expect(store.resolveHash(sha(key.key))).resolves.toBeUndefined();
    expect(await code(client.deleteAccount('initech'))).toBe('not_found');
    const datasetEvents = await readTopic(topic);
    expect(datasetEvents.map((e) => `${e.type} ${e.dataset}`)).toEqual(['DatasetDefined one', 'DatasetDefined two', 'DatasetDeleted one', 'DatasetDeleted two']);
  });

  it('merges a quota change into the account\'s quotas under its lease: two changes of different quotas at once both hold', async () => {
    const { client, store } = await setting();
    await client.createAccount('hooli', { datasets: 4, requests_per_minute: 40 });
    await Promise.all([client.setQuotas('hooli', { datasets: 7 }), client.setQuotas('hooli', { requests_per_minute: 9 })]);
    await expect(store.get('hooli')).resolves.toMatchObject({ quotas: { datasets: 7, requests_per_minute: 9 } });
    await expect(client.setQuotas('hooli', { datasets: null })).resolves.toMatchObject({ quotas: { datasets: null, requests_per_minute: 9 } });
  });

  it('a change a crashed holder left between its intent and the topic is completed by the next decision of the account', async () => {
    const { accountsTopic, prefix, client, store } = await setting();
    // What a holder that died after writing its intent leaves (its lease has expired since).
    const left: AccountEvent = { type: 'AccountCreated', schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account: 'umbrella', at: Date.now(), quotas: { datasets: 7, requests_per_minute: null } };
    await db.redis.set(schemaIntentKey(prefix, 'umbrella'), encodeSchemaIntent({ token: 'dead-holder', event: left }));
    // The next decision rolls it forward first, then decides from a store that shows it.
    expect(await code(client.createAccount('umbrella', DEFAULT_QUOTAS))).toBe('conflict');
    await expect(store.get('umbrella')).resolves.toMatchObject({ quotas: { datasets: 7, requests_per_minute: null } });
    expect(await db.redis.exists(schemaIntentKey(prefix, 'umbrella'))).toBe(0);
    expect(await readAccounts(accountsTopic, 1)).toEqual([left]);
  });

  it('imports the keys an older deployment kept in the Redis hash <prefix>api-keys once, as events, and renames the hash', async () => {
    const { accountsTopic, prefix, replica, store } = await setting();
    const oldKey = `pb_${randomBytes(32).toString('base64url')}`;
    await db.redis.hset(`${prefix}api-keys`, sha(oldKey), 'legacy');
    expect(await importRedisApiKeys(db.redis, prefix, replica.accounts!, () => undefined)).toBe(1);
    await expect(store.resolveHash(sha(oldKey))).resolves.toMatchObject({ account: 'legacy', scope: 'write' });
    expect(await db.redis.exists(`${prefix}api-keys`)).toBe(0);
    expect(await db.redis.hget(`${prefix}api-keys.imported`, sha(oldKey))).toBe('legacy');
    expect(await importRedisApiKeys(db.redis, prefix, replica.accounts!, () => undefined)).toBe(0);
    expect((await readAccounts(accountsTopic, 2)).map((e) => e.type)).toEqual(['AccountCreated', 'KeyCreated']);
  });

  it('fails the import unless the legacy hash is gone afterwards: a failed rename would re-import revoked keys at every start', async () => {
    const { prefix, replica, store } = await setting();
    const legacy = `${prefix}api-keys`;
    const oldKey = `pb_${randomBytes(32).toString('base64url')}`;
    await db.redis.hset(legacy, sha(oldKey), 'legacy-two');
    const renameFailing = (error: Error) => ({ hgetall: db.redis.hgetall.bind(db.redis), exists: db.redis.exists.bind(db.redis), rename: () => Promise.reject(error) });
    await expect(importRedisApiKeys(renameFailing(new Error("READONLY You can't write against a read only replica.")), prefix, replica.accounts!, () => undefined)).rejects.toThrow(
      /could not be renamed.*READONLY/,
    );
    // The keys were imported; the hash is still there, and the start that called this fails.
    await expect(store.resolveHash(sha(oldKey))).resolves.toMatchObject({ account: 'legacy-two' });
    expect(await db.redis.exists(legacy)).toBe(1);

    // "no such key" from the rename while the hash is still there: not gone, so still a failure.
    await expect(importRedisApiKeys(renameFailing(new Error('ERR no such key')), prefix, replica.accounts!, () => undefined)).rejects.toThrow(/still there/);
    // A replica beside it renamed the hash first: "no such key", and the hash is gone: fine.
    const renamedBeside = { ...renameFailing(new Error('ERR no such key')), rename: async () => Promise.reject(new Error(`ERR no such key ${await db.redis.rename(legacy, `${legacy}.imported`)}`)) };
    await expect(importRedisApiKeys(renamedBeside, prefix, replica.accounts!, () => undefined)).resolves.toBe(0);
    expect(await db.redis.exists(legacy)).toBe(0);
  });
});

import { randomBytes } from 'node:crypto';
import type { EventAppender } from '@pushbase/contracts';
import { DomainError, EVENT_SCHEMA_VERSION, fold, type DatasetDefined, type DatasetEvent } from '@pushbase/domain';
import { RedisSchemaStore } from '@pushbase/redis';
import { keysUnder, useTestRedis } from '../../../test/helpers/redis';
import { useTestTopics } from '../../../test/helpers/kafka';
import { create, outcome, readTopic, startReplica, type Replica } from './support';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The distributed schema service against the shared Kafka and Redis: two replicas (two service instances,
 * each with its own Redis connection and Kafka producer) deciding for one account at once, the repair of a
 * change left between Kafka and Redis, and the answers when Kafka refuses. Every test has its own topic
 * (one partition, so the whole topic can be read back in order) and key prefix.
 */

const kafka = useTestTopics();
const db = useTestRedis();
const replicas: Replica[] = [];

afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.close()));
});

async function setting(): Promise<{ topic: string; prefix: string; account: string; store: RedisSchemaStore }> {
  const topic = await kafka.create('pushbase-schema', 1);
  const prefix = db.prefix();
  return { topic, prefix, account: `acct:${randomBytes(4).toString('hex')}`, store: new RedisSchemaStore(db.redis, { prefix }) };
}

async function replica(options: Parameters<typeof startReplica>[0]): Promise<Replica> {
  const r = await startReplica(options);
  replicas.push(r);
  return r;
}

/** What the store holds for `account`, as the fold of the topic would say it. */
async function storeMatchesTopic(store: RedisSchemaStore, account: string, events: readonly DatasetEvent[], ids: readonly string[]): Promise<void> {
  const state = fold(events.map((e) => structuredClone(e))).get(account);
  expect(await store.count(account)).toBe(state?.size ?? 0);
  for (const id of ids) {
    const folded = state?.get(id);
    const stored = await store.get(account, id);
    expect(stored?.incarnation).toBe(folded?.incarnation);
    expect(stored?.definition).toEqual(folded?.definition);
  }
}

/** The lease and intent keys left under `prefix` (none once every change finished). */
const leftovers = async (prefix: string): Promise<string[]> => (await keysUnder(db.redis, prefix)).filter((k) => k.includes('schema-lock:') || k.includes('schema-intent:'));

describe('the distributed schema service', () => {
  it('keeps the 100-dataset limit exact under 150 concurrent creates sent to two replicas', async () => {
    const { topic, prefix, account, store } = await setting();
    const [a, b] = await Promise.all([replica({ topic, prefix }), replica({ topic, prefix })]);
    const ids = Array.from({ length: 150 }, (_, i) => `ds-${i}`);
    const outcomes = await Promise.all(ids.map((id, i) => outcome(create((i % 2 === 0 ? a : b).service, account, id))));
    const tally = outcomes.reduce<Record<string, number>>((t, o) => ({ ...t, [o]: (t[o] ?? 0) + 1 }), {});
    expect(tally).toEqual({ created: 100, dataset_limit: 50 });
    // Both replicas created some: the limit held across them, not inside one.
    expect(new Set(outcomes.flatMap((o, i) => (o === 'created' ? [i % 2] : []))).size).toBe(2);
    expect(await store.count(account)).toBe(100);

    const events = await readTopic(topic);
    expect(events).toHaveLength(100);
    expect(events.every((e) => e.type === 'DatasetDefined')).toBe(true);
    expect(new Set(events.map((e) => e.incarnation)).size).toBe(100);
    const createdIds = ids.filter((_, i) => outcomes[i] === 'created');
    expect(events.map((e) => e.dataset).sort()).toEqual([...createdIds].sort());
    await storeMatchesTopic(store, account, events, ids);
    expect(await leftovers(prefix)).toEqual([]);
  });

  it('creates a dataset once when both replicas find-or-create it at once: one created, one found, one incarnation', async () => {
    const { topic, prefix, account, store } = await setting();
    const [a, b] = await Promise.all([replica({ topic, prefix }), replica({ topic, prefix })]);
    for (let round = 0; round < 5; round++) {
      const id = `same-${round}`;
      const [x, y] = await Promise.all([create(a.service, account, id), create(b.service, account, id)]);
      expect([x.created, y.created].sort()).toEqual([false, true]);
      expect(x.dataset.incarnation).toBe(y.dataset.incarnation);
      expect((await store.get(account, id))?.incarnation).toBe(x.dataset.incarnation);
    }
    const events = await readTopic(topic);
    expect(events.map((e) => e.dataset)).toEqual(['same-0', 'same-1', 'same-2', 'same-3', 'same-4']);
  });

  it('gives a re-created dataset a new incarnation; get and the store follow at once, on either replica', async () => {
    const { topic, prefix, account, store } = await setting();
    const [a, b] = await Promise.all([replica({ topic, prefix }), replica({ topic, prefix })]);
    const first = await create(a.service, account, 'sales');
    await expect(b.service.get({ account, id: 'sales' })).resolves.toMatchObject({ incarnation: first.dataset.incarnation });
    await b.service.delete({ account, id: 'sales' });
    await expect(a.service.get({ account, id: 'sales' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await store.count(account)).toBe(0);
    await expect(b.service.delete({ account, id: 'sales' })).rejects.toMatchObject({ code: 'not_found' });
    const second = await create(a.service, account, 'sales');
    expect(second.created).toBe(true);
    expect(second.dataset.incarnation).not.toBe(first.dataset.incarnation);
    await expect(b.service.get({ account, id: 'sales' })).resolves.toMatchObject({ incarnation: second.dataset.incarnation });

    const events = await readTopic(topic);
    expect(events.map((e) => [e.type, e.incarnation])).toEqual([
      ['DatasetDefined', first.dataset.incarnation],
      ['DatasetDeleted', first.dataset.incarnation],
      ['DatasetDefined', second.dataset.incarnation],
    ]);
    await storeMatchesTopic(store, account, events, ['sales']);
  });

  it('repairs a crash between the Kafka append and the Redis update: the next change of the account rolls it forward', async () => {
    const { topic, prefix, account, store } = await setting();
    // Replica a "crashes" (stops for good) once its event is in Kafka, before Redis hears of it; its lease
    // is left to expire. Released at the end, the zombie finishes harmlessly.
    let crashed!: () => void;
    const frozen = new Promise<void>((resolve) => (crashed = resolve));
    let appended: DatasetEvent | undefined;
    const a = await replica({
      topic,
      prefix,
      lock: { ttlMs: 1500, waitMs: 30_000 },
      afterAppend: async (event) => {
        appended = event;
        await frozen;
      },
    });
    const b = await replica({ topic, prefix, lock: { ttlMs: 1500, waitMs: 30_000 } });
    const zombie = create(a.service, account, 'orphan');
    await eventually(() => appended !== undefined, { what: 'the crashed append' });
    expect(await store.get(account, 'orphan')).toBeUndefined();
    expect(await db.redis.exists(`${prefix}schema-intent:${account}`)).toBe(1);

    // The next decision for the account waits for the lease, finishes the crashed change first, then decides.
    await expect(create(b.service, account, 'next')).resolves.toMatchObject({ created: true });
    expect((await store.get(account, 'orphan'))?.incarnation).toBe(appended?.incarnation);
    expect(await store.count(account)).toBe(2);
    // And a find-or-create of the crashed id finds the rolled-forward dataset, same incarnation.
    await expect(create(b.service, account, 'orphan')).resolves.toMatchObject({ created: false, dataset: { incarnation: appended?.incarnation } });
    expect(await leftovers(prefix)).toEqual([]);

    crashed();
    await expect(zombie).resolves.toMatchObject({ created: true, dataset: { incarnation: appended?.incarnation } });
    const events = await readTopic(topic);
    // The crashed definition is stored twice (the original and the roll-forward), which the fold ignores.
    expect(events.map((e) => [e.dataset, e.incarnation])).toEqual([
      ['orphan', appended?.incarnation],
      ['orphan', appended?.incarnation],
      ['next', events[2]?.incarnation],
    ]);
    await storeMatchesTopic(store, account, events, ['orphan', 'next']);
    expect(await leftovers(prefix)).toEqual([]);
  });

  it('repairs a crashed deletion by the sweep, with no further request for the account', async () => {
    const { topic, prefix, account, store } = await setting();
    const b = await replica({ topic, prefix, lock: { ttlMs: 1500, waitMs: 30_000 } });
    const made = await create(b.service, account, 'gone');
    let crashed!: () => void;
    const frozen = new Promise<void>((resolve) => (crashed = resolve));
    let appended = false;
    const a = await replica({
      topic,
      prefix,
      lock: { ttlMs: 1500, waitMs: 30_000 },
      afterAppend: async () => {
        appended = true;
        await frozen;
      },
    });
    const zombie = a.service.delete({ account, id: 'gone' });
    await eventually(() => appended, { what: 'the crashed append' });
    expect(await store.count(account)).toBe(1);
    // The sweep skips the account while the crashed holder's lease lasts, then rolls the deletion forward.
    await expect(b.changes.sweep()).resolves.toBe(0);
    const stopSweeping = b.changes.startSweeping(100);
    try {
      await eventually(async () => (await store.get(account, 'gone')) === undefined, { what: 'the sweep to roll the deletion forward' });
    } finally {
      await stopSweeping();
    }
    expect(await store.count(account)).toBe(0);
    expect(await leftovers(prefix)).toEqual([]);
    crashed();
    await zombie;
    const events = await readTopic(topic);
    expect(events.map((e) => [e.type, e.incarnation])).toEqual([
      ['DatasetDefined', made.dataset.incarnation],
      ['DatasetDeleted', made.dataset.incarnation],
      ['DatasetDeleted', made.dataset.incarnation],
    ]);
    await storeMatchesTopic(store, account, events, ['gone']);
  });

  it('answers 503 (unavailable) when Kafka refuses the append: nothing in the topic, no intent, the id still free', async () => {
    const { topic, prefix, account, store } = await setting();
    // Nothing listens on port 1: every connection is refused, so nothing is ever sent.
    const down = await replica({ topic, prefix, brokers: ['127.0.0.1:1'] });
    await expect(create(down.service, account, 'sales')).rejects.toMatchObject({ code: 'unavailable' });
    await expect(down.service.delete({ account, id: 'sales' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await store.count(account)).toBe(0);
    expect(await leftovers(prefix)).toEqual([]);
    const up = await replica({ topic, prefix });
    await expect(create(up.service, account, 'sales')).resolves.toMatchObject({ created: true });
    expect((await readTopic(topic)).map((e) => e.dataset)).toEqual(['sales']);
  });

  it('answers outcome_unknown when the append may have been stored, keeps the intent and the lease, and completes it later', async () => {
    const { topic, prefix, account, store } = await setting();
    // The broker stores the event but its answer is lost: the appender cannot tell.
    const lostAnswer = (real: EventAppender): EventAppender => ({
      append: async (events) => {
        await real.append(events);
        throw new DomainError('outcome_unknown', 'the acknowledgment was lost');
      },
      close: () => real.close(),
    });
    const a = await replica({ topic, prefix, appender: lostAnswer, lock: { ttlMs: 1500, waitMs: 30_000 } });
    const b = await replica({ topic, prefix, lock: { ttlMs: 1500, waitMs: 30_000 } });
    await expect(create(a.service, account, 'maybe')).rejects.toMatchObject({ code: 'outcome_unknown' });
    expect(await db.redis.exists(`${prefix}schema-intent:${account}`)).toBe(1);
    // The lease is kept (a late write could still land), so the sweep cannot take it yet.
    expect(await db.redis.exists(`${prefix}schema-lock:${account}`)).toBe(1);
    await expect(b.changes.sweep()).resolves.toBe(0);
    const started = Date.now();
    const found = await create(b.service, account, 'maybe');
    expect(found.created).toBe(false);
    expect(Date.now() - started).toBeGreaterThan(200); // it waited for the kept lease
    const events = await readTopic(topic);
    expect(events.map((e) => [e.dataset, e.incarnation])).toEqual([
      ['maybe', found.dataset.incarnation],
      ['maybe', found.dataset.incarnation],
    ]);
    await storeMatchesTopic(store, account, events, ['maybe']);
    expect(await leftovers(prefix)).toEqual([]);
  });
});

describe('the distributed schema service while a holder that died between Kafka and Redis keeps its lease', () => {
  /**
   * Replica `a` "dies" (stops for good) once its deletion of `gone` is committed to Kafka, before Redis hears
   * of it: the store still shows `gone`, the account's intent says it is deleted, and the lease (1.5 s here;
   * 60 s by default) is nobody's to release. `b` is a live replica with the same short lease.
   */
  async function deletionLeftBehind() {
    const { topic, prefix, account, store } = await setting();
    const lock = { ttlMs: 1500, waitMs: 30_000 };
    const b = await replica({ topic, prefix, lock });
    const made = await create(b.service, account, 'gone');
    await create(b.service, account, 'kept');
    let crashed!: () => void;
    const frozen = new Promise<void>((resolve) => (crashed = resolve));
    let appended = false;
    const a = await replica({
      topic,
      prefix,
      lock,
      afterAppend: async () => {
        appended = true;
        await frozen;
      },
    });
    const zombie = a.service.delete({ account, id: 'gone' });
    await eventually(() => appended, { what: 'the crashed append' });
    expect((await store.get(account, 'gone'))?.incarnation).toBe(made.dataset.incarnation); // stale
    expect(await db.redis.exists(`${prefix}schema-intent:${account}`)).toBe(1);
    const finish = async (): Promise<void> => {
      crashed();
      await zombie;
    };
    return { topic, prefix, account, store, b, made, finish };
  }

  it('does not answer a find-or-create of the deleted dataset "found" from the stale store: it waits for the lease, rolls the deletion forward and creates anew', async () => {
    const { topic, prefix, account, store, b, made, finish } = await deletionLeftBehind();
    // Another dataset of the account is found lock-free: the intent is not rolled forward by it.
    await expect(create(b.service, account, 'kept')).resolves.toMatchObject({ created: false });
    expect(await db.redis.exists(`${prefix}schema-intent:${account}`)).toBe(1);

    const again = await create(b.service, account, 'gone');
    expect(again.created).toBe(true);
    expect(again.dataset.incarnation).not.toBe(made.dataset.incarnation);
    expect(await leftovers(prefix)).toEqual([]);
    await finish();
    const events = await readTopic(topic);
    expect(events.map((e) => [e.type, e.dataset])).toEqual([
      ['DatasetDefined', 'gone'],
      ['DatasetDefined', 'kept'],
      ['DatasetDeleted', 'gone'],
      ['DatasetDeleted', 'gone'], // the roll-forward's copy, which the fold ignores
      ['DatasetDefined', 'gone'],
    ]);
    await storeMatchesTopic(store, account, events, ['gone', 'kept']);
    expect(await store.count(account)).toBe(2);
  });

  it('does not answer a get of the deleted dataset from the stale store: not_found once the deletion is rolled forward', async () => {
    const { topic, prefix, account, store, b, finish } = await deletionLeftBehind();
    await expect(b.service.get({ account, id: 'kept' })).resolves.toMatchObject({ id: 'kept' });
    await expect(b.service.get({ account, id: 'gone' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await store.get(account, 'gone')).toBeUndefined();
    expect(await leftovers(prefix)).toEqual([]);
    await finish();
    const events = await readTopic(topic);
    await storeMatchesTopic(store, account, events, ['gone', 'kept']);
    expect(await store.count(account)).toBe(1);
  });
});

describe('the distributed schema service while an account is held', () => {
  it('refuses undecided (503) a change that waited longer than the lock wait, queued here or for the lease; nothing stored', async () => {
    const { topic, prefix, account, store } = await setting();
    const a = await replica({ topic, prefix, lock: { ttlMs: 30_000, waitMs: 400 } });
    // Another holder (a stuck replica) has the account's lease.
    await db.redis.set(`${prefix}schema-lock:${account}`, 'someone-else', 'PX', 30_000);
    const started = Date.now();
    const outcomes = await Promise.all(['x', 'y', 'z'].map((id) => outcome(create(a.service, account, id))));
    expect(outcomes).toEqual(['unavailable', 'unavailable', 'unavailable']);
    // Queued requests gave up on their own deadline, not one wait after another.
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await store.count(account)).toBe(0);
    await db.redis.del(`${prefix}schema-lock:${account}`);
    const made = await create(a.service, account, 'x');
    expect(made.created).toBe(true);

    // An existing dataset is found (or conflicts) from one read, without waiting for the lease: that
    // answer changes nothing. A create still waits.
    await db.redis.set(`${prefix}schema-lock:${account}`, 'someone-else', 'PX', 30_000);
    // (Through the lease, these would be refused as unavailable after the 400 ms wait, like the create below.)
    await expect(create(a.service, account, 'x')).resolves.toMatchObject({ created: false, dataset: { incarnation: made.dataset.incarnation } });
    await expect(a.service.findOrCreate({ account, id: 'x', body: { fields: { other: { type: 'string', name: 'Other' } } } })).rejects.toMatchObject({ code: 'conflict' });
    await expect(create(a.service, account, 'w')).rejects.toMatchObject({ code: 'unavailable' });
    expect((await readTopic(topic)).map((e) => e.dataset)).toEqual(['x']);
  });
});

describe('the distributed schema service when Redis fails', () => {
  it('answers 503 when Redis cannot be reached before anything was decided; nothing reaches the topic', async () => {
    const { topic, prefix, account } = await setting();
    const a = await replica({ topic, prefix });
    await expect(create(a.service, account, 'first')).resolves.toMatchObject({ created: true });
    a.redis.disconnect();
    await expect(create(a.service, account, 'second')).rejects.toMatchObject({ code: 'unavailable' });
    await expect(a.service.delete({ account, id: 'first' })).rejects.toMatchObject({ code: 'unavailable' });
    await expect(a.service.get({ account, id: 'first' })).rejects.toMatchObject({ code: 'unavailable' });
    expect((await readTopic(topic)).map((e) => [e.type, e.dataset])).toEqual([['DatasetDefined', 'first']]);
  });

  it('answers outcome_unknown when Redis fails after the append, and the next change completes it', async () => {
    const { topic, prefix, account, store } = await setting();
    let appended: DatasetEvent | undefined;
    const a = await replica({
      topic,
      prefix,
      lock: { ttlMs: 1500, waitMs: 30_000 },
      afterAppend: (event) => {
        appended = event;
        a.redis.disconnect(); // Redis goes away between the two steps
        return Promise.resolve();
      },
    });
    const b = await replica({ topic, prefix, lock: { ttlMs: 1500, waitMs: 30_000 } });
    await expect(create(a.service, account, 'half')).rejects.toMatchObject({ code: 'outcome_unknown' });
    expect(await store.get(account, 'half')).toBeUndefined();
    await expect(create(b.service, account, 'half')).resolves.toMatchObject({ created: false, dataset: { incarnation: appended?.incarnation } });
    const events = await readTopic(topic);
    expect(events.map((e) => e.incarnation)).toEqual([appended?.incarnation, appended?.incarnation]);
    await storeMatchesTopic(store, account, events, ['half']);
    expect(await leftovers(prefix)).toEqual([]);
  });
});

describe('RedisSchemaStore.apply with the events a roll-forward repeats', () => {
  it('changes nothing for a definition or deletion applied again, nor for a late definition of a deleted incarnation', async () => {
    const prefix = db.prefix();
    const store = new RedisSchemaStore(db.redis, { prefix });
    const base = { schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: 'sales' } as const;
    const defined: DatasetDefined = { ...base, type: 'DatasetDefined', incarnation: 'inc-a', at: 1, definition: { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] } };
    await store.apply([defined]);
    await store.apply([{ ...base, type: 'RecordsAppended', incarnation: 'inc-a', at: 5, records: [], delete_by: null }]);
    const once = await store.get('acme', 'sales');
    await store.apply([defined]);
    expect(await store.get('acme', 'sales')).toEqual(once);
    expect(once?.updated_at).toBe(5);
    expect(await store.count('acme')).toBe(1);

    const deletion: DatasetEvent = { ...base, type: 'DatasetDeleted', incarnation: 'inc-a', at: 6 };
    await store.apply([deletion, deletion]);
    expect(await store.count('acme')).toBe(0);
    await store.apply([defined]); // a late copy of a deleted incarnation's definition
    expect(await store.get('acme', 'sales')).toBeUndefined();
    expect(await store.count('acme')).toBe(0);
  });
});

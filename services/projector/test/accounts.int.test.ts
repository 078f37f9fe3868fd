import { randomBytes } from 'node:crypto';
import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, foldAccounts, type AccountEvent } from '@pushbase/domain';
import { createKafka, KafkaAccountLog, KafkaEventAppender, PoisonEventError } from '@pushbase/kafka';
import { RedisAccountStore } from '@pushbase/redis';
import { sha } from '../../../test/helpers/api-keys';
import { randomName, testConnection, useTestTopics } from '../../../test/helpers/kafka';
import { useTestRedis } from '../../../test/helpers/redis';
import { followAccounts, replayAccounts } from '../src/accounts';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The accounts topic on the shared Kafka, into Redis: what the schema service appends (KafkaAccountLog,
 * transactional) is read back by the projector's follower in order and applied — the repair of a writer
 * that stopped between its append and its own apply — and by replay up to the end offsets it took. A
 * message that is not an account event stops the follower (never skipped). The key itself is in no message.
 */

const kafka = useTestTopics();
const db = useTestRedis();

const newTopic = (): Promise<string> => kafka.create('pb-accounts', 1);
const newStore = (): RedisAccountStore => new RedisAccountStore(db.redis, { prefix: db.prefix() });

const KEY = `pb_${randomBytes(32).toString('base64url')}`;
const base = (account: string, at: number) => ({ schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at }) as const;
const EVENTS: readonly AccountEvent[] = [
  { type: 'AccountCreated', ...base('acme', 1), quotas: DEFAULT_QUOTAS },
  { type: 'KeyCreated', ...base('acme', 2), key_id: 'kid_1', hash: sha(KEY), scope: 'write', label: 'ci' },
  { type: 'AccountCreated', ...base('globex', 3), quotas: { datasets: 2, requests_per_minute: 10 } },
  { type: 'KeyCreated', ...base('globex', 4), key_id: 'kid_2', hash: sha(`${KEY}-2`), scope: 'read', label: null },
  { type: 'KeyRevoked', ...base('acme', 5), key_id: 'kid_1' },
];

async function appendAll(topic: string, events: readonly AccountEvent[]): Promise<number[]> {
  const log = new KafkaAccountLog(new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 1 }));
  try {
    const offsets: number[] = [];
    for (const e of events) offsets.push(...(await log.append([e])).map((p) => p.offset));
    return offsets;
  } finally {
    await log.close();
  }
}

describe('the accounts topic', () => {
  it('the follower applies what was appended but never applied by its writer, in order; the key is in no message', async () => {
    const topic = await newTopic();
    const offsets = await appendAll(topic, EVENTS.slice(0, 2));
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    const store = newStore();
    const fatal: Error[] = [];
    const follower = followAccounts({ connection: testConnection(), topic, groupId: randomName('pb-accounts-follower'), store, log: () => undefined, onFatal: (e) => fatal.push(e) });
    try {
      await follower.started;
      await eventually(async () => (await store.resolveHash(sha(KEY)))?.key_id === 'kid_1', { what: 'the key created in the topic resolves from Redis' });
      // Appended while it follows: the revocation reaches Redis without any writer applying it.
      await appendAll(topic, EVENTS.slice(2));
      const appended = Date.now();
      await eventually(async () => (await store.resolveHash(sha(KEY))) === undefined, { what: 'the revocation applied by the follower', timeoutMs: 15_000 });
      // What repairs a writer that stopped between the topic and Redis: measured, and well inside 5 s.
      const repairMs = Date.now() - appended;
      process.stdout.write(`the follower applied a revocation ${repairMs} ms after its append was acknowledged\n`);
      expect(repairMs).toBeLessThan(5000);
      expect((await kafka.admin.listGroups()).groups.map((g) => g.groupId)).toContain(follower.groupId);
      const fold = foldAccounts(EVENTS);
      expect(await store.list()).toEqual([...fold.accounts.keys()].sort());
      await expect(store.resolveHash(sha(`${KEY}-2`))).resolves.toMatchObject({ account: 'globex', scope: 'read', quotas: { datasets: 2, requests_per_minute: 10 } });
      expect(fatal).toEqual([]);
    } finally {
      await follower.stop();
    }
    // Its consumer group (one per follower start) is deleted when it stops, not left behind.
    expect(follower.groupId).toMatch(/-accounts-[0-9a-f]{8}$/);
    expect((await kafka.admin.listGroups()).groups.map((g) => g.groupId)).not.toContain(follower.groupId);
    // What Kafka holds: the hash, never the key.
    const raw = await readRaw(topic);
    expect(raw).toHaveLength(EVENTS.length);
    expect(raw.join('\n')).not.toContain(KEY);
    expect(raw.join('\n')).toContain(sha(KEY));
    expect(raw.map((m) => (JSON.parse(m) as AccountEvent).type)).toEqual(EVENTS.map((e) => e.type));
  });

  it('replay reads up to the end it took and rebuilds the store; a message that is not an account event stops the follower', async () => {
    const topic = await newTopic();
    const offsets = await appendAll(topic, EVENTS);
    const rebuilt = newStore();
    const replayed = await replayAccounts({ connection: testConnection(), topic, groupId: randomName('pb-accounts-replay'), store: rebuilt });
    const high = (await kafka.admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)] as const);
    expect(replayed).toStrictEqual({ events: EVENTS.length, end: new Map(high) });
    // From an end on: only what comes after it is applied.
    const after = newStore();
    expect(await replayAccounts({ connection: testConnection(), topic, groupId: randomName('pb-accounts-replay'), store: after, from: new Map([[0, offsets[2]!]]) })).toMatchObject({ events: EVENTS.length - 2 });
    await expect(after.get('acme')).resolves.toBeUndefined();
    await expect(after.get('globex')).resolves.toMatchObject({ account: 'globex' });
    await expect(rebuilt.resolveHash(sha(KEY))).resolves.toBeUndefined();
    await expect(rebuilt.get('acme')).resolves.toMatchObject({ account: 'acme', keys: new Map() });

    // A stray producer's message (a dataset event's shape): the follower stops on it, after the events before it.
    const producer = createKafka(testConnection()).producer();
    await producer.connect();
    await producer.send({ topic, messages: [{ key: 'acme', value: JSON.stringify({ type: 'RecordsAppended', schema_version: 1, account: 'acme', at: 9 }) }] });
    await producer.disconnect();
    const store = newStore();
    const fatal: Error[] = [];
    const follower = followAccounts({ connection: testConnection(), topic, groupId: randomName('pb-accounts-follower'), store, log: () => undefined, onFatal: (e) => fatal.push(e) });
    try {
      await eventually(() => fatal.length > 0, { what: 'the follower stopped on the poison message', timeoutMs: 30_000 });
      expect(fatal[0]).toBeInstanceOf(PoisonEventError);
      expect(fatal[0]?.message).toMatch(/unknown account event type "RecordsAppended"/);
      // Everything before it was applied.
      await expect(store.get('globex')).resolves.toMatchObject({ account: 'globex' });
    } finally {
      await follower.stop();
    }
  });
});

/** Every message value of the (one-partition) topic, as text. */
async function readRaw(topic: string): Promise<string[]> {
  const consumer = createKafka(testConnection()).consumer({ groupId: randomName('pb-accounts-raw') });
  const values: string[] = [];
  const [end] = await kafka.admin.fetchTopicOffsets(topic);
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let last = -1;
  await consumer.run({
    eachMessage: ({ message }) => {
      values.push(message.value?.toString('utf8') ?? '');
      last = Number(message.offset);
      return Promise.resolve();
    },
  });
  // The end offset counts transaction markers: done once the last event before it was seen.
  await eventually(() => last >= Number(end!.high) - 2, { what: 'every message read' });
  await consumer.disconnect();
  return values;
}

import { randomBytes } from 'node:crypto';
import { createConnection } from 'node:net';
import { createKafka, ensureTopic, KafkaEventConsumer, parseBrokers, type ConsumedEvent, type KafkaConnection, type KafkaLogLevel } from '@pushbase/kafka';
import type { Admin } from 'kafkajs';
import { eventually } from './eventually';

/*
 * Suites against the shared Kafka (PUSHBASE_KAFKA_BROKERS, default 127.0.0.1:9092). They never skip: a
 * broker that does not answer fails them. Every suite uses topics and groups of its own random names and
 * deletes its topics afterwards.
 */

export const KAFKA_BROKERS = parseBrokers(process.env.PUSHBASE_KAFKA_BROKERS ?? '127.0.0.1:9092');

/** kafkajs's log lines, kept for a test to look at instead of cluttering the output. */
export const kafkaLog: { level: KafkaLogLevel; message: string }[] = [];

export function testConnection(overrides: Partial<KafkaConnection> = {}): KafkaConnection {
  return {
    brokers: KAFKA_BROKERS,
    clientId: 'pushbase-test',
    connectionTimeoutMs: 3000,
    retry: { retries: 3, initialRetryTimeMs: 100, maxRetryTimeMs: 1000 },
    log: (level, message) => {
      if (kafkaLog.length < 1000) kafkaLog.push({ level, message });
    },
    ...overrides,
  };
}

export const randomName = (prefix: string): string => `${prefix}-${randomBytes(6).toString('hex')}`;

/** Fails (never skips) when the broker's port does not accept a connection within a few seconds. */
export async function requireKafka(): Promise<void> {
  const [host, port] = splitHostPort(KAFKA_BROKERS[0]!);
  await new Promise<void>((resolve, reject) => {
    const socket = createConnection({ host, port, timeout: 5000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    const fail = (why: string) => {
      socket.destroy();
      reject(new Error(`Kafka at ${KAFKA_BROKERS[0]} does not answer (${why}); start it with npm run services:up`));
    };
    socket.once('timeout', () => fail('timeout'));
    socket.once('error', (err) => fail(err.message));
  });
}

function splitHostPort(broker: string): [string, number] {
  const at = broker.lastIndexOf(':');
  return [broker.slice(0, at).replace(/^\[|\]$/g, ''), Number(broker.slice(at + 1))];
}

/** A connected admin client; disconnect it in afterAll. */
export async function testAdmin(): Promise<Admin> {
  const admin = createKafka(testConnection()).admin();
  await admin.connect();
  return admin;
}

export async function deleteTopics(admin: Admin, topics: readonly string[]): Promise<void> {
  if (topics.length > 0) await admin.deleteTopics({ topics: [...topics] });
}

export interface TestTopics {
  /** The suite's admin client, connected in beforeAll. */
  readonly admin: Admin;
  /** A topic of its own random name, created now and deleted after the suite. */
  create(prefix: string, partitions: number): Promise<string>;
  /** A random topic name, deleted after the suite, that the test itself creates (or expects made). */
  name(prefix: string): string;
  /** A random consumer group name, deleted after the suite. */
  group(prefix: string): string;
}

/**
 * A suite's Kafka topics: in beforeAll, fails (never skips) when Kafka does not answer and connects an
 * admin client; in afterAll, deletes every group and topic named through it and disconnects. Call it at the top of
 * a test file.
 */
export function useTestTopics(): TestTopics {
  let admin: Admin | undefined;
  const topics: string[] = [];
  const groups: string[] = [];
  beforeAll(async () => {
    await requireKafka();
    admin = await testAdmin();
  });
  afterAll(async () => {
    if (admin === undefined) return;
    // A group still held by a member that did not stop cannot be deleted; its topic goes all the same.
    if (groups.length > 0) await admin.deleteGroups(groups).catch(() => undefined);
    await deleteTopics(admin, topics);
    await admin.disconnect();
  });
  const suite: TestTopics = {
    get admin(): Admin {
      if (admin === undefined) throw new Error('useTestTopics: the admin client is connected in beforeAll');
      return admin;
    },
    name(prefix) {
      const topic = randomName(prefix);
      topics.push(topic);
      return topic;
    },
    group(prefix) {
      const group = randomName(prefix);
      groups.push(group);
      return group;
    },
    async create(prefix, partitions) {
      const topic = suite.name(prefix);
      await ensureTopic(suite.admin, { topic, partitions });
      return topic;
    },
  };
  return suite;
}

/**
 * Reads a topic from the beginning with a fresh consumer group until `n` events arrived (read committed,
 * as every reader), then waits `lingerMs` more, so that a duplicate right behind them is read too.
 */
export async function readEvents(topic: string, n: number, lingerMs = 0): Promise<ConsumedEvent[]> {
  const events: ConsumedEvent[] = [];
  const consumer = new KafkaEventConsumer(
    { connection: testConnection(), topic, groupId: randomName('pushbase-test-read') },
    {
      onBatch: (batch) => {
        events.push(...batch.events);
        return Promise.resolve();
      },
    },
  );
  await consumer.start();
  try {
    await eventually(() => events.length >= n, { what: `${n} events in ${topic}` });
    if (lingerMs > 0) await new Promise((resolve) => setTimeout(resolve, lingerMs));
  } finally {
    await consumer.stop();
  }
  return events;
}

/**
 * Every committed event of `topic` with its position: its partitions' ends now (no transaction left open
 * there), then a fresh group until it read up to them, transaction markers included.
 */
export async function readConsumed(admin: Admin, topic: string): Promise<ConsumedEvent[]> {
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, Number(p.high)]));
  const at = new Map<number, number>();
  const events: ConsumedEvent[] = [];
  const groupId = randomName('pushbase-test-read');
  const consumer = new KafkaEventConsumer(
    { connection: testConnection(), topic, groupId },
    {
      onBatch: (batch) => {
        events.push(...batch.events);
        at.set(batch.partition, batch.next);
        return Promise.resolve();
      },
      onSkipped: (partition, next) => void at.set(partition, next),
    },
  );
  await consumer.start();
  try {
    await eventually(() => [...ends].every(([p, end]) => (at.get(p) ?? 0) >= end), { what: `${topic} read up to ${JSON.stringify([...ends])}`, timeoutMs: 30_000 });
  } finally {
    await consumer.stop();
  }
  await admin.deleteGroups([groupId]).catch(() => undefined);
  return events;
}

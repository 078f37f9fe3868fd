import { randomUUID } from 'node:crypto';
import { pushbaseServices, type EventAppender, type SchemaService } from '@pushbase/contracts';
import { connectSchemaService } from '@pushbase/grpc';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { KafkaAccountLog, KafkaEventAppender, KafkaEventConsumer, type ConsumedEvent } from '@pushbase/kafka';
import type { Redis } from 'ioredis';
import { connectTestRedis } from '../../../test/helpers/redis';
import { randomName, testConnection } from '../../../test/helpers/kafka';
import { createSchemaServer, type DistributedSchema, type DistributedSchemaDeps } from '../src';
import { eventually } from '../../../test/helpers/eventually';

/**
 * One schema replica: a gRPC server in this process with its own Redis connection and Kafka producer, as a
 * process has, and a gRPC client to it. `service` is the client: calls go over gRPC, errors come back
 * through the one mapping. `changes` is the server's own (the test runs its sweep).
 */
export interface Replica extends DistributedSchema {
  readonly redis: Redis;
  readonly address: string;
  readonly appender: EventAppender;
  close(): Promise<void>;
}

export interface ReplicaOptions {
  readonly prefix: string;
  readonly topic: string;
  readonly lock?: DistributedSchemaDeps['lock'];
  /** Wraps the real appender, e.g. to make it fail. */
  readonly appender?: (real: KafkaEventAppender) => EventAppender;
  readonly afterAppend?: DistributedSchemaDeps['afterAppend'];
  readonly brokers?: readonly string[];
  /** With an accounts topic, the replica serves accounts and keys too (`accounts`: the server's own). */
  readonly accountsTopic?: string;
}

const protos = pushbaseServices();

export async function startReplica(options: ReplicaOptions): Promise<Replica> {
  const redis = await connectTestRedis();
  const real = new KafkaEventAppender({
    connection: testConnection({ clientId: `pushbase-schema-test-${randomUUID().slice(0, 8)}`, ...(options.brokers === undefined ? {} : { brokers: options.brokers }) }),
    topic: options.topic,
    appendTimeoutMs: 10_000,
  });
  const appender = options.appender?.(real) ?? real;
  const accountAppender =
    options.accountsTopic === undefined
      ? undefined
      : new KafkaEventAppender({
          connection: testConnection({ clientId: `pushbase-schema-test-${randomUUID().slice(0, 8)}`, ...(options.brokers === undefined ? {} : { brokers: options.brokers }) }),
          topic: options.accountsTopic,
          appendTimeoutMs: 10_000,
        });
  const server = createSchemaServer({
    redis,
    prefix: options.prefix,
    appender,
    lock: options.lock ?? { ttlMs: 30_000, waitMs: 60_000 },
    log: () => undefined,
    protos,
    ...(accountAppender === undefined ? {} : { accountLog: new KafkaAccountLog(accountAppender) }),
    ...(options.afterAppend === undefined ? {} : { afterAppend: options.afterAppend }),
  });
  const port = await server.grpc.listen('127.0.0.1', 0);
  const address = `127.0.0.1:${port}`;
  const client = connectSchemaService(address, { protos });
  return {
    service: client,
    changes: server.changes,
    accounts: server.accounts,
    redis,
    appender,
    address,
    close: async () => {
      client.close();
      // A test's frozen call (a simulated crash) is cancelled after a short grace.
      await server.grpc.shutdown(1000);
      await real.close();
      await accountAppender?.close();
      redis.disconnect();
    },
  };
}

/** The sentinel that marks the end of what a test wrote to its (one-partition) topic. */
const sentinel = (): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'sentinel',
  dataset: 'end',
  incarnation: randomUUID(),
  at: 0,
  records: [],
  delete_by: null,
});

/**
 * Every event in the one-partition `topic`: appends a sentinel, then reads from the start until it comes
 * by. Exact whatever the appender stores beside the events (a transaction's markers take offsets too).
 */
export async function readTopic(topic: string): Promise<DatasetEvent[]> {
  const end = sentinel();
  const appender = new KafkaEventAppender({ connection: testConnection(), topic });
  try {
    await appender.append([end]);
  } finally {
    await appender.close();
  }
  const events: ConsumedEvent[] = [];
  let seen = false;
  const consumer = new KafkaEventConsumer(
    { connection: testConnection(), topic, groupId: randomName('pushbase-schema-read') },
    {
      onBatch: (batch) => {
        for (const e of batch.events) {
          if (e.event.incarnation === end.incarnation) seen = true;
          else if (!seen) events.push(e);
        }
        return Promise.resolve();
      },
    },
  );
  await consumer.start();
  try {
    await eventually(() => seen, { what: `the end of ${topic}`, timeoutMs: 30_000 });
  } finally {
    await consumer.stop();
  }
  return events.map((e) => e.event).filter((e) => e.account !== 'sentinel');
}

export const definitionBody = { fields: { amount: { type: 'number', name: 'Amount' } } };

/** A create's outcome as a test compares it. */
export async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    const r = (await p) as { created?: boolean } | undefined;
    return r?.created === true ? 'created' : r?.created === false ? 'found' : 'ok';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
}

export const create = (service: SchemaService, account: string, id: string) => service.findOrCreate({ account, id, body: definitionBody });

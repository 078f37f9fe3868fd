import { connect, type Socket } from 'node:net';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import type { ISocketFactory } from 'kafkajs';
import { KafkaEventAppender } from '../src';
import { readEvents, testConnection, useTestTopics } from '../../../test/helpers/kafka';
import { eventually } from '../../../test/helpers/eventually';

/*
 * The appender's idempotent mode (the records service's) against the shared Kafka: a write is one Produce
 * request; a broker that goes away is `unavailable` for the writes that were never sent, at once, not at
 * their deadline; a produce whose answer is lost is confirmed (sent again) and stored once. Loopback only;
 * the "outage" is the test's socket factory refusing and cutting connections, the broker stays up.
 */

const kafka = useTestTopics();

async function newTopic(partitions: number): Promise<string> {
  return kafka.create('pushbase-idempotent', partitions);
}

const event = (dataset: string, seq: number): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acct',
  dataset,
  incarnation: 'inc-1',
  at: seq,
  records: [{ seq }],
  delete_by: null,
});

const PRODUCE_API_KEY = 0;

/**
 * Connections the test can take away: `down()` destroys the open ones and refuses new ones until `up()`;
 * `cutNextProduce()` destroys the connection of the next produce request when its answer arrives, before
 * kafkajs reads it: the broker stored the batch, the answer is lost.
 */
function switchableSockets(): { socketFactory: ISocketFactory; down(): void; up(): void; cutNextProduce(): void } {
  const open = new Set<Socket>();
  let refusing = false;
  let cut = false;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket: Socket = connect({ host: refusing ? '127.0.0.1' : host, port: refusing ? 1 : port }, onConnect);
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    let dropAnswer = false;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (cut && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === PRODUCE_API_KEY) {
        cut = false;
        dropAnswer = true;
      }
      return write(chunk, ...rest);
    });
    socket.emit = ((name: string | symbol, ...args: unknown[]) => {
      if (name === 'data' && dropAnswer) {
        dropAnswer = false;
        socket.destroy(Object.assign(new Error('read ECONNRESET (cut by the test)'), { code: 'ECONNRESET' }));
        return true;
      }
      return emit(name, ...args);
    }) as typeof socket.emit;
    return socket;
  };
  return {
    socketFactory,
    down: () => {
      refusing = true;
      for (const s of open) s.destroy(Object.assign(new Error('read ECONNRESET (the test took the broker away)'), { code: 'ECONNRESET' }));
    },
    up: () => {
      refusing = false;
    },
    cutNextProduce: () => {
      cut = true;
    },
  };
}

describe('KafkaEventAppender, idempotent mode, against Kafka', () => {
  it('a write costs one request: Produce (no transaction requests)', async () => {
    const topic = await newTopic(2);
    const apis: string[] = [];
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, mode: 'idempotent', lingerMs: 1, onRequest: (api) => apis.push(api) });
    try {
      await appender.append([event('warmup', 0)]); // connects: metadata, producer id
      const before = apis.length;
      for (let i = 0; i < 20; i++) await appender.append([event('seq', i)]);
      expect(apis.slice(before)).toEqual(Array.from({ length: 20 }, () => 'Produce'));
    } finally {
      await appender.close();
    }
    const stored = await readEvents(topic, 21, 500);
    expect(stored.filter((e) => e.event.dataset === 'seq').map((e) => e.event.at)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('a broker gone after connecting: writes never sent are unavailable at once; after it is back they are stored', async () => {
    const topic = await newTopic(1);
    const net = switchableSockets();
    const appender = new KafkaEventAppender({
      connection: testConnection({ socketFactory: net.socketFactory, connectionTimeoutMs: 1000, retry: { retries: 2, initialRetryTimeMs: 100, maxRetryTimeMs: 500 } }),
      topic,
      mode: 'idempotent',
      lingerMs: 1,
      appendTimeoutMs: 20_000,
    });
    try {
      await appender.append([event('ds', 0)]);
      net.down();
      await new Promise((resolve) => setTimeout(resolve, 50)); // kafkajs sees its connections closed
      const started = Date.now();
      const refused = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => appender.append([event('ds', 100 + i)])));
      expect(refused.map((r) => (r.status === 'rejected' ? (r.reason as { code?: unknown }).code : 'ok'))).toEqual(Array.from({ length: 5 }, () => 'unavailable'));
      expect(Date.now() - started).toBeLessThan(10_000); // far from the 20 s deadline
      net.up();
      await eventually(async () => {
        try {
          await appender.append([event('ds', 1)]);
          return true;
        } catch {
          return false;
        }
      }, { what: 'writes taken again' });
    } finally {
      await appender.close();
    }
    const stored = await readEvents(topic, 2, 500);
    // Nothing refused is stored; the write retried until taken is stored (once or more, as retried writes are).
    expect(stored.map((e) => e.event.at).filter((at) => at >= 100)).toEqual([]);
    expect(stored[0]!.event.at).toBe(0);
    expect(new Set(stored.slice(1).map((e) => e.event.at))).toEqual(new Set([1]));
  });

  it('a produce whose answer is lost is sent again and stored once, at the position the write was told', async () => {
    const topic = await newTopic(1);
    const net = switchableSockets();
    const appender = new KafkaEventAppender({
      connection: testConnection({ socketFactory: net.socketFactory, requestTimeoutMs: 5000 }),
      topic,
      mode: 'idempotent',
      lingerMs: 1,
      commitRetryMs: 20,
      appendTimeoutMs: 20_000,
    });
    let told: { partition: number; offset: number } | undefined;
    try {
      await appender.append([event('ds', 0)]);
      net.cutNextProduce();
      [told] = await appender.appendAt([event('ds', 1)]);
      await appender.append([event('ds', 2)]);
      expect(appender.stats().commitRetries).toBeGreaterThanOrEqual(1);
    } finally {
      await appender.close();
    }
    const stored = await readEvents(topic, 3, 500);
    expect(stored.map((e) => e.event.at)).toEqual([0, 1, 2]);
    expect(stored[1]!.position).toEqual(told);
  });
});

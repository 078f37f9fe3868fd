import { connect, type Socket } from 'node:net';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import type { ISocketFactory } from 'kafkajs';
import { KafkaEventAppender } from '../src';
import { readConsumed, testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * The appender's exact answers against the real broker, with the one request that matters cut on its way
 * back: a produce the broker stored whose answer never came (unavailable, and read committed never shows
 * it), a commit the coordinator applied whose answer never came (retried, confirmed, acknowledged once).
 * What the topic holds is read committed, as the projector reads it.
 */

const kafka = useTestTopics();

const PRODUCE = 0;
const END_TXN = 26;

/**
 * Sockets that die right after handing a request of `apiKey` to the kernel, while `armed()` says so: the
 * request goes out (TCP delivers what was written before the close), its answer never comes back.
 */
function cutting(apiKey: number, armed: () => boolean): { socketFactory: ISocketFactory; cuts: () => number } {
  let cuts = 0;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket: Socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      const written = write(chunk, ...rest);
      if (Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === apiKey && armed()) {
        cuts += 1;
        socket.end();
        socket.destroy(Object.assign(new Error('read ECONNRESET (cut by the test)'), { code: 'ECONNRESET' }));
      }
      return written;
    });
    return socket;
  };
  return { socketFactory, cuts: () => cuts };
}

const event = (seq: number): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acct',
  dataset: 'ds',
  incarnation: 'inc',
  at: seq,
  records: [{ seq }],
  delete_by: null,
});

/** The topic's committed events, in order (one partition). */
const readCommitted = async (topic: string): Promise<number[]> => (await readConsumed(kafka.admin, topic)).map((e) => e.event.at);

async function newTopic(): Promise<string> {
  return kafka.create('pushbase-tx', 1);
}

it('a produce whose answer is lost (the broker may have stored it): unavailable, aborted, never read', async () => {
  const topic = await newTopic();
  let armed = false;
  const chaos = cutting(PRODUCE, () => armed);
  const appender = new KafkaEventAppender({
    connection: testConnection({ socketFactory: chaos.socketFactory, retry: { retries: 2, initialRetryTimeMs: 50, maxRetryTimeMs: 200 } }),
    topic,
    lingerMs: 1,
  });
  try {
    await appender.append([event(0)]); // connected, one transaction committed
    armed = true; // every produce attempt of the next append is cut after the broker had it
    await expect(appender.append([event(1)])).rejects.toMatchObject({ code: 'unavailable' });
    expect(chaos.cuts()).toBeGreaterThan(0);
    armed = false;
    await appender.append([event(2)]);
  } finally {
    await appender.close();
  }
  // The refused event may sit in the partition's log, but in an aborted transaction.
  expect(await readCommitted(topic)).toEqual([0, 2]);
});

it('a commit applied by the coordinator whose answer is lost: retried, confirmed, acknowledged once', async () => {
  const topic = await newTopic();
  let armed = false;
  const chaos = cutting(END_TXN, () => {
    const cut = armed;
    armed = false; // only the first commit of the armed append
    return cut;
  });
  const appender = new KafkaEventAppender({ connection: testConnection({ socketFactory: chaos.socketFactory }), topic, lingerMs: 1, commitRetryMs: 20 });
  try {
    await appender.append([event(0)]);
    armed = true;
    const [position] = await appender.appendAt([event(1)]);
    expect(position).toMatchObject({ partition: 0 });
    expect(chaos.cuts()).toBe(1);
    expect(appender.stats().commitRetries).toBeGreaterThanOrEqual(1);
    await appender.append([event(2)]); // the producer goes on (re-initialised after the retried commit)
  } finally {
    await appender.close();
  }
  expect(await readCommitted(topic)).toEqual([0, 1, 2]);
});

import { connect, type Socket } from 'node:net';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import type { ISocketFactory } from 'kafkajs';
import { KafkaEventAppender } from '../src';
import { readConsumed, testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * The appender while its connections to the broker are cut in the middle of produce requests — sometimes
 * before the broker read the request, sometimes after it stored the batch but before the answer came back.
 * kafkajs then retries; the idempotent producer and the one-request-in-flight rule must turn that into no
 * duplicates and no reordering: every acknowledged event is in the topic exactly once, each dataset's
 * acknowledged events in call order, at the positions the appends were told. And the answers are exact, in
 * both modes of the appender (transactions; idempotent produce with lost answers confirmed): read
 * committed, the topic holds no event whose append was told `unavailable`; one told `outcome_unknown` may
 * be there or not. Cuts also hit the commit (EndTxn) requests. Bounded: 480 appends and at most 40 cuts per
 * mode, on loopback. (With the producer's idempotence switched off, this test finds duplicates.) In
 * idempotent mode every cut comes after a Produce request was written, so no append is refused: what is
 * checked there is that confirming (re-sending) cut batches stores each exactly once and in order; that a
 * write never sent is the only kind refused is appender-idempotent.int.test.ts's.
 */

const kafka = useTestTopics();

const PRODUCE_API_KEY = 0;
const END_TXN_API_KEY = 26;

/** Sockets that, after a produce request went out, are destroyed now and then a moment later. */
function cuttingSockets(maxCuts: number, probability: number, random: () => number): { socketFactory: ISocketFactory; cuts: () => number } {
  let cuts = 0;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket: Socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      // A request: int32 size, int16 api key, ...
      if (Buffer.isBuffer(chunk) && chunk.length >= 6 && [PRODUCE_API_KEY, END_TXN_API_KEY].includes(chunk.readInt16BE(4)) && cuts < maxCuts && random() < probability) {
        cuts += 1;
        // 0–3 ms: sometimes before the broker took it, sometimes after it stored it and before the answer.
        setTimeout(() => socket.destroy(Object.assign(new Error('read ECONNRESET (cut by the test)'), { code: 'ECONNRESET' })), Math.floor(random() * 4));
      }
      return write(chunk, ...rest);
    });
    return socket;
  };
  return { socketFactory, cuts: () => cuts };
}

/** A deterministic sequence, so a failure can be replayed. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

const event = (dataset: string, seq: number): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acct',
  dataset,
  incarnation: 'inc',
  at: seq,
  records: Array.from({ length: 20 }, (_, i) => ({ seq, i, label: `record ${i} of ${seq}` })),
  delete_by: null,
});

it.each(['transactional', 'idempotent'] as const)('%s: stores every acknowledged append exactly once and in order while connections are cut mid-request', async (mode) => {
  const topic = await kafka.create('pushbase-faults', 4);
  const seed = Date.now() % 100_000;
  const chaos = cuttingSockets(40, 0.5, lcg(seed));
  const appender = new KafkaEventAppender({
    connection: testConnection({ socketFactory: chaos.socketFactory, requestTimeoutMs: 5000, retry: { retries: 8, initialRetryTimeMs: 50, maxRetryTimeMs: 500 } }),
    topic,
    mode,
    lingerMs: 2,
    appendTimeoutMs: 30_000,
  });
  const datasets = Array.from({ length: 12 }, (_, i) => `ds-${i}`);
  const acknowledged = new Map<string, { dataset: string; seq: number; partition: number; offset: number }>();
  const refused = new Set<string>();
  let unknown = 0;
  try {
    // 12 callers, one per dataset, each appending its dataset's events one after another (call order = seq
    // order), all at once: requests carry many datasets' appends, and get cut.
    await Promise.all(
      datasets.map(async (dataset, d) => {
        for (let k = 0; k < 40; k++) {
          const seq = d * 1000 + k;
          try {
            const [p] = await appender.appendAt([event(dataset, seq)]);
            acknowledged.set(`${dataset}#${seq}`, { dataset, seq, partition: p!.partition, offset: p!.offset });
          } catch (err) {
            expect(['unavailable', 'outcome_unknown']).toContain((err as { code?: unknown }).code);
            if ((err as { code?: unknown }).code === 'unavailable') refused.add(`${dataset}#${seq}`);
            else unknown += 1;
          }
        }
      }),
    );
  } finally {
    await appender.close();
  }
  const context = `${mode}, seed ${seed}, ${chaos.cuts()} cuts, ${acknowledged.size} acknowledged, ${refused.size} refused, ${unknown} unknown`;
  expect({ context, cutsHappened: chaos.cuts() > 0 }).toEqual({ context, cutsHappened: true });
  // A guard that the run is not vacuous, not a speed check: one cut refuses a whole batch of up to 12
  // appends, so how many are refused depends on where the cuts land (seed 50624 on a loaded CI machine: 30
  // cuts, 288 of 480 acknowledged). Half acknowledged still leaves hundreds to check exactly below.
  expect({ context, mostAcknowledged: acknowledged.size >= 240 }).toEqual({ context, mostAcknowledged: true });

  // Read everything back, committed only, up to each partition's end (no transaction of the appender is
  // left open).
  const read = await readConsumed(kafka.admin, topic);

  const keys = read.map((e) => `${e.event.dataset}#${e.event.at}`);
  const duplicates = keys.filter((k, i) => keys.indexOf(k) !== i);
  expect({ context, duplicates }).toEqual({ context, duplicates: [] });
  const where = new Map(read.map((e) => [`${e.event.dataset}#${e.event.at}`, e.position]));
  const refusedButStored = keys.filter((k) => refused.has(k));
  expect({ context, refusedButStored }).toEqual({ context, refusedButStored: [] });
  for (const [key, a] of acknowledged) expect({ key, at: where.get(key) }).toEqual({ key, at: { partition: a.partition, offset: a.offset } });
  for (const dataset of datasets) {
    const stored = read.filter((e) => e.event.dataset === dataset && acknowledged.has(`${dataset}#${e.event.at}`)).map((e) => e.event.at);
    expect({ context, dataset, stored }).toEqual({ context, dataset, stored: [...stored].sort((x, y) => x - y) });
  }
}, 120_000);

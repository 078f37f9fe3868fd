import { createServer } from 'node:net';
import { EVENT_SCHEMA_VERSION, type DatasetEvent } from '@pushbase/domain';
import { createKafka, KafkaEventAppender, partitionerFor } from '../src';
import { readEvents, testConnection, useTestTopics } from '../../../test/helpers/kafka';

/*
 * The appender against the shared Kafka: the linger really shares produce requests between concurrent
 * appends, one dataset's events stay in call order under concurrency over many datasets and partitions, and
 * a broker that cannot be reached turns into `unavailable` within a bounded time.
 */

const kafka = useTestTopics();

async function newTopic(partitions: number): Promise<string> {
  return kafka.create('pushbase-appender', partitions);
}

const event = (account: string, dataset: string, seq: number): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account,
  dataset,
  incarnation: 'inc-1',
  at: seq,
  records: [{ seq }],
  delete_by: null,
});

/** Counts the Produce requests a producer sends, from kafkajs's instrumentation events. */
function countProduceRequests(): { onRequest: (apiName: string) => void; count: () => number } {
  let n = 0;
  return {
    onRequest: (apiName) => {
      if (apiName === 'Produce') n += 1;
    },
    count: () => n,
  };
}

/** Reads the whole topic (a fresh group) until `n` events arrived. */
describe('KafkaEventAppender against Kafka', () => {
  it('shares produce requests: 200 concurrent appends take far fewer than 200 requests', async () => {
    const topic = await newTopic(1);
    const produce = countProduceRequests();
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 5, onRequest: produce.onRequest });
    try {
      await appender.append([event('acct', 'warmup', 0)]); // connects: not part of the count below
      const before = produce.count();
      await Promise.all(Array.from({ length: 200 }, (_, i) => appender.append([event('acct', `ds-${i % 7}`, i)])));
      const requests = produce.count() - before;
      expect(requests).toBeGreaterThanOrEqual(1);
      expect(requests).toBeLessThanOrEqual(20);
      expect(appender.stats().appends).toBe(201);
    } finally {
      await appender.close();
    }
    // And the other way round: one at a time, every append is its own request.
    const sequential = countProduceRequests();
    const one = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 5, onRequest: sequential.onRequest });
    try {
      await one.append([event('acct', 'warmup', 0)]);
      const before = sequential.count();
      for (let i = 0; i < 20; i++) await one.append([event('acct', 'seq', i)]);
      expect(sequential.count() - before).toBe(20);
    } finally {
      await one.close();
    }
  });

  it('a transaction costs three requests: AddPartitionsToTxn, Produce, EndTxn (no Metadata or FindCoordinator each time)', async () => {
    const topic = await newTopic(2);
    const apis: string[] = [];
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 1, onRequest: (api) => apis.push(api) });
    try {
      await appender.append([event('acct', 'warmup', 0)]); // connects: metadata, coordinator, producer id
      const before = apis.length;
      for (let i = 0; i < 20; i++) await appender.append([event('acct', 'seq', i)]);
      const counts = new Map<string, number>();
      for (const api of apis.slice(before)) counts.set(api, (counts.get(api) ?? 0) + 1);
      expect(counts.get('Produce')).toBe(20);
      expect(counts.get('EndTxn')).toBe(20);
      // One each, or more when the coordinator answered CONCURRENT_TRANSACTIONS right after a commit.
      expect(counts.get('AddPartitionsToTxn')).toBeGreaterThanOrEqual(20);
      expect([...counts.keys()].sort()).toEqual(['AddPartitionsToTxn', 'EndTxn', 'Produce']);
    } finally {
      await appender.close();
    }
  });

  it("keeps each dataset's events in call order under concurrency, across many datasets and partitions", async () => {
    const partitions = 4;
    const topic = await newTopic(partitions);
    const appender = new KafkaEventAppender({ connection: testConnection(), topic, lingerMs: 3 });
    const datasets = Array.from({ length: 40 }, (_, i) => ({ account: `acct-${i % 3}`, dataset: `ds-${i}` }));
    const acknowledged: { account: string; dataset: string; seq: number; partition: number; offset: number }[] = [];
    try {
      // Waves of concurrent appends; within a wave every dataset gets several appends, issued in seq order.
      let seq = 0;
      for (let wave = 0; wave < 5; wave++) {
        const calls: Promise<void>[] = [];
        for (let k = 0; k < 5; k++) {
          for (const d of datasets) {
            const s = seq++;
            calls.push(
              appender.appendAt([event(d.account, d.dataset, s)]).then(([p]) => {
                acknowledged.push({ ...d, seq: s, partition: p!.partition, offset: p!.offset });
              }),
            );
          }
        }
        await Promise.all(calls);
      }
    } finally {
      await appender.close();
    }
    expect(acknowledged).toHaveLength(1000);
    const read = await readEvents(topic, 1000);
    expect(read).toHaveLength(1000);
    const byDataset = new Map<string, number[]>();
    for (const e of read) {
      const key = `${e.event.account}/${e.event.dataset}`;
      byDataset.set(key, [...(byDataset.get(key) ?? []), e.event.at]);
    }
    for (const d of datasets) {
      const seqs = byDataset.get(`${d.account}/${d.dataset}`)!;
      expect(seqs).toHaveLength(25);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    }
    // The positions an append was told are where the event is.
    const at = new Map(read.map((e) => [`${e.position.partition}@${e.position.offset}`, e.event.at]));
    for (const a of acknowledged) expect(at.get(`${a.partition}@${a.offset}`)).toBe(a.seq);
    expect(new Set(read.map((e) => e.position.partition)).size).toBe(partitions);
  });

  it('puts a dataset in the partition a kafkajs (or Java) producer would pick for its key', async () => {
    const topic = await newTopic(5);
    const producer = createKafka(testConnection()).producer({ allowAutoTopicCreation: false });
    await producer.connect();
    try {
      const partitionOf = partitionerFor(5);
      for (let i = 0; i < 20; i++) {
        const key = `acct/ds-${i}`;
        const [meta] = await producer.send({ topic, acks: -1, messages: [{ key, value: 'x' }] });
        expect(meta!.partition).toBe(partitionOf(key));
      }
    } finally {
      await producer.disconnect();
    }
  });

  it('gives `unavailable` within a bounded time when no broker can be reached', async () => {
    // A loopback port nothing listens on: bound, then closed again.
    const port = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const appender = new KafkaEventAppender({
      connection: testConnection({ brokers: [`127.0.0.1:${port}`], connectionTimeoutMs: 1000, retry: { retries: 2, initialRetryTimeMs: 100, maxRetryTimeMs: 500 } }),
      topic: 'pushbase-nowhere',
      appendTimeoutMs: 10_000,
    });
    const started = Date.now();
    try {
      const results = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => appender.append([event('acct', 'ds', i)])));
      const elapsed = Date.now() - started;
      for (const r of results) {
        expect(r.status).toBe('rejected');
        expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'unavailable' });
      }
      expect(elapsed).toBeLessThan(12_000);
    } finally {
      await appender.close();
    }
  });
});

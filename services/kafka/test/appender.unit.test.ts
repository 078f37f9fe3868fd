import { EVENT_SCHEMA_VERSION, DomainError, type DatasetEvent } from '@pushbase/domain';
import { KafkaEventAppender, type ProduceSession } from '../src/appender';
import { partitionerFor, type OutgoingMessage } from '../src/messages';

/*
 * The appender's batching and failure rules against a fake producer session: what goes into which request,
 * in what order, and what each append is told. The real broker's side is in appender.int.test.ts.
 */

const event = (seq: number, dataset = 'ds', records = 1): DatasetEvent => ({
  type: 'RecordsAppended',
  schema_version: EVENT_SCHEMA_VERSION,
  account: 'acct',
  dataset,
  incarnation: 'inc',
  at: seq,
  records: Array.from({ length: records }, (_, i) => ({ seq, i })),
  delete_by: null,
});

type Sent = readonly (OutgoingMessage & { readonly partition: number })[];

/** A broker of `partitions` partitions in memory; `gate` holds a send until released; `fail` makes sends throw. */
class FakeBroker {
  readonly logs: number[][];
  readonly requests: Sent[] = [];
  sessions = 0;
  connectFailures = 0;
  sendFailures = 0;
  inFlight = 0;
  maxInFlight = 0;
  gate: Promise<void> | undefined;

  constructor(readonly partitions: number) {
    this.logs = Array.from({ length: partitions }, () => []);
  }

  session = (): ProduceSession => {
    this.sessions += 1;
    return {
      connect: () => (this.connectFailures-- > 0 ? Promise.reject(new Error('ECONNREFUSED')) : Promise.resolve(this.partitions)),
      send: async (messages) => {
        this.inFlight += 1;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        try {
          this.requests.push(messages);
          await this.gate;
          if (this.sendFailures-- > 0) throw new Error('NOT_ENOUGH_REPLICAS');
          const base = new Map<number, number>();
          for (const m of messages) {
            if (!base.has(m.partition)) base.set(m.partition, this.logs[m.partition]!.length);
            this.logs[m.partition]!.push(JSON.parse(m.value.toString('utf8')).at);
          }
          return [...base].map(([partition, baseOffset]) => ({ partition, baseOffset }));
        } finally {
          this.inFlight -= 1;
        }
      },
      disconnect: () => Promise.resolve(),
    };
  };
}

const seqsOf = (request: Sent): number[] => request.map((m) => JSON.parse(m.value.toString('utf8')).at);

describe('KafkaEventAppender', () => {
  it('sends concurrent appends together in one request after the linger, in call order', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 20, session: broker.session });
    const positions = await Promise.all(Array.from({ length: 50 }, (_, i) => appender.appendAt([event(i)])));
    expect(broker.requests).toHaveLength(1);
    expect(seqsOf(broker.requests[0]!)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(positions.map((p) => p[0]!.offset)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(appender.stats()).toEqual({ requests: 1, appends: 50, messages: 50 });
    await appender.close();
  });

  it('keeps one request in flight; appends made meanwhile go out together right after it', async () => {
    const broker = new FakeBroker(1);
    let release!: () => void;
    broker.gate = new Promise((resolve) => (release = resolve));
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, session: broker.session });
    const first = appender.append([event(0)]);
    while (broker.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const later = Array.from({ length: 30 }, (_, i) => appender.append([event(i + 1)]));
    await new Promise((resolve) => setTimeout(resolve, 30)); // far past the linger: still held behind the first
    expect(broker.requests).toHaveLength(1);
    release();
    await Promise.all([first, ...later]);
    expect(broker.requests.map(seqsOf)).toEqual([[0], Array.from({ length: 30 }, (_, i) => i + 1)]);
    expect(broker.maxInFlight).toBe(1);
    await appender.close();
  });

  it('sends an append made the moment the one before it resolves (no lost wake-up between requests)', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, appendTimeoutMs: 2000, session: broker.session });
    for (let i = 0; i < 20; i++) await appender.append([event(i)]);
    for (let i = 20; i < 40; i++) await appender.appendAt([event(i)]);
    expect(broker.logs[0]).toEqual(Array.from({ length: 40 }, (_, i) => i));
    await appender.close();
  });

  it('gives each event its offset within its partition, across datasets in one request', async () => {
    const broker = new FakeBroker(4);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 10, session: broker.session });
    const datasets = Array.from({ length: 12 }, (_, i) => `ds-${i}`);
    const calls = Array.from({ length: 120 }, (_, i) => appender.appendAt(i % 10 === 0 ? [event(i, datasets[i % 12]), event(i + 0.5, datasets[i % 12])] : [event(i, datasets[i % 12])]));
    const positions = (await Promise.all(calls)).flat();
    expect(broker.requests).toHaveLength(1);
    const partitionOf = partitionerFor(4);
    for (const [i, p] of positions.entries()) {
      expect(broker.logs[p.partition]![p.offset]).toBe(JSON.parse(broker.requests[0]![i]!.value.toString('utf8')).at);
      expect(p.partition).toBe(partitionOf(`acct/${broker.requests[0]![i]!.key.split('/')[1]}`));
    }
    expect(new Set(positions.map((p) => p.partition)).size).toBeGreaterThan(1);
    await appender.close();
  });

  it('starts a request at once when maxBatchBytes are queued, and never puts more in one', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 60_000, maxBatchBytes: 4000, session: broker.session });
    // ~1 KB each: four fill a request; a minute's linger would time the test out if size did not trigger it.
    await Promise.all(Array.from({ length: 12 }, (_, i) => appender.append([event(i, 'ds', 110)])));
    expect(broker.requests.length).toBeGreaterThanOrEqual(3);
    for (const r of broker.requests) expect(r.reduce((n, m) => n + m.value.length + m.key.length + 64, 0)).toBeLessThanOrEqual(4000);
    expect(broker.requests.flatMap(seqsOf)).toEqual(Array.from({ length: 12 }, (_, i) => i));
    await appender.close();
  });

  it('rejects every append of a failed request as unavailable, and sends the next on a new producer', async () => {
    const broker = new FakeBroker(1);
    broker.sendFailures = 1;
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 5, session: broker.session });
    const failed = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => appender.append([event(i)])));
    expect(failed.map((r) => r.status)).toEqual(Array(5).fill('rejected'));
    for (const r of failed) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(DomainError);
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'unavailable', message: expect.stringContaining('NOT_ENOUGH_REPLICAS') });
    }
    expect(broker.sessions).toBe(1);
    await appender.append([event(5)]);
    expect(broker.sessions).toBe(2); // a fresh producer id: its sequence numbers cannot collide with the failed batch's
    expect(broker.logs[0]).toEqual([5]);
    await appender.close();
  });

  it('rejects as unavailable when the producer cannot connect, and tries again for the next append', async () => {
    const broker = new FakeBroker(1);
    broker.connectFailures = 1;
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, session: broker.session });
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('ECONNREFUSED') });
    await appender.append([event(1)]);
    expect(broker.logs[0]).toEqual([1]);
    await appender.close();
  });

  it('rejects an append not acknowledged by its deadline; one still queued then is never sent', async () => {
    const broker = new FakeBroker(1);
    let release!: () => void;
    broker.gate = new Promise((resolve) => (release = resolve));
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, appendTimeoutMs: 100, session: broker.session });
    const inFlight = appender.append([event(0)]);
    while (broker.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const queued = appender.append([event(1)]);
    await expect(inFlight).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('within 100 ms') });
    await expect(queued).rejects.toMatchObject({ code: 'unavailable' });
    release();
    await appender.close();
    expect(broker.requests.map(seqsOf)).toEqual([[0]]);
    // The in-flight one was stored although its append was told unavailable: the gap issue 7 closes.
    expect(broker.logs[0]).toEqual([0]);
  });

  it('refuses an event over the message limit as invalid, without sending anything', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', maxMessageBytes: 500, session: broker.session });
    await expect(appender.append([event(0, 'ds', 50)])).rejects.toMatchObject({ code: 'invalid' });
    expect(broker.requests).toEqual([]);
    await appender.close();
  });

  it('refuses an append whose events belong to different datasets', async () => {
    const broker = new FakeBroker(2);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', session: broker.session });
    await expect(appender.append([event(0, 'a'), event(1, 'b')])).rejects.toThrow(/one dataset \(acct\/a\), not also acct\/b/);
    await expect(appender.append([])).rejects.toThrow(/at least one event/);
    await appender.close();
  });

  it('on close sends what is queued without waiting out the linger, then refuses appends', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 60_000, session: broker.session });
    const queued = Array.from({ length: 3 }, (_, i) => appender.append([event(i)]));
    await appender.close();
    await Promise.all(queued);
    expect(broker.logs[0]).toEqual([0, 1, 2]);
    await expect(appender.append([event(3)])).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('stores a single event given pre-encoded as the inside of its array, without copying it', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, session: broker.session });
    const e = event(7);
    const encoded = new TextEncoder().encode(JSON.stringify([e]));
    await appender.append([e], encoded);
    const value = broker.requests[0]![0]!.value;
    expect(value.toString('utf8')).toBe(JSON.stringify(e));
    expect(value.buffer).toBe(encoded.buffer);
    await appender.close();
  });
});

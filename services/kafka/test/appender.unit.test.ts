import { EVENT_SCHEMA_VERSION, DomainError, type DatasetEvent } from '@pushbase/domain';
import { KafkaEventAppender, type ProduceSession } from '../src/appender';
import { NotSentError } from '../src/idempotent-producer';
import { TransactionAbortedError, TransactionFencedError } from '../src/transactional-producer';
import { partitionerFor, type OutgoingMessage } from '../src/messages';
import { createMetricsRegistry, kafkaAppenderMetrics } from '@pushbase/metrics';
import { sample } from '../../../test/helpers/metrics';

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

/** A stored message (its transaction's state decides whether readers see it) or a transaction marker. */
type Entry = { readonly at: number; readonly txn: Txn } | { readonly marker: 'commit' | 'abort' };
interface Txn {
  state: 'open' | 'committed' | 'aborted';
  readonly partitions: Set<number>;
}

/**
 * A transactional broker of `partitions` partitions in memory. `gate` holds a send until released;
 * `faults` is a queue of what the next sends and commits do instead of succeeding:
 *   send-refused   the send fails, nothing stored            send-lost   stored, but the answer is lost
 *   commit-lost    the commit is applied, the answer lost    commit-dropped   the commit never arrives
 *   commit-refused the coordinator aborted the transaction (INVALID_TXN_STATE), as at its timeout
 *   commit-fenced  the coordinator answers with a fencing error (another producer took the id)
 */
type Fault = 'send-refused' | 'send-lost' | 'commit-lost' | 'commit-dropped' | 'commit-refused' | 'commit-fenced';

class FakeBroker {
  readonly logs: Entry[][];
  readonly requests: Sent[] = [];
  readonly commits: number[] = []; // per commit() call, the session number
  sessions = 0;
  connectFailures = 0;
  inFlight = 0;
  maxInFlight = 0;
  gate: Promise<void> | undefined;
  commitGate: Promise<void> | undefined;
  readonly faults: Fault[] = [];

  constructor(readonly partitions: number) {
    this.logs = Array.from({ length: partitions }, () => []);
  }

  /** What a read-committed reader sees of a partition (the `at` of each event). */
  committed(partition = 0): number[] {
    return this.logs[partition]!.flatMap((e) => ('at' in e && e.txn.state === 'committed' ? [e.at] : []));
  }

  /** Whether any transaction is still open (holding the last stable offset back). */
  open(): boolean {
    return this.logs.some((log) => log.some((e) => 'at' in e && e.txn.state === 'open'));
  }

  private fault(kind: 'send' | 'commit'): Fault | undefined {
    return this.faults[0]?.startsWith(kind) ? this.faults.shift() : undefined;
  }

  private end(txn: Txn, state: 'committed' | 'aborted'): void {
    if (txn.state !== 'open') return;
    txn.state = state;
    for (const p of txn.partitions) this.logs[p]!.push({ marker: state === 'committed' ? 'commit' : 'abort' });
  }

  session = (): ProduceSession => {
    this.sessions += 1;
    const id = this.sessions;
    let txn: Txn | undefined;
    let committing = false;
    return {
      connect: () => {
        if (this.connectFailures-- > 0) return Promise.reject(new Error('ECONNREFUSED'));
        // InitProducerId: a predecessor's open transaction is aborted unless its commit arrived.
        return Promise.resolve(this.partitions);
      },
      send: async (messages) => {
        this.inFlight += 1;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        try {
          this.requests.push(messages);
          txn = { state: 'open', partitions: new Set() };
          committing = false;
          await this.gate;
          const fault = this.fault('send');
          if (fault === 'send-refused') throw new Error('NOT_ENOUGH_REPLICAS');
          const base = new Map<number, number>();
          for (const m of messages) {
            if (!base.has(m.partition)) base.set(m.partition, this.logs[m.partition]!.length);
            txn.partitions.add(m.partition);
            this.logs[m.partition]!.push({ at: JSON.parse(m.value.toString('utf8')).at, txn });
          }
          if (fault === 'send-lost') throw new Error('Request Produce timed out');
          return [...base].map(([partition, baseOffset]) => ({ partition, baseOffset }));
        } finally {
          this.inFlight -= 1;
        }
      },
      commit: async () => {
        this.commits.push(id);
        committing = true;
        await this.commitGate;
        const t = txn!;
        const fault = this.fault('commit');
        if (fault === 'commit-dropped') throw new Error('Connection closed');
        if (fault === 'commit-refused') {
          this.end(t, 'aborted');
          throw new TransactionAbortedError('INVALID_TXN_STATE');
        }
        if (fault === 'commit-fenced') throw new TransactionFencedError('INVALID_PRODUCER_EPOCH');
        if (t.state === 'aborted') throw new TransactionAbortedError('INVALID_TXN_STATE');
        this.end(t, 'committed');
        if (fault === 'commit-lost') throw new Error('Request EndTxn timed out');
      },
      abort: () => {
        if (txn && !committing) this.end(txn, 'aborted');
        return Promise.resolve();
      },
      disconnect: () => Promise.resolve(),
    };
  };
}

const seqsOf = (request: Sent): number[] => request.map((m) => JSON.parse(m.value.toString('utf8')).at);

/** What a promise settled with so far: 'ok', its error, or undefined while pending (for tests on fake timers). */
function outcomeOf(promise: Promise<unknown>): { settled: 'ok' | DomainError | undefined } {
  const seen: { settled: 'ok' | DomainError | undefined } = { settled: undefined };
  promise.then(
    () => (seen.settled = 'ok'),
    (e: DomainError) => (seen.settled = e),
  );
  return seen;
}

afterEach(() => {
  jest.useRealTimers();
});

describe('KafkaEventAppender', () => {
  it('sends concurrent appends together in one request after the linger, in call order', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 20, session: broker.session });
    const positions = await Promise.all(Array.from({ length: 50 }, (_, i) => appender.appendAt([event(i)])));
    expect(broker.requests).toHaveLength(1);
    expect(seqsOf(broker.requests[0]!)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(positions.map((p) => p[0]!.offset)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(appender.stats()).toEqual({ requests: 1, appends: 50, messages: 50, commitRetries: 0 });
    await appender.close();
  });

  it('keeps one request in flight; appends made meanwhile go out together right after it', async () => {
    jest.useFakeTimers();
    const broker = new FakeBroker(1);
    let release!: () => void;
    broker.gate = new Promise((resolve) => (release = resolve));
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, session: broker.session });
    const first = appender.append([event(0)]);
    while (broker.requests.length === 0) await jest.advanceTimersByTimeAsync(1);
    const later = Array.from({ length: 30 }, (_, i) => appender.append([event(i + 1)]));
    await jest.advanceTimersByTimeAsync(30); // far past the linger: still held behind the first
    expect(broker.requests).toHaveLength(1);
    release();
    const all = Promise.all([first, ...later]);
    await jest.advanceTimersByTimeAsync(10);
    await all;
    expect(broker.requests.map(seqsOf)).toEqual([[0], Array.from({ length: 30 }, (_, i) => i + 1)]);
    expect(broker.maxInFlight).toBe(1);
    await appender.close();
  });

  it('sends an append made the moment the one before it resolves (no lost wake-up between requests)', async () => {
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, appendTimeoutMs: 2000, session: broker.session });
    for (let i = 0; i < 20; i++) await appender.append([event(i)]);
    for (let i = 20; i < 40; i++) await appender.appendAt([event(i)]);
    expect(broker.committed()).toEqual(Array.from({ length: 40 }, (_, i) => i));
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
      expect(broker.logs[p.partition]![p.offset]).toMatchObject({ at: JSON.parse(broker.requests[0]![i]!.value.toString('utf8')).at });
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
    broker.faults.push('send-refused');
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
    expect(broker.committed()).toEqual([5]);
    await appender.close();
  });

  it('rejects as unavailable when the producer cannot connect, and tries again for the next append', async () => {
    const broker = new FakeBroker(1);
    broker.connectFailures = 1;
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, session: broker.session });
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('ECONNREFUSED') });
    await appender.append([event(1)]);
    expect(broker.committed()).toEqual([1]);
    await appender.close();
  });

  it('tells an append whose deadline comes before its commit was sent unavailable, and never commits its transaction', async () => {
    const broker = new FakeBroker(1);
    let release!: () => void;
    broker.gate = new Promise((resolve) => (release = resolve));
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, appendTimeoutMs: 100, session: broker.session });
    const inFlight = appender.append([event(0)]);
    while (broker.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const queued = appender.append([event(1)]);
    await expect(inFlight).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('within 100 ms') });
    await expect(queued).rejects.toMatchObject({ code: 'unavailable' });
    release(); // the broker now stores the batch and acknowledges it: too late, the transaction is aborted
    await appender.close();
    expect(broker.requests.map(seqsOf)).toEqual([[0]]); // the queued one was never sent
    expect(broker.commits).toEqual([]);
    expect(broker.logs[0]).toMatchObject([{ at: 0 }, { marker: 'abort' }]);
    expect(broker.committed()).toEqual([]);
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
    expect(broker.committed()).toEqual([0, 1, 2]);
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

describe('KafkaEventAppender: exact outcomes under faults (fault-injecting session)', () => {
  const appenderFor = (broker: FakeBroker, appendTimeoutMs = 2000): KafkaEventAppender =>
    new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', lingerMs: 1, appendTimeoutMs, commitRetryMs: 5, session: broker.session });

  it('a send that fails after the broker stored the batch: unavailable, and the batch is aborted, never read', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('send-lost');
    const appender = appenderFor(broker);
    const outcomes = await Promise.allSettled([appender.append([event(0)]), appender.append([event(1)])]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as DomainError).code : 'ok'))).toEqual(['unavailable', 'unavailable']);
    await appender.append([event(2)]);
    await appender.close();
    expect(broker.commits).toEqual([2]); // only the next batch's transaction, on a new producer
    expect(broker.committed()).toEqual([2]);
    expect(broker.open()).toBe(false);
  });

  it('a commit applied whose answer was lost: retried, confirmed, acknowledged once', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('commit-lost', 'commit-lost');
    const appender = appenderFor(broker);
    const positions = await Promise.all([appender.appendAt([event(0)]), appender.appendAt([event(1)])]);
    expect(positions.map((p) => p[0]!.offset)).toEqual([0, 1]);
    expect(broker.commits).toEqual([1, 1, 1]);
    expect(appender.stats()).toMatchObject({ appends: 2, commitRetries: 2 });
    await appender.close();
    expect(broker.committed()).toEqual([0, 1]);
  });

  it('a commit that never arrived: the retry commits it, acknowledged', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('commit-dropped');
    const appender = appenderFor(broker);
    await appender.append([event(0)]);
    await appender.close();
    expect(broker.commits).toHaveLength(2);
    expect(broker.committed()).toEqual([0]);
  });

  it('a commit the coordinator refuses (the transaction was aborted): unavailable, nothing read', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('commit-dropped', 'commit-refused');
    const appender = appenderFor(broker);
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('aborted') });
    await appender.append([event(1)]);
    await appender.close();
    expect(broker.committed()).toEqual([1]);
  });

  it('fenced at the first commit attempt: it cannot have committed, unavailable', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('commit-fenced');
    const appender = appenderFor(broker);
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'unavailable' });
    await appender.close();
    expect(broker.committed()).toEqual([]);
  });

  it('fenced after an unanswered attempt: the outcome cannot be told, outcome_unknown (never unavailable)', async () => {
    const broker = new FakeBroker(1);
    broker.faults.push('commit-lost', 'commit-fenced');
    const appender = appenderFor(broker);
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'outcome_unknown' });
    await appender.append([event(1)]);
    await appender.close();
    expect(broker.sessions).toBe(2); // the fenced producer is replaced
    expect(broker.committed()).toEqual([0, 1]); // the first was committed after all: unknown was the honest answer
  });

  it('a commit unanswered until the deadline: outcome_unknown, and the retries stop', async () => {
    jest.useFakeTimers();
    const broker = new FakeBroker(1);
    broker.faults.push(...Array<Fault>(1000).fill('commit-dropped'));
    const appender = appenderFor(broker, 150);
    const first = outcomeOf(appender.append([event(0)]));
    await jest.advanceTimersByTimeAsync(150);
    expect(first.settled).toMatchObject({ code: 'outcome_unknown', message: expect.stringContaining('within 150 ms') });
    const attempts = broker.commits.length;
    expect(attempts).toBeGreaterThan(1);
    await jest.advanceTimersByTimeAsync(1100); // longer than the longest retry wait
    expect(broker.commits.length - attempts).toBeLessThanOrEqual(1);
    broker.faults.length = 0;
    const second = outcomeOf(appender.append([event(1)])); // on a new producer
    await jest.advanceTimersByTimeAsync(100);
    expect(second.settled).toBe('ok');
    await appender.close();
    expect(broker.sessions).toBe(2);
    expect(broker.committed()).toEqual([1]);
  });

  it('appends whose deadline passes while the commit is retried are told outcome_unknown; the rest learn the outcome', async () => {
    const broker = new FakeBroker(1);
    let release!: () => void;
    broker.commitGate = new Promise((resolve) => (release = resolve));
    const appender = appenderFor(broker, 100);
    const first = appender.append([event(0)]);
    await expect(first).rejects.toMatchObject({ code: 'outcome_unknown' });
    release();
    await appender.close();
    expect(broker.committed()).toEqual([0]); // committed after all: unknown, never unavailable
  });

  it('under random faults every acknowledged append is read exactly once and every unavailable one never', async () => {
    const broker = new FakeBroker(3);
    const kinds: Fault[] = ['send-refused', 'send-lost', 'commit-lost', 'commit-dropped', 'commit-refused', 'commit-fenced'];
    let x = 12345;
    const random = (): number => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    const appender = appenderFor(broker);
    const acknowledged = new Set<number>();
    const refused = new Set<number>();
    const unknown = new Set<number>();
    for (let round = 0; round < 40; round++) {
      if (random() < 0.5) broker.faults.push(kinds[Math.floor(random() * kinds.length)]!);
      await Promise.all(
        Array.from({ length: 5 }, (_, i) => round * 10 + i).map((seq) =>
          appender.append([event(seq, `ds-${seq % 4}`)]).then(
            () => acknowledged.add(seq),
            (err: DomainError) => (err.code === 'unavailable' ? refused : unknown).add(seq),
          ),
        ),
      );
    }
    await appender.close();
    const read = [0, 1, 2].flatMap((p) => broker.committed(p));
    expect(new Set(read).size).toBe(read.length);
    for (const seq of acknowledged) expect(read).toContain(seq);
    for (const seq of refused) expect(read).not.toContain(seq);
    expect(refused.size).toBeGreaterThan(0);
    expect(acknowledged.size).toBeGreaterThan(100);
  });
});

describe('KafkaEventAppender: metrics', () => {
  it('counts each append by its outcome and times transactions by theirs', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const broker = new FakeBroker(1);
    const appender = new KafkaEventAppender({
      connection: { brokers: [] },
      topic: 't',
      lingerMs: 1,
      commitRetryMs: 5,
      session: broker.session,
      metrics: kafkaAppenderMetrics(registry),
    });
    await Promise.all([appender.append([event(0)]), appender.append([event(1)])]);
    broker.faults.push('send-refused');
    await expect(appender.append([event(2)])).rejects.toMatchObject({ code: 'unavailable' });
    broker.faults.push('commit-lost', 'commit-fenced');
    await expect(appender.append([event(3)])).rejects.toMatchObject({ code: 'outcome_unknown' });
    await appender.close();
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'committed' })).toBe(2);
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'unavailable' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'outcome_unknown' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_append_duration_seconds_count', { outcome: 'committed' })).toBe(2);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'committed' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'aborted' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'unknown' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_appends_sum')).toBe(4);
  });
});

/**
 * An idempotent broker of one partition in memory, as Kafka dedupes a producer's batches: a batch of a
 * producer id it already stored (the same sequence numbers, here the same events) is answered with its
 * first offset instead of being stored again. `faults` is a queue of what the next sends do instead:
 *   not-sent   NotSentError, nothing stored (no request went out)
 *   lost       stored, the answer lost          dropped   not stored, no answer (connection cut before)
 * `down` makes every send fail unanswered (nothing stored) while it is set; `cut` does so for one producer.
 */
type IdempotentFault = 'not-sent' | 'lost' | 'dropped';

class FakeIdempotentBroker {
  readonly log: { at: number; producer: number }[] = [];
  readonly requests: { producer: number; seqs: number[]; again: boolean }[] = [];
  readonly faults: IdempotentFault[] = [];
  readonly commits: number[] = [];
  sessions = 0;
  down = false;
  readonly cut = new Set<number>();
  gate: Promise<void> | undefined;
  connectGate: Promise<void> | undefined;

  stored(): number[] {
    return this.log.map((e) => e.at);
  }

  session = (): ProduceSession => {
    this.sessions += 1;
    const producer = this.sessions;
    const batches = new Map<string, number>(); // this producer's stored batches: seqs → first offset
    return {
      connect: async () => {
        await this.connectGate;
        return 1;
      },
      send: async (messages, again = false) => {
        const seqs = seqsOf(messages);
        this.requests.push({ producer, seqs, again });
        await this.gate;
        const fault = this.faults.shift();
        if (fault === 'not-sent') throw new NotSentError('connect ECONNREFUSED');
        if (this.down || this.cut.has(producer) || fault === 'dropped') throw new Error('Connection closed');
        const key = seqs.join(',');
        let base = batches.get(key);
        if (base === undefined) {
          base = this.log.length;
          batches.set(key, base);
          for (const at of seqs) this.log.push({ at, producer });
        }
        if (fault === 'lost') throw new Error('Request Produce timed out');
        return [{ partition: 0, baseOffset: base }];
      },
      commit: () => {
        this.commits.push(producer);
        return Promise.resolve();
      },
      abort: () => Promise.resolve(),
      disconnect: () => Promise.resolve(),
    };
  };
}

describe('KafkaEventAppender, idempotent mode: one produce per batch, lost answers confirmed', () => {
  const appenderFor = (broker: FakeIdempotentBroker, appendTimeoutMs = 2000, metrics?: ReturnType<typeof kafkaAppenderMetrics>): KafkaEventAppender =>
    new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', mode: 'idempotent', lingerMs: 1, appendTimeoutMs, commitRetryMs: 5, session: broker.session, ...(metrics ? { metrics } : {}) });

  it('acknowledges a batch once its produce is answered, with its positions: one request, no commit', async () => {
    const broker = new FakeIdempotentBroker();
    const appender = new KafkaEventAppender({ connection: { brokers: [] }, topic: 't', mode: 'idempotent', lingerMs: 20, session: broker.session });
    const positions = await Promise.all(Array.from({ length: 10 }, (_, i) => appender.appendAt([event(i)])));
    expect(positions.map((p) => p[0]!.offset)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(broker.requests).toEqual([{ producer: 1, seqs: Array.from({ length: 10 }, (_, i) => i), again: false }]);
    expect(broker.commits).toEqual([]);
    expect(appender.stats()).toEqual({ requests: 1, appends: 10, messages: 10, commitRetries: 0 });
    await appender.close();
  });

  it('a send that never went out: unavailable, nothing stored, and the next batch goes out on a new producer', async () => {
    const broker = new FakeIdempotentBroker();
    broker.faults.push('not-sent');
    const appender = appenderFor(broker);
    await expect(appender.append([event(0)])).rejects.toMatchObject({ code: 'unavailable' });
    await appender.append([event(1)]);
    await appender.close();
    expect(broker.stored()).toEqual([1]);
    expect(broker.requests.map((r) => r.producer)).toEqual([1, 2]);
  });

  it('a produce stored but unanswered: sent again, stored once, acknowledged at its first position', async () => {
    const broker = new FakeIdempotentBroker();
    broker.faults.push('lost', 'dropped');
    const appender = appenderFor(broker);
    const [position] = await appender.appendAt([event(7)]);
    await appender.close();
    expect(position).toEqual({ partition: 0, offset: 0 });
    expect(broker.stored()).toEqual([7]);
    // The first attempt and two confirmations (the same batch again), all on the first producer.
    expect(broker.requests).toEqual([false, true, true].map((again) => ({ producer: 1, seqs: [7], again })));
    expect(appender.stats()).toMatchObject({ requests: 1, appends: 1, commitRetries: 2 });
  });

  it('an append whose deadline comes while the producer connects is unavailable and never sent', async () => {
    const broker = new FakeIdempotentBroker();
    let connected!: () => void;
    broker.connectGate = new Promise((resolve) => (connected = resolve));
    const appender = appenderFor(broker, 100);
    const write = appender.append([event(0)]).then(() => 'ok', (e: DomainError) => e.code);
    expect(await write).toBe('unavailable');
    connected();
    broker.connectGate = undefined;
    await appender.append([event(1)]);
    await appender.close();
    expect(broker.requests.map((r) => r.seqs)).toEqual([[1]]);
    expect(broker.stored()).toEqual([1]);
  });

  it('a confirmation attempt that could not be sent does not end the confirmation: a later one stores the batch', async () => {
    const broker = new FakeIdempotentBroker();
    broker.faults.push('dropped', 'not-sent', 'not-sent');
    const appender = appenderFor(broker);
    const [position] = await appender.appendAt([event(5)]);
    await appender.close();
    expect(position).toEqual({ partition: 0, offset: 0 });
    expect(broker.stored()).toEqual([5]);
    expect(broker.requests.map((r) => r.again)).toEqual([false, true, true, true]);
  });

  it('a produce cut before the broker stored it: the confirmation stores it, once', async () => {
    const broker = new FakeIdempotentBroker();
    broker.faults.push('dropped');
    const appender = appenderFor(broker);
    await appender.append([event(3)]);
    await appender.close();
    expect(broker.stored()).toEqual([3]);
  });

  it('writes made while a batch is being confirmed go out on a new producer without waiting for it', async () => {
    const broker = new FakeIdempotentBroker();
    broker.cut.add(1); // the first producer's produce and confirmations get no answer for now
    const appender = appenderFor(broker);
    const answered: number[] = [];
    const first = appender.append([event(0)]).then(() => answered.push(0));
    while (broker.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 1));
    await appender.append([event(1)]).then(() => answered.push(1));
    expect(answered).toEqual([1]);
    broker.cut.delete(1);
    await first;
    await appender.close();
    expect(answered).toEqual([1, 0]);
    // The later write is stored first: the two were concurrent (neither was answered before the other was sent).
    expect(broker.stored()).toEqual([1, 0]);
    expect(broker.requests.filter((r) => r.seqs[0] === 1).map((r) => r.producer)).toEqual([2]);
    expect(new Set(broker.requests.filter((r) => r.seqs[0] === 0).map((r) => r.producer))).toEqual(new Set([1]));
  });

  it('no answer before the deadline: outcome_unknown, and nothing is sent again after it', async () => {
    jest.useFakeTimers();
    const broker = new FakeIdempotentBroker();
    broker.down = true;
    const appender = appenderFor(broker, 150);
    const write = outcomeOf(appender.append([event(0)]));
    await jest.advanceTimersByTimeAsync(140);
    expect(write.settled).toBeUndefined();
    await jest.advanceTimersByTimeAsync(10);
    expect(write.settled).toMatchObject({ code: 'outcome_unknown' });
    const closed = appender.close();
    await jest.advanceTimersByTimeAsync(100);
    await closed;
    const sent = broker.requests.length;
    await jest.advanceTimersByTimeAsync(100);
    expect(broker.requests.length).toBe(sent);
    expect(broker.stored()).toEqual([]);
  });

  it('closing while a batch is being confirmed ends it as outcome_unknown at the next failed attempt, not at its deadline', async () => {
    jest.useFakeTimers();
    const broker = new FakeIdempotentBroker();
    broker.down = true;
    const appender = appenderFor(broker, 60_000);
    const write = outcomeOf(appender.append([event(0)]));
    while (broker.requests.length < 2) await jest.advanceTimersByTimeAsync(1);
    const closed = appender.close();
    await jest.advanceTimersByTimeAsync(100);
    await closed;
    expect(write.settled).toMatchObject({ code: 'outcome_unknown' });
  });

  it('counts a confirmed batch as committed and a refused one as aborted', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const broker = new FakeIdempotentBroker();
    const appender = appenderFor(broker, 2000, kafkaAppenderMetrics(registry));
    broker.faults.push('lost');
    await appender.append([event(0)]);
    broker.faults.push('not-sent');
    await expect(appender.append([event(1)])).rejects.toMatchObject({ code: 'unavailable' });
    await appender.close();
    const text = await registry.metrics();
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'committed' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_appends_total', { outcome: 'unavailable' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'committed' })).toBe(1);
    expect(sample(text, 'pushbase_kafka_transaction_duration_seconds_count', { outcome: 'aborted' })).toBe(1);
  });
});

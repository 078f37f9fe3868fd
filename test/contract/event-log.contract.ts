import type { EventLog } from '@pushbase/contracts';
import { DomainError, EVENT_SCHEMA_VERSION, streamKey, type DatasetEvent } from '@pushbase/domain';

/*
 * The behaviour every EventLog adapter promises (memory, file, Kafka). Run it from a *.contract.test.ts with a
 * factory that builds a fresh, unstarted log; `reopen`, when given, builds a new log over the same storage
 * (after the first one is closed) to check replay. Every append holds events of one dataset, as the port
 * requires; order is promised per dataset (the cases that append concurrently to one dataset check call
 * order exactly).
 */

export interface EventLogFixture {
  readonly log: EventLog;
  /** A new, unstarted log over the same storage; called after `log` is closed. */
  readonly reopen?: () => Promise<EventLog>;
  cleanup(): Promise<void>;
}

/** A small, distinct event; `seq` travels in `at` and in the record so batches can be told apart. */
export function contractEvent(seq: number, dataset = 'contract'): DatasetEvent {
  return {
    type: 'RecordsAppended',
    schema_version: EVENT_SCHEMA_VERSION,
    account: 'acct-1',
    dataset,
    incarnation: 'inc-1',
    at: seq,
    records: [{ seq, label: `row ${seq} ✓` }],
    delete_by: null,
  };
}

const seqs = (events: readonly DatasetEvent[]): number[] => events.map((e) => e.at);

/**
 * Events by dataset, in the order seen. The port orders one dataset's events (all a fold needs); a log
 * spread over partitions (Kafka) may interleave different datasets differently from the call order.
 */
function perDataset(events: readonly DatasetEvent[]): Record<string, DatasetEvent[]> {
  const out: Record<string, DatasetEvent[]> = {};
  for (const e of events) (out[streamKey(e.account, e.dataset)] ??= []).push(e);
  return out;
}

/** The appends of several events that a listener saw split over more than one call (by their first `at`). */
function splitAppends(seen: readonly (readonly DatasetEvent[])[], written: readonly (readonly DatasetEvent[])[]): number[] {
  const callOf = new Map<DatasetEvent, number>();
  seen.forEach((batch, call) => batch.forEach((e) => callOf.set(e, call)));
  const find = (e: DatasetEvent): number | undefined => [...callOf].find(([s]) => s.dataset === e.dataset && s.at === e.at)?.[1];
  return written.filter((batch) => batch.length > 1 && new Set(batch.map(find)).size !== 1).map((batch) => batch[0]!.at);
}
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

export function describeEventLogContract(name: string, make: () => Promise<EventLogFixture>): void {
  describe(`EventLog contract: ${name}`, () => {
    let fixture: EventLogFixture;
    const opened: EventLog[] = [];

    beforeEach(async () => {
      fixture = await make();
      opened.length = 0;
      opened.push(fixture.log);
    });
    afterEach(async () => {
      for (const log of opened) await log.close();
      await fixture.cleanup();
    });

    /** Starts `log`, collecting every batch the listener sees. */
    async function started(log: EventLog): Promise<(readonly DatasetEvent[])[]> {
      const batches: (readonly DatasetEvent[])[] = [];
      await log.start((events) => batches.push(events));
      return batches;
    }

    it('delivers nothing at start when empty, then each appended batch once, whole, in call order', async () => {
      const batches = await started(fixture.log);
      expect(batches).toEqual([]);
      await fixture.log.append([contractEvent(0)]);
      await fixture.log.append([contractEvent(1), contractEvent(2), contractEvent(3)]);
      expect(batches.map(seqs)).toEqual([[0], [1, 2, 3]]);
    });

    it('preserves call order across concurrent appends', async () => {
      const batches = await started(fixture.log);
      const calls = range(0, 60).map((i) =>
        fixture.log.append(i % 3 === 0 ? [contractEvent(2 * i), contractEvent(2 * i + 1)] : [contractEvent(2 * i)]),
      );
      await Promise.all(calls);
      const expected = range(0, 60).flatMap((i) => (i % 3 === 0 ? [2 * i, 2 * i + 1] : [2 * i]));
      expect(batches.flatMap(seqs)).toEqual(expected);
    });

    it('lets the listener see each batch exactly once, before its append resolves', async () => {
      const seen = new Map<number, number>();
      let batchesSeen = 0;
      await fixture.log.start((events) => {
        batchesSeen += 1;
        for (const seq of seqs(events)) seen.set(seq, (seen.get(seq) ?? 0) + 1);
      });
      const early: number[] = [];
      await Promise.all(
        range(0, 40).map((i) =>
          fixture.log.append([contractEvent(i)]).then(() => {
            if (seen.get(i) !== 1) early.push(i);
          }),
        ),
      );
      expect(early).toEqual([]);
      expect(batchesSeen).toBe(40);
      expect([...seen.entries()].sort((a, b) => a[0] - b[0])).toEqual(range(0, 40).map((i) => [i, 1]));
    });

    it('resolves many concurrent appends, all of them', async () => {
      const batches = await started(fixture.log);
      const results = await Promise.allSettled(range(0, 500).map((i) => fixture.log.append([contractEvent(i)])));
      expect(results.filter((r) => r.status !== 'fulfilled')).toEqual([]);
      expect(batches.flatMap(seqs)).toEqual(range(0, 500));
    });

    it('finishes appends issued before close, and rejects later ones as unavailable', async () => {
      const batches = await started(fixture.log);
      const before = range(0, 20).map((i) => fixture.log.append([contractEvent(i)]));
      const closed = fixture.log.close();
      await expect(Promise.all(before)).resolves.toBeDefined();
      await closed;
      expect(batches.flatMap(seqs)).toEqual(range(0, 20));

      const after = fixture.log.append([contractEvent(99)]);
      await expect(after).rejects.toBeInstanceOf(DomainError);
      await expect(after).rejects.toMatchObject({ code: 'unavailable' });
      expect(batches.flatMap(seqs)).toEqual(range(0, 20));
    });

    it('replays every stored event, in order per dataset and each append in one call, after a reopen, and keeps appending after them', async () => {
      const reopen = fixture.reopen;
      if (!reopen) return; // this adapter has no storage to reopen over
      await started(fixture.log);
      const written: DatasetEvent[][] = [];
      const append = (events: DatasetEvent[]): Promise<void> => {
        written.push(events);
        return fixture.log.append(events);
      };
      await append([contractEvent(0)]);
      // Several datasets (spread over partitions where the log has them), some appends of two events.
      await Promise.all(
        range(1, 30).map((i) => {
          const dataset = `d${i % 3}`;
          return append(i % 4 === 0 ? [contractEvent(i, dataset), contractEvent(i + 0.5, dataset)] : [contractEvent(i, dataset)]);
        }),
      );
      await append([contractEvent(100, 'last'), contractEvent(101, 'last')]);
      await fixture.log.close();

      const second = await reopen();
      opened.push(second);
      const replayed = await started(second);
      expect(perDataset(replayed.flat())).toEqual(perDataset(written.flat()));
      expect(replayed.flat()).toHaveLength(written.flat().length);
      expect(splitAppends(replayed, written)).toEqual([]);

      await second.append([contractEvent(200)]);
      await second.close();
      const third = await reopen();
      opened.push(third);
      expect(perDataset((await started(third)).flat())).toEqual(perDataset([...written.flat(), contractEvent(200)]));
    });
  });
}

import { LIMITS, recordsOf, type DatasetEvent } from '@pushbase/domain';
import { selectRows } from '../src/client';
import { quoteString } from '../src/sql';
import { CHURN_PLAIN, CHURN_TIMED, churnEvents, mergeFully, recreateEvents } from './churn';
import { emptyBatch, partitionStream, pureFold, testDatabase, writeBatch, type Batch, type TestDatabase } from './support';

/*
 * The bound on stored rows, on the int tests' ClickHouse (18.16): tens of thousands of records pushed
 * through one dataset's 5000-record window, without unique_by and with a datetime unique_by whose keys
 * keep changing, and a dataset replaced, deleted and re-created again and again. Once merged, each keeps at
 * most one row per record slot and its head: no more than the window and one, however long its history.
 * (current-engine.int.test.ts runs the same on a current ClickHouse.)
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const ACCOUNT = 'churn';
const BOUND = LIMITS.recordsPerDataset + 1;

interface Stored {
  readonly dataset: string;
  readonly rows: number;
  readonly slots: number;
  readonly most: number;
}

async function storedRows(): Promise<Stored[]> {
  const rows = await selectRows<{ dataset: string; rows: string; slots: string; most: string }>(
    db.conn,
    `SELECT dataset, toString(count()) AS rows, toString(uniqExact(row_slot)) AS slots, toString(max(row_slot)) AS most FROM ${db.store.tables.records} WHERE account = ${quoteString(ACCOUNT)} GROUP BY dataset ORDER BY dataset`,
    'counting stored rows',
  );
  return rows.map((r) => ({ dataset: r.dataset, rows: Number(r.rows), slots: Number(r.slots), most: Number(r.most) }));
}

it('keeps at most the window and the head per dataset after 30,000 records through it, and reads stay right', async () => {
  const events: DatasetEvent[] = [
    ...churnEvents(ACCOUNT, 'plain', CHURN_PLAIN, 60),
    ...churnEvents(ACCOUNT, 'timed', CHURN_TIMED, 60),
    ...recreateEvents(ACCOUNT, 'recreated', 12),
  ];
  // Several events to a write, as the projector batches them, the datasets' events interleaved.
  const byDataset = new Map<string, DatasetEvent[]>();
  for (const e of events) byDataset.set(e.dataset, [...(byDataset.get(e.dataset) ?? []), e]);
  const interleaved: DatasetEvent[] = [];
  for (let i = 0; interleaved.length < events.length; i++) for (const list of byDataset.values()) if (i < list.length) interleaved.push(list[i] as DatasetEvent);
  const next = partitionStream(0);
  let batch: Batch = emptyBatch();
  for (const [i, e] of interleaved.entries()) {
    next(batch, e);
    if (i % 6 === 5) {
      await writeBatch(db.store, batch);
      batch = emptyBatch();
    }
  }
  await writeBatch(db.store, batch);

  const fold = pureFold(JSON.parse(JSON.stringify(interleaved)) as DatasetEvent[]);
  for (const id of ['plain', 'timed', 'recreated']) {
    const want = fold.get(ACCOUNT)?.get(id);
    expect(want).toBeDefined();
    await expect(db.readModel.listRecords(ACCOUNT, id)).resolves.toEqual(recordsOf(want!));
  }
  expect(fold.get(ACCOUNT)?.get('plain')?.rows.size).toBe(LIMITS.recordsPerDataset);

  // Before merging, parts may hold older versions of a slot: bounded by the writes not merged yet.
  await mergeFully(db.conn, db.database, 'records');
  const stored = await storedRows();
  expect(stored.map((s) => s.dataset)).toEqual(['plain', 'recreated', 'timed']);
  for (const s of stored) {
    // Merged: one row per key, and no more keys than the window's slots and the head's.
    expect(s.rows).toBe(s.slots);
    expect(s.slots).toBeLessThanOrEqual(BOUND);
    expect(s.most).toBeLessThanOrEqual(LIMITS.recordsPerDataset);
  }
  // The full datasets fill every slot; the re-created one never held more than its 1500.
  expect(stored.find((s) => s.dataset === 'plain')?.slots).toBe(BOUND);
  expect(stored.find((s) => s.dataset === 'recreated')?.slots).toBe(1501);

  // Reads after the merge are the same, through the read API's statements too.
  for (const id of ['plain', 'timed', 'recreated']) {
    const records = recordsOf(fold.get(ACCOUNT)!.get(id)!);
    await expect(db.readModel.listRecords(ACCOUNT, id)).resolves.toEqual(records);
    const page = await db.readModel.queryRecords(ACCOUNT, id, { filters: [], sort: 'n', order: 'desc', limit: 10, offset: 0 });
    expect(page?.total).toBe(records.length);
    expect(page?.records).toEqual([...records].sort((a, b) => (b.n as number) - (a.n as number)).slice(0, 10));
  }
}, 600_000);

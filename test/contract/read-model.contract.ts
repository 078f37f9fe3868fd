import type { DatasetListing, EventListener, ReadModel, SchemaStore } from '@pushbase/contracts';
import { EVENT_SCHEMA_VERSION, parseDefinition, type DatasetEvent } from '@pushbase/domain';

/*
 * The behaviour of a projection (SchemaStore + ReadModel) fed with dataset events: the embedded memory
 * projection now, the ClickHouse projector and Redis schema store later. `apply` hands events to the
 * adapter; `settle` waits until they are visible (a no-op for memory, a poll with a deadline elsewhere).
 */
export interface ProjectionFixture {
  readonly store: SchemaStore & ReadModel;
  readonly apply: EventListener;
  settle(): Promise<void>;
  cleanup(): Promise<void>;
}

const base = (account: string, dataset: string, incarnation: string, at: number) => ({
  schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION,
  account,
  dataset,
  incarnation,
  at,
});

const definition = parseDefinition({
  fields: { day: { type: 'date', name: 'Day' }, n: { type: 'number', name: 'N', optional: true } },
  unique_by: ['day'],
});
const plain = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });

const defined = (account: string, dataset: string, incarnation: string, def = definition): DatasetEvent => ({
  ...base(account, dataset, incarnation, 1),
  type: 'DatasetDefined',
  definition: def,
});
const appended = (account: string, dataset: string, incarnation: string, records: Record<string, unknown>[], delete_by: string | null = null): DatasetEvent => ({
  ...base(account, dataset, incarnation, 2),
  type: 'RecordsAppended',
  records: records as never,
  delete_by,
});

export function describeProjectionContract(name: string, make: () => Promise<ProjectionFixture>): void {
  describe(`projection contract: ${name}`, () => {
    let f: ProjectionFixture;
    beforeEach(async () => {
      f = await make();
    });
    afterEach(async () => {
      await f.cleanup();
    });

    it('knows a defined dataset and counts datasets per account', async () => {
      f.apply([defined('a', 'one', 'i1'), defined('a', 'two', 'i2'), defined('b', 'one', 'i3')]);
      await f.settle();
      await expect(f.store.count('a')).resolves.toBe(2);
      await expect(f.store.count('b')).resolves.toBe(1);
      await expect(f.store.count('nobody')).resolves.toBe(0);
      const one = await f.store.get('a', 'one');
      expect(one).toMatchObject({ account: 'a', id: 'one', incarnation: 'i1', definition });
      await expect(f.store.get('a', 'three')).resolves.toBeUndefined();
    });

    it('lists datasets with their record counts, per account only', async () => {
      f.apply([defined('a', 'x', 'i1'), appended('a', 'x', 'i1', [{ day: '2024-01-01', n: 1 }, { day: '2024-01-02', n: null }]), defined('b', 'y', 'i2', plain)]);
      await f.settle();
      const listing: DatasetListing[] = await f.store.listDatasets('a');
      // Created by the event at 1 ms, last written by the one at 2 ms.
      expect(listing).toEqual([{ id: 'x', fields: definition.fields, unique_by: ['day'], record_count: 2, created_at: '1970-01-01T00:00:00.001Z', updated_at: '1970-01-01T00:00:00.002Z' }]);
      await expect(f.store.listDatasets('b')).resolves.toEqual([
        { id: 'y', fields: plain.fields, unique_by: [], record_count: 0, created_at: '1970-01-01T00:00:00.001Z', updated_at: '1970-01-01T00:00:00.001Z' },
      ]);
    });

    it('returns records oldest insertion first, with unique_by merges moving to the newest', async () => {
      f.apply([
        defined('a', 'x', 'i1'),
        appended('a', 'x', 'i1', [{ day: '2024-01-01', n: 1 }, { day: '2024-01-02', n: 2 }]),
        appended('a', 'x', 'i1', [{ day: '2024-01-01', n: 10 }]),
      ]);
      await f.settle();
      await expect(f.store.listRecords('a', 'x')).resolves.toEqual([{ day: '2024-01-02', n: 2 }, { day: '2024-01-01', n: 10 }]);
      await expect(f.store.listRecords('a', 'missing')).resolves.toBeUndefined();
    });

    it('forgets a deleted dataset and ignores events of an old incarnation', async () => {
      f.apply([
        defined('a', 'x', 'i1'),
        appended('a', 'x', 'i1', [{ day: '2024-01-01', n: 1 }]),
        { ...base('a', 'x', 'i1', 3), type: 'DatasetDeleted' },
        defined('a', 'x', 'i2', plain),
        appended('a', 'x', 'i1', [{ day: '2024-01-05', n: 5 }]),
      ]);
      await f.settle();
      await expect(f.store.get('a', 'x')).resolves.toMatchObject({ incarnation: 'i2', definition: plain });
      await expect(f.store.listRecords('a', 'x')).resolves.toEqual([]);
    });

    it('shows the same state when events are delivered twice in a row (redelivery of a definition)', async () => {
      const d = defined('a', 'x', 'i1');
      f.apply([d, appended('a', 'x', 'i1', [{ day: '2024-01-01', n: 1 }]), d]);
      await f.settle();
      await expect(f.store.listRecords('a', 'x')).resolves.toEqual([{ day: '2024-01-01', n: 1 }]);
    });
  });
}

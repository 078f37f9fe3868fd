import type { SchemaStore } from '@pushbase/contracts';
import { EVENT_SCHEMA_VERSION, parseDefinition, type DatasetEvent, type DatasetSummary } from '@pushbase/domain';

/*
 * What every SchemaStore promises when fed the log's events in order: the embedded MemoryProjection and the
 * Redis store. `redeliverySafe` adapters (those fed by the projector and replay, which may see a suffix
 * of the log again) also promise that redelivering any suffix changes nothing; the embedded projection is
 * fed each event exactly once and makes no such promise, so those tests are not declared for it.
 */
export interface SchemaStoreFixture {
  readonly store: SchemaStore;
  apply(events: readonly DatasetEvent[]): Promise<void>;
  cleanup(): Promise<void>;
}

const dayDefinition = parseDefinition({
  fields: { day: { type: 'date', name: 'Day' }, n: { type: 'number', name: 'N', optional: true } },
  unique_by: ['day'],
});
const plainDefinition = parseDefinition({ fields: { n: { type: 'number', name: 'N' } } });

const base = (account: string, dataset: string, incarnation: string, at: number) => ({
  schema_version: EVENT_SCHEMA_VERSION as typeof EVENT_SCHEMA_VERSION,
  account,
  dataset,
  incarnation,
  at,
});
const defined = (account: string, dataset: string, incarnation: string, at: number, definition = dayDefinition): DatasetEvent => ({
  ...base(account, dataset, incarnation, at),
  type: 'DatasetDefined',
  definition,
});
const appended = (account: string, dataset: string, incarnation: string, at: number): DatasetEvent => ({
  ...base(account, dataset, incarnation, at),
  type: 'RecordsAppended',
  records: [{ n: at }],
  delete_by: null,
});
const replaced = (account: string, dataset: string, incarnation: string, at: number): DatasetEvent => ({
  ...base(account, dataset, incarnation, at),
  type: 'RecordsReplaced',
  records: [],
});
const deleted = (account: string, dataset: string, incarnation: string, at: number): DatasetEvent => ({
  ...base(account, dataset, incarnation, at),
  type: 'DatasetDeleted',
});

/** The summary fields only: the embedded projection answers with the whole dataset state, rows included. */
async function summary(store: SchemaStore, account: string, id: string): Promise<DatasetSummary | undefined> {
  const d = await store.get(account, id);
  if (d === undefined) return undefined;
  const { incarnation, definition, created_at, updated_at } = d;
  return { account: d.account, id: d.id, incarnation, definition, created_at, updated_at };
}

/** Everything the store answers about these datasets and accounts, to compare two stores or two moments. */
async function snapshot(store: SchemaStore, datasets: readonly (readonly [string, string])[]): Promise<unknown> {
  const accounts = [...new Set(datasets.map(([a]) => a))];
  return {
    datasets: await Promise.all(datasets.map(async ([a, id]) => [a, id, (await summary(store, a, id)) ?? null])),
    counts: await Promise.all(accounts.map(async (a) => [a, await store.count(a)])),
  };
}

/** A history with re-creation, writes of dead incarnations and deletes, over two accounts. */
const history: readonly DatasetEvent[] = [
  defined('acme', 'sales', 'i1', 100),
  appended('acme', 'sales', 'i1', 110),
  defined('acme', 'leads', 'i2', 120, plainDefinition),
  defined('globex', 'sales', 'i3', 130),
  replaced('acme', 'sales', 'i1', 140),
  deleted('acme', 'sales', 'i1', 150),
  appended('acme', 'sales', 'i1', 155),
  defined('acme', 'sales', 'i4', 160, plainDefinition),
  appended('acme', 'sales', 'i4', 170),
  deleted('acme', 'leads', 'i2', 180),
  appended('globex', 'sales', 'i3', 190),
  deleted('globex', 'sales', 'i3', 200),
  defined('globex', 'sales', 'i5', 210),
];
const historyDatasets = [['acme', 'sales'], ['acme', 'leads'], ['globex', 'sales'], ['initech', 'none']] as const;

export function describeSchemaStoreContract(name: string, options: { readonly redeliverySafe: boolean }, make: () => Promise<SchemaStoreFixture>): void {
  describe(`SchemaStore contract: ${name}`, () => {
    let f: SchemaStoreFixture;
    beforeEach(async () => {
      f = await make();
    });
    afterEach(async () => {
      await f.cleanup();
    });

    it('knows nothing before any event', async () => {
      await expect(summary(f.store, 'acme', 'sales')).resolves.toBeUndefined();
      await expect(f.store.count('acme')).resolves.toBe(0);
    });

    it('keeps a defined dataset whole and counts live datasets per account', async () => {
      await f.apply([defined('acme', 'sales', 'i1', 1000), defined('acme', 'leads', 'i2', 1001, plainDefinition), defined('globex', 'sales', 'i3', 1002)]);
      const expected: DatasetSummary = { account: 'acme', id: 'sales', incarnation: 'i1', definition: dayDefinition, created_at: 1000, updated_at: 1000 };
      await expect(summary(f.store, 'acme', 'sales')).resolves.toEqual(expected);
      await expect(summary(f.store, 'acme', 'leads')).resolves.toMatchObject({ incarnation: 'i2', definition: plainDefinition });
      await expect(summary(f.store, 'globex', 'sales')).resolves.toMatchObject({ account: 'globex', incarnation: 'i3' });
      await expect(summary(f.store, 'globex', 'leads')).resolves.toBeUndefined();
      await expect(f.store.count('acme')).resolves.toBe(2);
      await expect(f.store.count('globex')).resolves.toBe(1);
    });

    it('keeps accounts apart even when one name extends another with ":"', async () => {
      await f.apply([defined('acme', 'sales', 'i1', 1), defined('acme:eu', 'sales', 'i2', 2), defined('acme:eu', 'other', 'i3', 3)]);
      await expect(f.store.count('acme')).resolves.toBe(1);
      await expect(f.store.count('acme:eu')).resolves.toBe(2);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ incarnation: 'i1' });
      await expect(summary(f.store, 'acme:eu', 'sales')).resolves.toMatchObject({ incarnation: 'i2' });
    });

    it('moves updated_at with writes of the live incarnation only; created_at stays', async () => {
      await f.apply([defined('acme', 'sales', 'i1', 1000), appended('acme', 'sales', 'i1', 2000), replaced('acme', 'sales', 'i1', 3000)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ created_at: 1000, updated_at: 3000 });
      await f.apply([appended('acme', 'sales', 'other', 4000), appended('acme', 'unknown', 'i9', 5000)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ created_at: 1000, updated_at: 3000 });
      await expect(summary(f.store, 'acme', 'unknown')).resolves.toBeUndefined();
      await expect(f.store.count('acme')).resolves.toBe(1);
    });

    it('forgets a deleted dataset, ignores a deletion of another incarnation, and takes a re-creation', async () => {
      await f.apply([defined('acme', 'sales', 'i1', 1), defined('acme', 'leads', 'i2', 2)]);
      await f.apply([deleted('acme', 'sales', 'not-i1', 3)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ incarnation: 'i1' });
      await f.apply([deleted('acme', 'sales', 'i1', 4)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toBeUndefined();
      await expect(f.store.count('acme')).resolves.toBe(1);
      await f.apply([defined('acme', 'sales', 'i3', 5, plainDefinition), appended('acme', 'sales', 'i1', 6)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toEqual({ account: 'acme', id: 'sales', incarnation: 'i3', definition: plainDefinition, created_at: 5, updated_at: 5 });
      await expect(f.store.count('acme')).resolves.toBe(2);
    });

    it('takes a definition of the live incarnation again without change', async () => {
      await f.apply([defined('acme', 'sales', 'i1', 1), appended('acme', 'sales', 'i1', 2)]);
      await f.apply([defined('acme', 'sales', 'i1', 1)]);
      await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ incarnation: 'i1', created_at: 1, updated_at: 2 });
      await expect(f.store.count('acme')).resolves.toBe(1);
    });

    it('ends a mixed history in the state it describes', async () => {
      await f.apply(history.slice(0, 4));
      await f.apply(history.slice(4));
      await expect(summary(f.store, 'acme', 'sales')).resolves.toEqual({ account: 'acme', id: 'sales', incarnation: 'i4', definition: plainDefinition, created_at: 160, updated_at: 170 });
      await expect(summary(f.store, 'acme', 'leads')).resolves.toBeUndefined();
      await expect(summary(f.store, 'globex', 'sales')).resolves.toEqual({ account: 'globex', id: 'sales', incarnation: 'i5', definition: dayDefinition, created_at: 210, updated_at: 210 });
      await expect(f.store.count('acme')).resolves.toBe(1);
      await expect(f.store.count('globex')).resolves.toBe(1);
    });

    it('counts exactly under concurrent applies to one account', async () => {
      const ids = Array.from({ length: 40 }, (_, i) => `ds-${i}`);
      await Promise.all(ids.map((id, i) => f.apply([defined('acme', id, `inc-${i}`, i)])));
      await expect(f.store.count('acme')).resolves.toBe(40);
      await Promise.all(ids.filter((_, i) => i % 4 === 0).map((id, i) => f.apply([deleted('acme', id, `inc-${i * 4}`, 100)])));
      await expect(f.store.count('acme')).resolves.toBe(30);
    });

    if (options.redeliverySafe) {
      it('is unchanged by redelivering any suffix of the log, at every step of it', async () => {
        await f.apply(history);
        const once = await snapshot(f.store, historyDatasets);
        // Readers decide from the store while a suffix is redelivered, so no step may show an older state
        // (a deleted dataset back, a count off by one), not only the end.
        for (let from = history.length - 1; from >= 0; from--) {
          for (const event of history.slice(from)) {
            await f.apply([event]);
            expect(await snapshot(f.store, historyDatasets)).toEqual(once);
          }
        }
        await f.apply(history);
        expect(await snapshot(f.store, historyDatasets)).toEqual(once);
      });

      it('ignores a definition of a deleted or superseded incarnation arriving late', async () => {
        await f.apply([defined('acme', 'sales', 'i1', 1), deleted('acme', 'sales', 'i1', 2), defined('acme', 'sales', 'i2', 3, plainDefinition)]);
        await f.apply([defined('acme', 'sales', 'i1', 1)]);
        await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ incarnation: 'i2', definition: plainDefinition });
        // Superseded without a deletion in between (two definitions in a row): the older one stays dead too.
        await f.apply([defined('acme', 'leads', 'j1', 10), defined('acme', 'leads', 'j2', 11, plainDefinition), defined('acme', 'leads', 'j1', 10)]);
        await expect(summary(f.store, 'acme', 'leads')).resolves.toMatchObject({ incarnation: 'j2' });
        await expect(f.store.count('acme')).resolves.toBe(2);
      });

      it('never moves updated_at back when an older write is redelivered', async () => {
        await f.apply([defined('acme', 'sales', 'i1', 1), appended('acme', 'sales', 'i1', 5), appended('acme', 'sales', 'i1', 9)]);
        await f.apply([appended('acme', 'sales', 'i1', 5)]);
        await expect(summary(f.store, 'acme', 'sales')).resolves.toMatchObject({ updated_at: 9 });
      });
    }
  });
}

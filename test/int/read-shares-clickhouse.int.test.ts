/*
 * Heavy readers yield to light ones (services/clickhouse/src/read-shares.ts), on the real ClickHouse: it
 * takes the `priority` setting, and the read API answers exactly as without priorities when every account
 * is judged heavy after its first read. What the pausing is worth is measured by `npm run bench:noisy`
 * (docs/operations.md), not here: how long a paused query waits depends on the machine's load.
 */
import { initialState, type DatasetEvent, type State } from '@pushbase/domain';
import { ClickHouseProjection, ReadShares, type ClickHouseConnection } from '@pushbase/clickhouse';
import { emptyBatch, projectEvent, testDatabase, writeBatch } from '../../services/clickhouse/test/support';
import { describeReadApiContract } from '../contract/read-api.contract';

jest.setTimeout(180_000);

/** The connection with every query's `priority` setting written down. */
function recording(conn: ClickHouseConnection): { conn: ClickHouseConnection; priorities: (string | undefined)[] } {
  const priorities: (string | undefined)[] = [];
  const client = new Proxy(conn.client, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver) as unknown;
      return (params: Parameters<typeof target.query>[0]) => {
        priorities.push(params.clickhouse_settings?.priority);
        return target.query(params);
      };
    },
  });
  return { conn: { ...conn, client }, priorities };
}

let sent: (string | undefined)[] = [];
describeReadApiContract(
  'ClickHouseProjection with read priorities, every account heavy after its first read',
  async () => {
    const db = await testDatabase();
    const { conn, priorities } = recording(db.conn);
    sent = priorities;
    const readModel = new ClickHouseProjection(conn, db.database, { readShares: new ReadShares({ heavyMsPerSecond: 0.001 }) });
    let state: State = initialState();
    let offset = 0;
    return {
      readModel,
      load: async (events: readonly DatasetEvent[]) => {
        const batch = emptyBatch();
        for (const e of JSON.parse(JSON.stringify(events)) as DatasetEvent[]) state = projectEvent(state, e, { partition: 0, offset: offset++ }, batch);
        await writeBatch(db.store, batch);
      },
      cleanup: () => db.drop(),
    };
  },
  5,
);

it('sent the read API statements at priority 1, then 2, and everything else without one', () => {
  expect(sent).toContain('1');
  expect(sent).toContain('2');
  expect(sent).toContain(undefined); // the definition lookups before a query
  expect(new Set(sent)).toEqual(new Set(['1', '2', undefined]));
});

/*
 * Heavy readers yield to light ones (services/clickhouse/src/read-shares.ts), on the real ClickHouse:
 * it takes the `priority` setting and pauses a priority-2 query while a priority-1 one runs; and the read
 * API answers exactly as without priorities when every account is judged heavy after its first read.
 */
import { initialState, type DatasetEvent, type State } from '@pushbase/domain';
import { ClickHouseProjection, ReadShares, connectClickHouse, type ClickHouseConnection } from '@pushbase/clickhouse';
import { CLICKHOUSE_URL, emptyBatch, projectEvent, testDatabase, writeBatch } from '../../services/clickhouse/test/support';
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

describe('ClickHouse priorities', () => {
  const conn = connectClickHouse(CLICKHOUSE_URL);
  afterAll(() => conn.close());
  // CPU work of a size: rows of numbers hashed and counted.
  const work = (rows: number, priority: number) => async (): Promise<number> => {
    await conn.client.query({ query: `SELECT count() FROM numbers(${rows}) WHERE intHash64(number) % 7 = 1`, format: 'JSONEachRow', clickhouse_settings: { priority: String(priority) } }).then((rs) => rs.json());
    return performance.now();
  };

  it('pause a lower-priority query while a higher-priority one runs: a third of the work ends last', async () => {
    const longEnd = work(60_000_000, 1)();
    await new Promise((r) => setTimeout(r, 200));
    const shortEnd = await work(20_000_000, 2)();
    // Side by side at one priority the short one would end first (it does a third of the work).
    expect(shortEnd).toBeGreaterThan(await longEnd);
  });

  it('and do not pause queries of the same priority: the short one ends first', async () => {
    const longEnd = work(60_000_000, 1)();
    await new Promise((r) => setTimeout(r, 200));
    const shortEnd = await work(20_000_000, 1)();
    expect(shortEnd).toBeLessThan(await longEnd);
  });
});

import fc from 'fast-check';
import { bucketStartDay, daysFromCivil, type Bucket } from '@pushbase/domain';
import { connectClickHouse, selectRows } from '../src/client';
import { bucketDaySql, doubleLiteral } from '../src/read-sql';
import { CLICKHOUSE_URL } from './support';

/*
 * The read API's SQL arithmetic against a real ClickHouse (18.16 here): day / week / month buckets of epoch
 * milliseconds over the whole range a date or datetime may hold (years 0000–9999, where 18.16's Date type
 * does not reach), and doubles written into SQL through their bits, equal to the domain's answers.
 */

const DAY = 86_400_000;
const FIRST = daysFromCivil(0, 1, 1) * DAY;
const LAST = daysFromCivil(10000, 1, 1) * DAY - 1;

const conn = connectClickHouse(CLICKHOUSE_URL);
afterAll(() => conn.close());

it('buckets epoch milliseconds as the domain does, for every year 0000–9999', async () => {
  const edges = [FIRST, LAST, -1, 0, 1, DAY - 1, DAY, -DAY, -DAY - 1, daysFromCivil(2024, 2, 29) * DAY + 5, daysFromCivil(1969, 12, 29) * DAY - 1];
  await fc.assert(
    fc.asyncProperty(fc.array(fc.integer({ min: FIRST, max: LAST }), { minLength: 1, maxLength: 200 }), async (random) => {
      const values = [...edges, ...random];
      for (const bucket of ['day', 'week', 'month'] as Bucket[]) {
        // One query of many rows: the expression is built for the column `t` exactly as the store builds it.
        const rows = await selectRows<{ ms: string; b: string }>(
          conn,
          `SELECT toString(t) AS ms, toString(${bucketDaySql(bucket, 't')}) AS b FROM (SELECT arrayJoin([${values.map((v) => `toInt64(${v})`).join(', ')}]) AS t)`,
          'bucketing',
        );
        expect(rows.map((r) => [Number(r.ms), Number(r.b)])).toEqual(values.map((v) => [v, bucketStartDay(bucket, Math.floor(v / DAY))]));
      }
    }),
    { numRuns: 10 },
  );
});

it('writes doubles into SQL exactly, -0 and subnormals included', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(0, -0, 5e-324, 0.1, Number.MAX_VALUE)), { minLength: 1, maxLength: 50 }), async (values) => {
      const rows = await selectRows<{ bits: string }>(
        conn,
        `SELECT toString(reinterpretAsUInt64(reinterpretAsString(x))) AS bits FROM (SELECT arrayJoin([${values.map(doubleLiteral).join(', ')}]) AS x)`,
        'doubles',
      );
      const view = new DataView(new ArrayBuffer(8));
      expect(rows.map((r) => { view.setBigUint64(0, BigInt(r.bits)); return view.getFloat64(0); })).toEqual(values);
    }),
    { numRuns: 10 },
  );
});

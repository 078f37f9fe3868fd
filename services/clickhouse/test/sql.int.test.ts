import fc from 'fast-check';
import { selectRows, insertBody, command } from '../src/client';
import { quoteIdentifier, quoteString } from '../src/sql';
import { testDatabase, type TestDatabase } from './support';

/*
 * The escaping helper against the real parser (ClickHouse 18.16 here): a hostile value written as a
 * literal by quoteString comes back unchanged, and finds exactly the row whose INSERT body carried it.
 */
const HOSTILE = [
  "'; DROP DATABASE default; --",
  "\\'",
  "a\\\\'b",
  '\u0000',
  'nul\u0000in the middle',
  'line\nbreak\r\n',
  '\t\u000b\f\b\u0007',
  '\u007f\u0080\u009f',
  '`backquote` "double"',
  '😀𝄞\u{10ffff}',
  '\u2028\u2029\ufeff',
  "x'".repeat(50),
  '\\x41\\0\\n',
];

describe('quoteString against ClickHouse', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it.each(HOSTILE.map((s) => [JSON.stringify(s), s]))('SELECT of the literal of %s returns it byte for byte', async (_name, s) => {
    const rows = await selectRows<{ v: string; n: string }>(db.conn, `SELECT ${quoteString(s)} AS v, toString(length(${quoteString(s)})) AS n`, 'a literal');
    expect(rows).toEqual([{ v: s, n: String(Buffer.byteLength(s)) }]);
  });

  it('finds a hostile value inserted through an INSERT body by its literal, and only that row', async () => {
    const table = `${quoteIdentifier(db.database)}.${quoteIdentifier('hostile')}`;
    await command(db.conn, `CREATE TABLE ${table} (i UInt32, s String) ENGINE = MergeTree ORDER BY i`, 'a table');
    const values = [...HOSTILE, 'plain', "'", '\\'];
    await insertBody(db.conn, table, Buffer.from(values.map((s, i) => JSON.stringify({ i, s })).join('\n')), 'hostile rows');
    for (const [i, s] of values.entries()) {
      const rows = await selectRows<{ i: number; s: string }>(db.conn, `SELECT i, s FROM ${table} WHERE s = ${quoteString(s)}`, 'a lookup');
      expect(rows).toEqual([{ i, s }]);
    }
  });

  it('round-trips random well-formed strings up to 100 characters (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.string({ unit: 'binary', maxLength: 100 }), { minLength: 1, maxLength: 20 }), async (strings) => {
        const select = strings.map((s, i) => `${quoteString(s)} AS v${i}`).join(', ');
        const [row] = await selectRows<Record<string, string>>(db.conn, `SELECT ${select}`, 'literals');
        expect(strings.map((_, i) => row?.[`v${i}`])).toEqual(strings);
      }),
      { numRuns: 60 },
    );
  });
});

/*
 * selectCompact (client.ts) takes an answer as whole or not at all: an exception the server wrote into or
 * after the document is an error with the server's code (so the projector retries only what may pass
 * later), never a shorter list of rows.
 */
import { DomainError } from '@pushbase/domain';
import { selectCompact, type ClickHouseConnection } from '../src/client';

/** A connection whose every query answers `body`. */
const answering = (body: string): ClickHouseConnection =>
  ({ url: 'http://user:secret@127.0.0.1:1', client: { query: () => Promise.resolve({ text: () => Promise.resolve(body) }) }, close: () => Promise.resolve() }) as unknown as ClickHouseConnection;

const META = '"meta":[{"name":"a","type":"UInt32"},{"name":"b","type":"String"}]';

describe('selectCompact', () => {
  it('gives the column names and the rows as arrays', async () => {
    await expect(selectCompact(answering(`{${META},"data":[[1,"x"],[2,null]],"rows":2}`), 'SELECT', 'a read')).resolves.toEqual({
      columns: ['a', 'b'],
      rows: [
        [1, 'x'],
        [2, null],
      ],
    });
  });

  it('refuses an answer with an exception written into it, as retryable when its code says so', async () => {
    const broken = `{${META},"data":[[1,"x"]],"rows":1,"exception":"Code: 241, e.displayText() = DB::Exception: Memory limit exceeded"}`;
    const e = await selectCompact(answering(broken), 'SELECT', 'a read').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).code).toBe('unavailable');
    expect((e as Error).message).toContain('code 241');
  });

  it('refuses an answer with an exception after the document, by the last code in it, and names no credential', async () => {
    const broken = `{${META},"data":[[1,"Code: 241 in a value"],[2,"y"]\nCode: 62. DB::Exception: Syntax error (SYNTAX_ERROR)\n`;
    const e = await selectCompact(answering(broken), 'SELECT', 'a read').catch((x: unknown) => x);
    expect(e).not.toBeInstanceOf(DomainError);
    expect((e as Error).message).toContain('code 62');
    expect((e as Error).message).not.toContain('secret');
  });

  it('refuses an answer whose rows are fewer than it says', async () => {
    await expect(selectCompact(answering(`{${META},"data":[[1,"x"]],"rows":2}`), 'SELECT', 'a read')).rejects.toThrow('incomplete');
    await expect(selectCompact(answering(`{"data":[[1,"x"]],"rows":1}`), 'SELECT', 'a read')).rejects.toThrow('incomplete');
  });
});

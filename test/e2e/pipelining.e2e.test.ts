/*
 * HTTP/1.1 pipelining (docs/api.md → Basics, Pipelining): requests written back to back on one connection must take effect
 * in the order they were sent, as if the client had waited for each answer. HTTP lets a server work on
 * pipelined requests in parallel only when they are all safe; writes are not.
 */
import { pipeline } from '../helpers/pipeline';
import { TestServer } from '../helpers/server';
import { uid, UNLIMITED } from './support';

const DEFINITION = { fields: { n: { type: 'number', name: 'N' }, note: { type: 'string', name: 'Note', optional: true } } };
// A replace much bigger than the append behind it, so that deciding it takes longer.
const bigReplace = (round: number) => ({ data: Array.from({ length: 500 }, (_, i) => ({ n: round * 1000 + i, note: 'x'.repeat(90) })) });

describe.each([
  ['on the event loop', '0'],
  ['with write workers', '2'],
])('pipelined requests on one TLS connection, %s', (_label, workers) => {
  const s = new TestServer({ env: { ...UNLIMITED, PUSHBASE_WRITE_WORKERS: workers, PUSHBASE_RECORDS_WRITE_WORKERS: workers } });
  beforeAll(async () => {
    await s.start();
    const listening = s.output.map((l) => (l.includes('"msg":"listening"') ? JSON.parse(l) : undefined)).find((m) => m !== undefined);
    // Write workers are threads of the embedded server and, distributed, of the records service (whose
    // "listening" line is not the gateway's, which this reads).
    if (!s.distributed) expect(listening.write_workers).toBe(Number(workers));
  });
  afterAll(async () => {
    await s.stop();
  });

  it('answers a create and the append pipelined behind it 201, 200, and stores the append', async () => {
    const key = s.keys.acme!;
    for (let round = 0; round < 3; round++) {
      const id = uid('pipe-create');
      const responses = await pipeline(s, [
        { method: 'PUT', path: `/datasets/${id}`, key, body: DEFINITION },
        { method: 'POST', path: `/datasets/${id}/data`, key, body: { data: [{ n: 1 }] } },
        { method: 'POST', path: `/datasets/${id}/data`, key, body: { data: [{ n: 2, note: 'second' }] } },
      ]);
      expect(responses.map((r) => [r.status, r.body?.error?.message])).toEqual([
        [201, undefined],
        [200, undefined],
        [200, undefined],
      ]);
      expect(await s.records('acme', id)).toEqual([
        { n: 1, note: null },
        { n: 2, note: 'second' },
      ]);
    }
  });

  it('applies an append pipelined behind a bigger replace after it, so the append is kept', async () => {
    const key = s.keys.acme!;
    for (let round = 0; round < 4; round++) {
      const id = uid('pipe-replace');
      const created = await s.request('PUT', `/datasets/${id}`, { key, body: DEFINITION });
      expect(created.status).toBe(201);
      const responses = await pipeline(s, [
        { method: 'PUT', path: `/datasets/${id}/data`, key, body: bigReplace(round) },
        { method: 'POST', path: `/datasets/${id}/data`, key, body: { data: [{ n: -1, note: 'after the replace' }] } },
      ]);
      expect(responses.map((r) => r.status)).toEqual([200, 200]);
      const records = await s.records('acme', id);
      expect(records).toHaveLength(501);
      expect(records[0]).toEqual({ n: round * 1000, note: 'x'.repeat(90) });
      expect(records.at(-1)).toEqual({ n: -1, note: 'after the replace' });
    }
  });

  it('keeps a delete, a re-create with another definition and an append in order', async () => {
    const key = s.keys.acme!;
    const id = uid('pipe-delete');
    const other = { fields: { day: { type: 'date', name: 'Day' } } };
    const responses = await pipeline(s, [
      { method: 'PUT', path: `/datasets/${id}`, key, body: DEFINITION },
      { method: 'POST', path: `/datasets/${id}/data`, key, body: { data: [{ n: 1 }] } },
      { method: 'DELETE', path: `/datasets/${id}`, key },
      { method: 'PUT', path: `/datasets/${id}`, key, body: other },
      { method: 'POST', path: `/datasets/${id}/data`, key, body: { data: [{ day: '2024-02-29' }] } },
      { method: 'GET', path: '/', key },
    ]);
    expect(responses.map((r) => r.status)).toEqual([201, 200, 200, 201, 200, 200]);
    expect(await s.records('acme', id)).toEqual([{ day: '2024-02-29' }]);
  });
});

/*
 * Writes are parsed and validated in worker threads by default (PUSHBASE_WRITE_WORKERS); with 0 they are
 * decided on the event loop. Both must answer and store exactly the same. (Embedded mode only: the write
 * workers are threads of `pushbase serve`.)
 */
import { TestServer } from '../helpers/server';

const DEFINITION = {
  fields: { day: { type: 'date', name: 'Day' }, at: { type: 'datetime', name: 'At', optional: true }, n: { type: 'number', name: 'N' } },
  unique_by: ['day'],
};
const REQUESTS: [string, string, unknown][] = [
  ['PUT', '/datasets/w', DEFINITION],
  ['POST', '/datasets/w/data', { data: [{ day: '2024-01-01', n: 1, at: '2024-01-01T10:00:00+02:00' }, { day: '2024-01-02', n: 2 }, { day: '2024-01-01', n: 3 }] }],
  ['POST', '/datasets/w/data', { data: [{ day: '2024-01-03', n: 'x' }] }],
  ['POST', '/datasets/w/data', { data: [{ day: '2024-01-04', n: 4 }], deleteBy: ['day'] }],
  ['POST', '/datasets/missing/data', { data: [] }],
  ['PUT', '/datasets/w/data', { data: [{ day: '2024-01-05', n: 5 }, { day: '2024-01-06', n: 6 }] }],
  ['POST', '/datasets/w/data', { data: [{ day: '2024-01-07', n: 7 }], delete_by: 'n' }],
];

async function run(workers: string): Promise<unknown[]> {
  const s = await new TestServer({ env: { PUSHBASE_WRITE_WORKERS: workers } }).start();
  try {
    const listening = s.output.map((l) => (l.includes('"msg":"listening"') ? JSON.parse(l) : undefined)).find((m) => m !== undefined);
    expect(listening.write_workers).toBe(Number(workers));
    const out: unknown[] = [];
    for (const [method, path, body] of REQUESTS) {
      const res = await s.request(method, path, { key: s.keys.acme!, body });
      out.push([res.status, res.body?.error?.message ?? res.body?.id ?? res.body]);
    }
    out.push(await s.records('acme', 'w'));
    return out;
  } finally {
    await s.stop();
  }
}

it('answers and stores the same with write workers as on the event loop', async () => {
  const [onLoop, inWorkers] = [await run('0'), await run('2')];
  expect(inWorkers).toEqual(onLoop);
  expect(onLoop.at(-1)).toEqual([
    { day: '2024-01-05', n: 5, at: null },
    { day: '2024-01-06', n: 6, at: null },
  ]);
  expect(onLoop.slice(0, -1).map((r) => (r as [number])[0])).toEqual([201, 200, 400, 200, 404, 200, 400]);
});

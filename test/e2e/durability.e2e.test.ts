import { TestServer } from '../helpers/server';
import { ANY_BODY, appendAll, createDataset, expectError, expectOk, field, uid, UNLIMITED } from './support';

/*
 * Every acknowledged write survives kill -9 and SIGTERM; nothing of a refused request is ever stored
 * (docs/api.md → When a write shows, Retrying safely; docs/embedded-storage.md).
 */

const restart = (s: TestServer): Promise<TestServer> => new TestServer({ dataDir: s.dataDir, keys: s.keys, env: UNLIMITED }).start();

/** Everything the read side shows for the given accounts. */
async function snapshot(s: TestServer, accounts: readonly string[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const account of accounts) {
    const res = await s.admin(`/admin/accounts/${account}/datasets`);
    expect(res.status).toBe(200);
    out[account] = res.body.datasets;
    for (const d of res.body.datasets as { id: string }[]) out[`${account}/${d.id}`] = await s.records(account, d.id);
  }
  return out;
}

const servers: TestServer[] = [];
const track = (s: TestServer): TestServer => {
  servers.push(s);
  return s;
};
afterAll(async () => {
  for (const s of servers) await s.kill9();
});

describe('kill -9', () => {
  it('keeps every acknowledged write: definitions, appends, merges, replaces, clears, deletes and the window', async () => {
    const s = track(await new TestServer({ env: UNLIMITED }).start());
    const acme = s.keys.acme!;
    const globex = s.keys.globex!;

    const plain = uid('plain');
    await createDataset(s, acme, plain, { label: field('string', 'Label'), n: field('number', 'N', { optional: true }) });
    await appendAll(s, acme, plain, [{ label: 'a', n: 1 }, { label: 'b' }]);
    await appendAll(s, acme, plain, [{ label: 'c', n: 3 }]);

    const unique = uid('unique');
    const uniqueFields = { day: field('date', 'Day'), at: field('datetime', 'At'), n: field('number', 'N') };
    const created = (await createDataset(s, acme, unique, uniqueFields, ['day'])).body;
    await appendAll(s, acme, unique, [
      { day: '2024-01-01', at: '2024-01-01T10:00:00+02:00', n: 1 },
      { day: '2024-01-02', at: '2024-01-02T10:00:00Z', n: 2 },
    ]);
    await appendAll(s, acme, unique, [{ day: '2024-01-01', at: '2024-01-01T11:00:00.5Z', n: 10 }]);

    const replaced = uid('replaced');
    await createDataset(s, acme, replaced, { n: field('number', 'N') });
    await appendAll(s, acme, replaced, [{ n: 1 }, { n: 2 }]);
    expectOk(await s.request('PUT', `/datasets/${replaced}/data`, { key: acme, body: { data: [{ n: 3 }] } }));

    const cleared = uid('cleared');
    await createDataset(s, acme, cleared, { n: field('number', 'N') });
    await appendAll(s, acme, cleared, [{ n: 1 }]);
    expectOk(await s.request('PUT', `/datasets/${cleared}/data`, { key: acme, body: { data: [] } }));

    const deleted = uid('deleted');
    await createDataset(s, acme, deleted, { n: field('number', 'N') });
    await appendAll(s, acme, deleted, [{ n: 1 }]);
    expectOk(await s.request('DELETE', `/datasets/${deleted}`, { key: acme }));

    const reborn = uid('reborn');
    await createDataset(s, acme, reborn, { n: field('number', 'N') });
    await appendAll(s, acme, reborn, [{ n: 1 }, { n: 2 }]);
    expectOk(await s.request('DELETE', `/datasets/${reborn}`, { key: acme }));
    await createDataset(s, acme, reborn, { label: field('string', 'Label') }, ['label']);
    await appendAll(s, acme, reborn, [{ label: 'new' }]);

    const windowed = uid('window');
    await createDataset(s, acme, windowed, { i: field('number', 'I') });
    await appendAll(s, acme, windowed, Array.from({ length: 5003 }, (_, i) => ({ i })));

    // The same id in the other account, with its own contents.
    await createDataset(s, globex, plain, { n: field('number', 'N') });
    await appendAll(s, globex, plain, [{ n: 42 }]);

    const before = await snapshot(s, ['acme', 'globex']);
    expect(before[`acme/${plain}`]).toEqual([{ label: 'a', n: 1 }, { label: 'b', n: null }, { label: 'c', n: 3 }]);
    expect(before[`acme/${windowed}`]).toHaveLength(5000);
    expect(before[`acme/${deleted}`]).toBeUndefined();

    await s.kill9();
    const t = track(await restart(s));
    expect(await snapshot(t, ['acme', 'globex'])).toEqual(before);
    expect(await t.records('acme', unique)).toEqual([
      { day: '2024-01-02', at: '2024-01-02T10:00:00.000Z', n: 2 },
      { day: '2024-01-01', at: '2024-01-01T11:00:00.500Z', n: 10 },
    ]);
    expect(await t.records('acme', reborn)).toEqual([{ label: 'new' }]);
    expect((await t.records('acme', windowed))[0]).toEqual({ i: 3 });

    // The restarted server knows the schemas it replayed: found, not created; merges still merge.
    const found = await t.request('PUT', `/datasets/${unique}`, { key: acme, body: { fields: uniqueFields, unique_by: ['day'] } });
    expectOk(found, 200, ANY_BODY);
    // updated_at moves with writes; the rest is the definition as created.
    expect({ ...found.body, updated_at: undefined }).toEqual({ ...created, updated_at: undefined });
    expect(Date.parse(found.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at));
    await appendAll(t, acme, unique, [{ day: '2024-01-02', at: '2024-01-02T12:00:00Z', n: 20 }]);
    expect(await t.records('acme', unique)).toEqual([
      { day: '2024-01-01', at: '2024-01-01T11:00:00.500Z', n: 10 },
      { day: '2024-01-02', at: '2024-01-02T12:00:00.000Z', n: 20 },
    ]);
    expectError(await t.request('POST', `/datasets/${deleted}/data`, { key: acme, body: { data: [{ n: 2 }] } }), 404, 'Dataset not found');
    await appendAll(t, acme, windowed, [{ i: 5003 }]);

    // Writes after a replay survive the next crash too.
    const after = await snapshot(t, ['acme', 'globex']);
    await t.kill9();
    const u = track(await restart(t));
    expect(await snapshot(u, ['acme', 'globex'])).toEqual(after);
    expect((await u.records('acme', windowed)).slice(0, 1)).toEqual([{ i: 4 }]);
    await u.stop();
  });

  it('keeps every acknowledged append of a concurrent stream cut by kill -9, and nothing of a refused one', async () => {
    const s = track(await new TestServer({ env: UNLIMITED }).start());
    const key = s.keys.acme!;
    const id = uid('stream');
    await createDataset(s, key, id, { req: field('number', 'Request'), part: field('number', 'Part'), tag: field('string', 'Tag') });

    type Outcome = 'acked' | 'refused' | 'unknown';
    const outcomes = new Map<number, Outcome>();
    const PARTS = 5;
    let next = 0;
    let acked = 0;
    let killed: Promise<void> | undefined;

    // Every fourth request carries a bad last record: it must be refused whole.
    const bodyOf = (req: number) => ({
      data: Array.from({ length: PARTS }, (_, part) => ({ req, part, tag: req % 4 === 3 && part === PARTS - 1 ? 42 : `r${req}` })),
    });
    const worker = async (): Promise<void> => {
      while (killed === undefined) {
        const req = next++;
        try {
          const res = await s.request('POST', `/datasets/${id}/data`, { key, body: bodyOf(req) });
          outcomes.set(req, res.status === 200 ? 'acked' : 'refused');
          if (res.status === 200) acked++;
          else expect(res.status).toBe(400);
        } catch {
          outcomes.set(req, 'unknown');
        }
        if (acked >= 120 && killed === undefined) killed = s.kill9();
      }
    };
    await Promise.all(Array.from({ length: 12 }, () => worker()));
    await killed;

    const count = (o: Outcome): number => [...outcomes.values()].filter((v) => v === o).length;
    expect(count('acked')).toBeGreaterThanOrEqual(120);
    expect(count('refused')).toBeGreaterThan(0);
    // The crash did cut requests off mid-stream.
    expect(count('unknown')).toBeGreaterThan(0);
    // Refused requests are exactly the ones with a bad record.
    for (const [req, o] of outcomes) if (o === 'refused') expect(req % 4).toBe(3);

    const t = track(await restart(s));
    const rows = await t.records('acme', id);
    const byRequest = new Map<number, number[]>();
    for (const r of rows) byRequest.set(r.req, [...(byRequest.get(r.req) ?? []), r.part]);
    for (const [req, o] of outcomes) {
      const parts = byRequest.get(req);
      if (o === 'acked') expect({ req, parts }).toEqual({ req, parts: [0, 1, 2, 3, 4] });
      else if (o === 'refused') expect({ req, parts }).toEqual({ req, parts: undefined });
      // A request cut off by the crash is stored whole or not at all.
      else expect({ req, whole: parts === undefined || parts.length === PARTS }).toEqual({ req, whole: true });
    }
    for (const req of byRequest.keys()) expect(outcomes.has(req)).toBe(true);
    for (const r of rows) expect(r.tag).toBe(`r${r.req}`);
    await t.stop();
  });
});

describe('SIGTERM', () => {
  it('exits 0, finishing in-flight requests, and keeps the data', async () => {
    const s = track(await new TestServer({ env: UNLIMITED }).start());
    const key = s.keys.acme!;
    const id = uid('graceful');
    await createDataset(s, key, id, { n: field('number', 'N') });
    await appendAll(s, key, id, [{ n: 0 }]);

    // Appends racing the signal: those answered 200 must be kept; none may be cut off with a 5xx.
    const inFlight = Array.from({ length: 20 }, (_, i) =>
      s.request('POST', `/datasets/${id}/data`, { key, body: { data: [{ n: i + 1 }] } }).then(
        (res) => ({ n: i + 1, status: res.status }),
        () => ({ n: i + 1, status: 0 }),
      ),
    );
    await new Promise((r) => setTimeout(r, 30));
    const code = await s.stop();
    expect(code).toBe(0);
    const results = await Promise.all(inFlight);
    for (const r of results) expect([0, 200]).toContain(r.status);
    const acked = results.filter((r) => r.status === 200).map((r) => r.n);

    const t = track(await restart(s));
    const stored = (await t.records('acme', id)).map((r) => r.n as number);
    expect(stored[0]).toBe(0);
    for (const n of acked) expect(stored).toContain(n);
    expect(new Set(stored).size).toBe(stored.length);

    await appendAll(t, key, id, [{ n: 100 }]);
    const before = await t.records('acme', id);
    expect(await t.stop()).toBe(0);
    const u = track(await restart(t));
    expect(await u.records('acme', id)).toEqual(before);
    expect(await u.stop()).toBe(0);
  });
});

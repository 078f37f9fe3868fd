import { candidates, matches, outcomeOf, type DatasetView, type Operation, type Outcome, type Sent } from '../helpers/oracle';

/* The fault tests' oracle must fail a state that lost, doubled or wrongly applied a request. */

const definition = { fields: { day: { type: 'date', name: 'Day' }, n: { type: 'number', name: 'N' } } };
const fields = { day: { type: 'date', name: 'Day', optional: false }, n: { type: 'number', name: 'N', optional: false } } as const;
const rec = (n: number) => ({ day: '2024-01-01', n });
const sent = (op: Operation, status: number | undefined, outcome?: Outcome): Sent => {
  const answer = { status };
  return { op, answer, outcome: outcome ?? outcomeOf(answer) };
};
const define = (status = 201) => sent({ kind: 'define', body: definition }, status);
const append = (ns: number[], status: number | undefined) => sent({ kind: 'append', body: { data: ns.map(rec) } }, status);
const view = (...ns: number[]): DatasetView => ({ fields, unique_by: [], records: ns.map(rec) });

describe('fault oracle', () => {
  it('sorts answers: 2xx acknowledged, 4xx and 503 refused, 500 and no answer unknown', () => {
    expect([200, 201, 400, 404, 429, 503, 500, undefined].map((status) => outcomeOf({ status }))).toEqual([
      'acknowledged', 'acknowledged', 'refused', 'refused', 'refused', 'refused', 'unknown', 'unknown',
    ]);
  });

  it('expects the fold of the acknowledged requests, and nothing refused', () => {
    const c = candidates('a', 'd', [define(), append([1], 200), append([2], 503), append([3], 200), append([4], 400)]);
    expect(c.states).toEqual([view(1, 3)]);
    expect(matches(view(1, 3), c)).toBe(true);
    expect(matches(view(1), c)).toBe(false); // an acknowledged request lost
    expect(matches(view(1, 2, 3), c)).toBe(false); // a refused one applied
    expect(matches(view(1, 3, 3), c)).toBe(false); // one applied twice
    expect(matches(view(3, 1), c)).toBe(false); // out of order
  });

  it('accepts an unknown request applied once at its place, or not at all, but never twice', () => {
    const c = candidates('a', 'd', [define(), append([1], 200), append([2], undefined), append([3], 500)]);
    expect(c.unknowns).toBe(2);
    for (const v of [view(1), view(1, 2), view(1, 3), view(1, 2, 3)]) expect(matches(v, c)).toBe(true);
    expect(matches(view(1, 2, 2, 3), c)).toBe(false);
    expect(matches(view(1, 3, 2), c)).toBe(false);
  });

  it('drops histories the answers rule out: an unknown create followed by 201 cannot have been applied', () => {
    const c = candidates('a', 'd', [sent({ kind: 'define', body: definition }, undefined), define(201), append([1], 200)]);
    expect(c.states).toEqual([view(1)]);
    // An acknowledged append to a dataset that no history has: nothing fits.
    expect(candidates('a', 'd', [append([1], 200)]).states).toEqual([]);
  });

  it('holds a request retried with its Idempotency-Key to exactly once, where a retry without one may double it', () => {
    const retriedWithKey: Sent = { op: { kind: 'append', body: { data: [rec(2)] } }, answer: { status: 200 }, outcome: 'acknowledged', attempts: [{ status: 500, code: 'outcome_unknown' }, { status: undefined }, { status: 409 }, { status: 200 }] };
    const keyed = candidates('a', 'd', [define(), append([1], 200), retriedWithKey, append([3], 200)]);
    expect(keyed.states).toEqual([view(1, 2, 3)]);
    expect(matches(view(1, 2, 2, 3), keyed)).toBe(false); // applied by the first attempt and by the retry
    expect(matches(view(1, 3), keyed)).toBe(false); // by neither
    const unkeyed = candidates('a', 'd', [define(), append([1], 200), append([2], 500), append([2], 200), append([3], 200)]);
    expect(matches(view(1, 2, 2, 3), unkeyed)).toBe(true);
  });

  it('a delete and re-create leaves only the new incarnation', () => {
    const c = candidates('a', 'd', [define(), append([1], 200), sent({ kind: 'delete' }, 200), define(201), append([2], 200)]);
    expect(c.states).toEqual([view(2)]);
    expect(candidates('a', 'd', [define(), sent({ kind: 'delete' }, 200)]).states).toEqual([undefined]);
  });
});

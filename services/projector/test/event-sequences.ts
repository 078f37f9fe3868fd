import fc from 'fast-check';
import {
  EVENT_SCHEMA_VERSION,
  type DatasetDefinition,
  type DatasetEvent,
  type DatasetRecord,
  type FieldDefinition,
} from '@pushbase/domain';

/*
 * Random but valid streams of dataset events, as the record and schema services would write them: appends
 * with and without unique_by, every delete_by kind (date, datetime, null values), replace, clear, delete
 * and re-create with a new incarnation, plus events of stale incarnations (which must change nothing).
 * Bulk records come from a seed rather than from fast-check arrays, so streams can pass the 5000-record
 * window and still shrink quickly.
 */

const field = (type: FieldDefinition['type'], name: string, optional = false): FieldDefinition => ({ type, name, optional });

export const PLAIN: DatasetDefinition = {
  fields: { day: field('date', 'Day', true), at: field('datetime', 'At', true), n: field('number', 'N') },
  unique_by: [],
};
export const KEYED: DatasetDefinition = {
  fields: { team: field('string', 'Team'), day: field('date', 'Day', true), at: field('datetime', 'At', true), n: field('number', 'N') },
  unique_by: ['team'],
};

export type Step =
  | { readonly kind: 'define'; readonly ds: number; readonly keyed: boolean }
  /** `repeat` appends of `count` records each (seeds seed, seed + 1, …): a burst that can fill the window. */
  | { readonly kind: 'append'; readonly ds: number; readonly count: number; readonly seed: number; readonly deleteBy: 'day' | 'at' | null; readonly repeat: number }
  | { readonly kind: 'replace'; readonly ds: number; readonly count: number; readonly seed: number }
  | { readonly kind: 'delete'; readonly ds: number };

/**
 * A stream's steps: every dataset defined first (an undefined dataset only yields nothing), then enough
 * steps that big appends pass the 5000-record window now and then.
 */
export const stepsArb = (datasets: number, maxLength = 45): fc.Arbitrary<Step[]> =>
  fc
    .tuple(
      fc.array(fc.boolean(), { minLength: datasets, maxLength: datasets }),
      fc.array(stepArb(datasets), { minLength: 1, maxLength, size: 'max' }),
    )
    .map(([keyed, steps]) => [...keyed.map((k, ds): Step => ({ kind: 'define', ds, keyed: k })), ...steps]);

const repeatArb = fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 9, max: 12 }) });
const countArb = fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 6 }) }, { weight: 2, arbitrary: fc.integer({ min: 400, max: 500 }) });
export const stepArb = (datasets: number): fc.Arbitrary<Step> => {
  const ds = fc.integer({ min: 0, max: datasets - 1 });
  return fc.oneof(
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('define' as const), ds, keyed: fc.boolean() }) },
    { weight: 12, arbitrary: fc.record({ kind: fc.constant('append' as const), ds, count: countArb, seed: fc.nat(), deleteBy: fc.constantFrom<'day' | 'at' | null>(null, 'day', 'at'), repeat: repeatArb }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('replace' as const), ds, count: fc.oneof(fc.constant(0), countArb), seed: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), ds }) },
  );
};

/** A small deterministic generator (mulberry32), so a seed names a whole batch of records. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DAY_MS = 86_400_000;
const EPOCH_2024 = Date.UTC(2024, 0, 1);

/** Few distinct days and instants so delete_by groups form; some nulls; team keys that sometimes collide. */
export function makeRecords(keyed: boolean, count: number, seed: number): DatasetRecord[] {
  const next = random(seed);
  // Some batches draw teams from a small set (merges, in-request duplicates), some from a large one (windows).
  const teams = seed % 3 === 0 ? 12 : 20_000;
  const out: DatasetRecord[] = [];
  for (let i = 0; i < count; i++) {
    const day = next() < 0.1 ? null : new Date(EPOCH_2024 + Math.floor(next() * 8) * DAY_MS).toISOString().slice(0, 10);
    const at = next() < 0.1 ? null : new Date(EPOCH_2024 + Math.floor(next() * 6) * 1000).toISOString();
    const n = Math.floor(next() * 1_000_000) / 100;
    out.push(keyed ? { team: `t${Math.floor(next() * teams)}`, day, at, n } : { day, at, n });
  }
  return out;
}

export interface StreamOptions {
  readonly account: string;
  readonly datasets: readonly string[];
  /** Prefix of incarnation ids, so streams of different tests never share one. */
  readonly incarnationPrefix?: string;
}

/** Turns steps into the events a correct writer would log, tracking which incarnation is live. */
export function eventsOf(steps: readonly Step[], o: StreamOptions): DatasetEvent[] {
  const live = new Map<number, { incarnation: string; keyed: boolean }>();
  const last = new Map<number, { incarnation: string; keyed: boolean }>();
  const events: DatasetEvent[] = [];
  let at = 1_700_000_000_000;
  let created = 0;
  steps.forEach((step) => {
    at += 1000;
    const dataset = o.datasets[step.ds] as string;
    const base = { schema_version: EVENT_SCHEMA_VERSION, account: o.account, dataset, at } as const;
    const current = live.get(step.ds);
    // Against a missing dataset a writer would refuse; logging a stale-incarnation event instead checks
    // that the fold ignores it, as it must for events of a deleted dataset that arrive late.
    const target = current ?? last.get(step.ds);
    switch (step.kind) {
      case 'define': {
        if (current !== undefined) {
          events.push({ ...base, type: 'DatasetDefined', incarnation: current.incarnation, definition: current.keyed ? KEYED : PLAIN });
          return;
        }
        const incarnation = `${o.incarnationPrefix ?? 'inc'}-${created++}`;
        live.set(step.ds, { incarnation, keyed: step.keyed });
        last.set(step.ds, { incarnation, keyed: step.keyed });
        events.push({ ...base, type: 'DatasetDefined', incarnation, definition: step.keyed ? KEYED : PLAIN });
        return;
      }
      case 'append':
        if (target === undefined) return;
        for (let i = 0; i < step.repeat; i++) {
          const records = makeRecords(target.keyed, step.count, step.seed + i);
          events.push({ ...base, type: 'RecordsAppended', incarnation: target.incarnation, records, delete_by: step.deleteBy });
        }
        return;
      case 'replace':
        if (target === undefined) return;
        events.push({ ...base, type: 'RecordsReplaced', incarnation: target.incarnation, records: makeRecords(target.keyed, step.count, step.seed) });
        return;
      case 'delete':
        if (target === undefined) return;
        live.delete(step.ds);
        events.push({ ...base, type: 'DatasetDeleted', incarnation: target.incarnation });
        return;
      default: {
        const never: never = step;
        throw new Error(`unknown step ${JSON.stringify(never)}`);
      }
    }
  });
  return events;
}

/** Every event again as a fresh object, as decoding it from the log would give. */
export const redecoded = (event: DatasetEvent): DatasetEvent => JSON.parse(JSON.stringify(event)) as DatasetEvent;

import fc from 'fast-check';
import type { ReadModel } from '@pushbase/contracts';
import { createRecordService, createSchemaService, MemoryEventLog, MemoryProjection } from '@pushbase/app';
import {
  fold,
  recordsOf,
  type AggregateOp,
  type AggregateQueryParams,
  type AggregateResult,
  type Bucket,
  type DatasetEvent,
  type DatasetRecord,
  type FieldType,
  type FieldValue,
  type FilterOp,
  type FilterParam,
  type RecordQueryParams,
} from '@pushbase/domain';

/*
 * The read API's answers (ReadModel.queryRecords / aggregate / listDatasets) against a reference computed
 * here, naively, from the pure fold of the same events — in every mode: the memory projection of the
 * embedded server and the ClickHouse projection. Random datasets (every field type, optional fields holding
 * nulls, with and without unique_by) get random pushes through the real write path (the schema and record
 * services deciding onto an event log), then random queries: sorts, filters, pages walked to the end
 * (empty, exact page boundaries, the last page), aggregates grouped by strings and by day / week / month.
 *
 * The reference shares no code with the adapters: its order is written out here, its buckets come from
 * the JavaScript Date (the domain computes them by integer arithmetic; ClickHouse by SQL arithmetic).
 */

export interface ReadFixture {
  readonly readModel: ReadModel;
  /** Delivers the events (in log order) to the read model and resolves once they are readable. */
  load(events: readonly DatasetEvent[]): Promise<void>;
  cleanup(): Promise<void>;
}

const TYPES: readonly FieldType[] = ['number', 'percentage', 'money', 'duration', 'string', 'date', 'datetime'];
const NUMERIC = new Set<FieldType>(['number', 'percentage', 'money', 'duration']);

// Small pools, so equal values (ties, equality filters, groups) are common; edges of every kind included.
const POOL: Readonly<Record<FieldType, readonly unknown[]>> = {
  number: [0, -0, 1, -1, 0.1, 0.2, 1 / 3, 2.5, -1e15, 1e15, 5e-324, 123456.789],
  percentage: [0, 0.5, 1, 0.25, -0.1],
  duration: [0, 60, 3600.5, 1e9],
  money: [0, 100, -250, 99, 2 ** 52, -(2 ** 52)],
  string: ['', 'a', 'A', 'b', 'ä', 'é', '\uffff', '😀', 'a b', "o'k"],
  date: ['0000-01-01', '0000-01-03', '1969-12-31', '1970-01-01', '2024-02-29', '2024-03-01', '2024-03-04', '9999-12-31'],
  datetime: ['1969-12-31T23:59:59.999Z', '1970-01-01T00:00:00Z', '2024-02-29T23:30:00-01:00', '2024-03-03T23:59:59.999Z', '2024-03-04T00:00:00.000Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z'],
};

interface Spec {
  readonly fields: readonly { readonly type: FieldType; readonly optional: boolean }[];
  readonly unique: boolean;
}
interface Push {
  readonly replace: boolean;
  readonly rows: readonly (readonly number[])[];
  readonly deleteBy: boolean;
}

const specArb: fc.Arbitrary<Spec> = fc.record({
  fields: fc.array(fc.record({ type: fc.constantFrom(...TYPES), optional: fc.boolean() }), { minLength: 1, maxLength: 10 }),
  unique: fc.boolean(),
});
const pushArb: fc.Arbitrary<Push> = fc.record({
  replace: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  rows: fc.array(fc.array(fc.nat(40), { minLength: 10, maxLength: 10 }), { maxLength: 25 }),
  deleteBy: fc.boolean(),
});

const keyOf = (i: number, type: FieldType): string => `f${i}_${type}`;

function definitionBody(spec: Spec): { fields: Record<string, unknown>; unique_by: string[] } {
  const fields: Record<string, unknown> = {};
  spec.fields.forEach((f, i) => {
    fields[keyOf(i, f.type)] = {
      type: f.type,
      name: `Field ${i}`,
      optional: f.optional,
      ...(f.type === 'money' ? { currency_code: 'EUR' } : {}),
      ...(f.type === 'duration' ? { time_unit: 'seconds' } : {}),
    };
  });
  // A unique key of the first string, date or datetime field (so merges move records to the newest).
  const u = spec.fields.findIndex((f) => f.type === 'string' || f.type === 'date' || f.type === 'datetime');
  return { fields, unique_by: spec.unique && u >= 0 ? [keyOf(u, (spec.fields[u] as { type: FieldType }).type)] : [] };
}

function recordOf(spec: Spec, picks: readonly number[]): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  spec.fields.forEach((f, i) => {
    const pool = POOL[f.type];
    const pick = picks[i] ?? 0;
    // An optional field is null about one time in five; a required one never.
    if (f.optional && pick % 5 === 4) r[keyOf(i, f.type)] = null;
    else r[keyOf(i, f.type)] = pool[pick % pool.length];
  });
  return r;
}

/** The embedded write path (schema and record services deciding onto a log), its events collected. */
async function writePath() {
  const log = new MemoryEventLog();
  const projection = new MemoryProjection();
  await log.start(projection.apply);
  let t = Date.UTC(2024, 0, 1);
  const clock = { now: () => (t += 1000) };
  let n = 0;
  const schemas = createSchemaService({ store: projection, log, clock, ids: { newIncarnation: () => `inc-${n++}` } });
  const records = createRecordService({ schemas: projection, log, clock });
  const append = (account: string, id: string, payload: unknown) => records.append({ account, id, json: new TextEncoder().encode(JSON.stringify(payload)) });
  return { log, schemas, records, append };
}

/** Pushes through the real write path (decide → log), returning the log's events. */
async function pushAll(account: string, datasets: readonly { spec: Spec; pushes: readonly Push[] }[]): Promise<DatasetEvent[]> {
  const { log, schemas, records } = await writePath();
  for (const [i, d] of datasets.entries()) {
    const id = `ds-${i}`;
    const body = definitionBody(d.spec);
    await schemas.findOrCreate({ account, id, body });
    const dateKey = Object.entries(body.fields).find(([, f]) => (f as { type: string }).type === 'date' || (f as { type: string }).type === 'datetime')?.[0];
    for (const p of d.pushes) {
      const payload = { data: p.rows.map((picks) => recordOf(d.spec, picks)), ...(p.deleteBy && dateKey !== undefined && !p.replace ? { delete_by: dateKey } : {}) };
      const json = new TextEncoder().encode(JSON.stringify(payload));
      await (p.replace ? records.replace({ account, id, json }) : records.append({ account, id, json }));
    }
  }
  return log.events;
}

// ── The reference ──

function cmpCodePoints(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) as number);
  const y = Array.from(b, (c) => c.codePointAt(0) as number);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  return x.length - y.length;
}
const millis = (v: string): number => new Date(v.length === 10 ? `${v}T00:00:00Z` : v).getTime();
function cmp(type: FieldType, a: string | number, b: string | number): number {
  if (NUMERIC.has(type)) return (a as number) - (b as number) || 0;
  if (type === 'date' || type === 'datetime') return millis(a as string) - millis(b as string);
  return cmpCodePoints(a as string, b as string);
}

function refMatches(records: readonly DatasetRecord[], fields: Record<string, FieldType>, filters: readonly FilterParam[]): DatasetRecord[] {
  return records.filter((r) =>
    filters.every((f) => {
      const v = r[f.field] ?? null;
      if (f.op === 'null') return (v === null) === (f.value === 'true');
      if (v === null) return false;
      const type = fields[f.field] as FieldType;
      const c = cmp(type, v, NUMERIC.has(type) ? Number(f.value) : f.value);
      return { eq: c === 0, lt: c < 0, lte: c <= 0, gt: c > 0, gte: c >= 0 }[f.op];
    }),
  );
}

function refSorted(records: readonly DatasetRecord[], fields: Record<string, FieldType>, sort: string | null, order: 'asc' | 'desc'): DatasetRecord[] {
  const indexed = records.map((r, i) => ({ r, i }));
  if (sort === null) return (order === 'asc' ? indexed : indexed.reverse()).map((x) => x.r);
  const type = fields[sort] as FieldType;
  indexed.sort((a, b) => {
    const x = a.r[sort] ?? null;
    const y = b.r[sort] ?? null;
    if (x === null && y === null) return a.i - b.i;
    if (x === null) return 1;
    if (y === null) return -1;
    return (order === 'asc' ? cmp(type, x, y) : cmp(type, y, x)) || a.i - b.i;
  });
  return indexed.map((x) => x.r);
}

function refBucket(type: FieldType, bucket: Bucket, v: string): string {
  const d = new Date(millis(v));
  const day = new Date(Date.UTC(0, 0, 1));
  day.setUTCFullYear(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  if (bucket === 'week') day.setUTCDate(day.getUTCDate() - ((day.getUTCDay() + 6) % 7));
  if (bucket === 'month') day.setUTCDate(1);
  const y = day.getUTCFullYear();
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${y < 0 ? `-${pad(-y, 4)}` : pad(y, 4)}-${pad(day.getUTCMonth() + 1)}-${pad(day.getUTCDate())}`;
}

interface RefValue {
  readonly value: number | null;
  /** Sum of absolute values: the scale of a float sum's rounding error. */
  readonly scale: number;
}
function refAggregate(records: readonly DatasetRecord[], op: AggregateOp, field: string | null): RefValue {
  const values = field === null ? records.map(() => 0) : records.map((r) => r[field] ?? null).filter((v): v is string | number => v !== null);
  if (op === 'count') return { value: values.length, scale: 0 };
  const nums = values as number[];
  if (nums.length === 0) return { value: null, scale: 0 };
  const sum = nums.reduce((a, b) => a + b, 0);
  const scale = nums.reduce((a, b) => a + Math.abs(b), 0);
  const value = op === 'sum' ? sum : op === 'avg' ? sum / nums.length : op === 'min' ? Math.min(...nums) : Math.max(...nums);
  return { value, scale: op === 'avg' ? scale / nums.length : scale };
}

/** Equal, or for sums and averages within the rounding a different order of addition may cause. */
function close(actual: number | null, want: RefValue, op: AggregateOp): boolean {
  if (actual === null || want.value === null) return actual === want.value;
  if (op !== 'sum' && op !== 'avg') return actual === want.value || (actual === 0 && want.value === 0);
  return Math.abs(actual - want.value) <= 1e-12 * want.scale + Number.MIN_VALUE;
}

// ── Queries ──

interface QueryChoice {
  readonly sort: number | null;
  readonly desc: boolean;
  readonly limit: number;
  readonly filters: readonly { readonly field: number; readonly op: FilterOp; readonly pick: number }[];
  readonly aggregates: readonly { readonly op: AggregateOp; readonly field: number | null; readonly group: number | null; readonly bucket: Bucket }[];
}
const queryArb: fc.Arbitrary<QueryChoice> = fc.record({
  sort: fc.option(fc.nat(9), { nil: null }),
  desc: fc.boolean(),
  limit: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 5, max: 40 })),
  filters: fc.array(fc.record({ field: fc.nat(9), op: fc.constantFrom<FilterOp>('eq', 'lt', 'lte', 'gt', 'gte', 'null'), pick: fc.nat(40) }), { maxLength: 2 }),
  aggregates: fc.array(
    fc.record({ op: fc.constantFrom<AggregateOp>('count', 'sum', 'min', 'max', 'avg'), field: fc.option(fc.nat(9), { nil: null }), group: fc.option(fc.nat(9), { nil: null }), bucket: fc.constantFrom<Bucket>('day', 'week', 'month') }),
    { minLength: 1, maxLength: 4 },
  ),
});

/** The choice's filters made valid for the dataset (a string field takes eq or null only). */
function filtersFor(spec: Spec, choice: QueryChoice): FilterParam[] {
  const used = new Set<string>();
  const out: FilterParam[] = [];
  for (const f of choice.filters) {
    const i = f.field % spec.fields.length;
    const type = (spec.fields[i] as { type: FieldType }).type;
    const op: FilterOp = type === 'string' && f.op !== 'null' ? 'eq' : f.op;
    const param = op === 'eq' ? `filter.${keyOf(i, type)}` : `filter.${keyOf(i, type)}.${op}`;
    if (used.has(param)) continue;
    used.add(param);
    const pool = POOL[type];
    out.push({ field: keyOf(i, type), op, param, value: op === 'null' ? String(f.pick % 2 === 0) : String(pool[f.pick % pool.length]) });
  }
  return out.sort((a, b) => (a.param < b.param ? -1 : 1));
}

const json = (v: unknown): unknown => JSON.parse(JSON.stringify(v));

async function checkDataset(readModel: ReadModel, account: string, id: string, spec: Spec, records: readonly DatasetRecord[], choice: QueryChoice): Promise<void> {
  const fields = Object.fromEntries(spec.fields.map((f, i) => [keyOf(i, f.type), f.type]));
  const keys = Object.keys(fields);
  const filters = filtersFor(spec, choice);
  const sort = choice.sort === null ? null : (keys[choice.sort % keys.length] as string);
  const order = choice.desc ? 'desc' : 'asc';
  const want = refSorted(refMatches(records, fields, filters), fields, sort, order);

  // Walk every page, then one past the end; the exact boundary (total a multiple of limit) comes up often.
  const limit = choice.limit;
  const seen: DatasetRecord[] = [];
  for (let offset = 0; ; offset += limit) {
    const q: RecordQueryParams = { filters, sort, order, limit, offset };
    const page = await readModel.queryRecords(account, id, q);
    const expectedNext = offset + limit < want.length ? offset + limit : null;
    expect({ q, page: json(page) }).toEqual({ q, page: json({ records: want.slice(offset, offset + limit), total: want.length, offset, limit, next_offset: expectedNext }) });
    seen.push(...(page?.records ?? []));
    if (page?.next_offset === null) break;
  }
  expect(seen.length).toBe(want.length);
  const past = await readModel.queryRecords(account, id, { filters, sort, order, limit, offset: want.length + limit });
  expect(json(past)).toEqual({ records: [], total: want.length, offset: want.length + limit, limit, next_offset: null });
  if (want.length > 0 && want.length <= 1000) {
    // The exact boundary, whatever limit the run drew: one page holding every match, and no next page.
    const whole = await readModel.queryRecords(account, id, { filters, sort, order, limit: want.length, offset: 0 });
    expect(json(whole)).toEqual(json({ records: want, total: want.length, offset: 0, limit: want.length, next_offset: null }));
    const short = await readModel.queryRecords(account, id, { filters, sort, order, limit: want.length, offset: want.length - 1 });
    expect(json(short?.records)).toEqual(json(want.slice(-1)));
  }

  const matched = refMatches(records, fields, filters);
  for (const a of choice.aggregates) {
    const numericKeys = keys.filter((k) => NUMERIC.has(fields[k] as FieldType));
    const field = a.op === 'count' ? (a.field === null ? null : (keys[a.field % keys.length] as string)) : numericKeys.length === 0 ? null : (numericKeys[(a.field ?? 0) % numericKeys.length] as string);
    if (a.op !== 'count' && field === null) continue;
    const groupKeys = keys.filter((k) => fields[k] === 'string' || fields[k] === 'date' || fields[k] === 'datetime');
    const groupBy = a.group === null || groupKeys.length === 0 ? null : (groupKeys[a.group % groupKeys.length] as string);
    const groupType = groupBy === null ? null : (fields[groupBy] as FieldType);
    const bucket = groupType === 'date' || groupType === 'datetime' ? a.bucket : null;
    const q: AggregateQueryParams = { op: a.op, field, groupBy, bucket, filters };
    const got = (await readModel.aggregate(account, id, q)) as AggregateResult;
    if (groupBy === null) {
      const ref = refAggregate(matched, a.op, field);
      if (!('value' in got) || !close(got.value, ref, a.op)) expect({ q, got }).toEqual({ q, got: { value: ref.value } });
      continue;
    }
    const groups = new Map<string | null, DatasetRecord[]>();
    for (const r of matched) {
      const v = r[groupBy] ?? null;
      const key = v === null ? null : bucket === null ? String(v) : refBucket(groupType as FieldType, bucket, String(v));
      groups.set(key, [...(groups.get(key) ?? []), r]);
    }
    const refKeys = [...groups.keys()].sort((x, y) => (x === null ? 1 : y === null ? -1 : cmpCodePoints(x, y)));
    const ref = refKeys.map((key) => ({ key, ...refAggregate(groups.get(key) as DatasetRecord[], a.op, field) }));
    const ok = 'groups' in got && got.groups.length === ref.length && got.groups.every((g, i) => g.key === ref[i]?.key && close(g.value, ref[i], a.op));
    if (!ok) expect({ q, got }).toEqual({ q, got: { groups: ref.map(({ key, value }) => ({ key, value })) } });
  }
}

export function describeReadApiContract(name: string, make: () => Promise<ReadFixture>, runs: number): void {
  describe(`read API contract: ${name}`, () => {
    let f: ReadFixture;
    beforeAll(async () => {
      f = await make();
    });
    afterAll(async () => {
      await f.cleanup();
    });

    it('answers records, pages and aggregates as the reference computed from the pure fold', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ spec: specArb, pushes: fc.array(pushArb, { maxLength: 4 }), queries: fc.array(queryArb, { minLength: 1, maxLength: 3 }) }), { minLength: 1, maxLength: 3 }),
          async (datasets) => {
            const account = `acct-${process.pid}-${run++}-${Math.random().toString(36).slice(2, 8)}`;
            const events = await pushAll(account, datasets);
            await f.load(events);
            const state = fold(JSON.parse(JSON.stringify(events)) as DatasetEvent[]);
            const listing = await f.readModel.listDatasets(account);
            expect(listing.map((d) => [d.id, d.record_count, d.updated_at])).toEqual(
              [...(state.get(account)?.values() ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1)).map((d) => [d.id, d.rows.size, new Date(d.updated_at).toISOString()]),
            );
            for (const [i, d] of datasets.entries()) {
              const ds = state.get(account)?.get(`ds-${i}`);
              const records = ds === undefined ? [] : recordsOf(ds);
              for (const choice of d.queries) await checkDataset(f.readModel, account, `ds-${i}`, d.spec, records, choice);
            }
            await expect(f.readModel.queryRecords(account, 'missing', { filters: [], sort: null, order: 'asc', limit: 1, offset: 0 })).resolves.toBeUndefined();
            await expect(f.readModel.aggregate(account, 'missing', { op: 'count', field: null, groupBy: null, bucket: null, filters: [] })).resolves.toBeUndefined();
          },
        ),
        { numRuns: runs },
      );
      // Each run writes and queries up to three datasets: on a store sharing a loaded machine a run has
      // taken over 2 s, so the whole property gets time in proportion to its runs.
    }, Math.max(60_000, runs * 8_000));

    it('sees only each record’s newest version: a unique_by record rewritten in a later write matches by its new values only', async () => {
      const account = `acct-final-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
      const w = await writePath();
      await w.schemas.findOrCreate({ account, id: 'teams', body: { fields: { team: { type: 'string', name: 'Team' }, n: { type: 'number', name: 'N', optional: true } }, unique_by: ['team'] } });
      await w.append(account, 'teams', { data: [{ team: 'red', n: 1 }, { team: 'blue', n: 5 }] });
      // Two loads: in ClickHouse two inserts, two parts that no merge has collapsed yet; only FINAL hides the old row.
      await f.load(w.log.events);
      const before = w.log.events.length;
      await w.append(account, 'teams', { data: [{ team: 'red', n: null }] });
      await f.load(w.log.events.slice(before));
      const page = (q: Partial<RecordQueryParams>) => f.readModel.queryRecords(account, 'teams', { filters: [], sort: null, order: 'asc', limit: 10, offset: 0, ...q });
      await expect(page({ filters: [{ field: 'n', op: 'eq', value: '1', param: 'filter.n' }] })).resolves.toEqual({ records: [], total: 0, offset: 0, limit: 10, next_offset: null });
      await expect(page({})).resolves.toMatchObject({ records: [{ team: 'blue', n: 5 }, { team: 'red', n: null }], total: 2 });
      await expect(f.readModel.aggregate(account, 'teams', { op: 'sum', field: 'n', groupBy: 'team', bucket: null, filters: [] })).resolves.toEqual({
        groups: [
          { key: 'blue', value: 5 },
          { key: 'red', value: null },
        ],
      });
      await expect(f.readModel.aggregate(account, 'teams', { op: 'count', field: null, groupBy: null, bucket: null, filters: [] })).resolves.toEqual({ value: 2 });
    });
  });
}

/** The read model of the embedded server: the memory projection fed by the log's listener. */
export function memoryReadFixture(): Promise<ReadFixture> {
  const projection = new MemoryProjection();
  return Promise.resolve({
    readModel: projection,
    load: (events) => {
      projection.apply(JSON.parse(JSON.stringify(events)) as DatasetEvent[]);
      return Promise.resolve();
    },
    cleanup: () => Promise.resolve(),
  });
}

export type { FieldValue };

import type { AggregateQuery, DatasetDefinition, Filter, RecordQuery } from '@pushbase/domain';
import { dateMillis, doubleBits, slotsOf, type Slot } from './layout';
import type { ProjectionTables } from './migrations';
import { quoteString } from './sql';

/*
 * The read API's queries as ClickHouse SQL (the rules are the domain's, read-query.ts). Every statement
 * reads one incarnation's live rows from `records FINAL`, FINAL first so filters see only each row's newest
 * version (never PREWHERE). Only constants and values this module made meet the SQL text: strings through
 * quoteString, numbers as their IEEE-754 bits (18.16's float parser rounds some decimals), dates as epoch
 * milliseconds. Aggregates run in ClickHouse and come back as bits, exact. Why: docs/clickhouse.md → The
 * read API's queries; docs/clickhouse.md → Statements.
 */

const MS_PER_DAY = 86_400_000;

export interface DatasetScope {
  readonly tables: ProjectionTables;
  readonly accountLiteral: string;
  readonly datasetLiteral: string;
  readonly incarnation: string;
  readonly definition: DatasetDefinition;
}

function slotOf(definition: DatasetDefinition, key: string): Slot {
  const slot = slotsOf(definition).find((s) => s.key === key);
  // resolve* checked every field against this very definition; a miss is a bug, not a client's error.
  if (slot === undefined) throw new Error(`No slot for field ${key}`);
  return slot;
}

const checked = (n: number): number => {
  if (!Number.isSafeInteger(n)) throw new Error(`Not an integer for SQL: ${n}`);
  return n;
};
/** An Int64 constant: bare literals would take the smallest type that fits, and mixed types change intDiv's. */
const integer = (n: number): string => `toInt64(${checked(n)})`;

/** A double as a SQL expression of exactly that value. */
export const doubleLiteral = (v: number): string => `reinterpretAsFloat64(reinterpretAsString(toUInt64(${doubleBits(v)})))`;

/** The prefix of a page's output columns: `pb_out_num_0_bits` holds the text of `num_0_bits`. */
export const OUTPUT_PREFIX = 'pb_out_';

const OPERATOR = { eq: '=', lt: '<', lte: '<=', gt: '>', gte: '>=' } as const;

function filterSql(definition: DatasetDefinition, f: Filter): string {
  const column = slotOf(definition, f.field).column;
  if (f.op === 'null') return f.value ? `isNull(${column})` : `isNotNull(${column})`;
  let literal: string;
  switch (f.type) {
    case 'string':
      literal = quoteString(f.value as string);
      break;
    case 'date':
      literal = integer(dateMillis(f.value as string));
      break;
    case 'datetime':
      literal = integer(f.value as number);
      break;
    case 'number':
    case 'money':
    case 'percentage':
    case 'duration':
      literal = doubleLiteral(f.value as number);
  }
  // A comparison with NULL is NULL, which WHERE drops: a filter never matches a null, as the domain says.
  return `${column} ${OPERATOR[f.op]} ${literal}`;
}

function whereSql(scope: DatasetScope, filters: readonly Filter[]): string {
  return [
    `account = ${scope.accountLiteral}`,
    `dataset = ${scope.datasetLiteral}`,
    `incarnation = ${quoteString(scope.incarnation)}`,
    'deleted = 0',
    ...filters.map((f) => filterSql(scope.definition, f)),
  ].join(' AND ');
}

/** The page's rows (one more than the limit, to tell whether a next page exists) and the matching total. */
export function recordQuerySql(scope: DatasetScope, q: RecordQuery): { readonly page: string; readonly total: string } {
  const from = `FROM ${scope.tables.records} FINAL WHERE ${whereSql(scope, q.filters)}`;
  // Aliases of their own: ClickHouse lets an alias shadow a column everywhere in the query, WHERE included.
  const select = slotsOf(scope.definition)
    .map((s) => `toString(${s.stored}) AS ${OUTPUT_PREFIX}${s.stored}`)
    .join(', ');
  const direction = q.order === 'asc' ? 'ASC' : 'DESC';
  // seq is the insertion order (project.ts): the tie-break, oldest first, in either direction.
  const order = q.sort === null ? `seq ${direction}` : `${slotOf(scope.definition, q.sort.field).column} ${direction} NULLS LAST, seq ASC`;
  return {
    page: `SELECT ${select} ${from} ORDER BY ${order} LIMIT ${checked(q.offset)}, ${checked(q.limit + 1)}`,
    total: `SELECT toString(count()) AS n ${from}`,
  };
}

// ── Buckets, by integer arithmetic on epoch milliseconds ──
// 18.16's Date covers 1970–2105, but dates and datetimes here span the years 0000–9999 (layout.ts), so
// toStartOfMonth / toMonday would be wrong outside that range; Hinnant's civil-from-days (domain time.ts)
// is plain integer arithmetic and right everywhere.

/** Floor division and modulo of Int64s (intDiv and % truncate toward zero). */
const floorDiv = (x: string, n: number): string => `(intDiv(${x}, ${integer(n)}) - ((${x} % ${integer(n)}) < 0))`;
const floorMod = (x: string, n: number): string => `(((${x} % ${integer(n)}) + ${integer(n)}) % ${integer(n)})`;

/**
 * The day of the month (1–31) of the day number named `days`, after H. Hinnant's civil_from_days. Each
 * step is named once with an inline alias (`(expr AS pb_doe)`) and referred to by name after: written out
 * nested, the expression grows to 10 KB and 18.16 spends tens of milliseconds analysing it per query.
 * ClickHouse resolves aliases query-wide, so one bucket expression per query may define them.
 */
export function dayOfMonthSql(days: string): string {
  const z = `((${days} + ${integer(719468)}) AS pb_z)`;
  const doe = `((${z} - ${floorDiv('pb_z', 146097)} * ${integer(146097)}) AS pb_doe)`;
  const yoe = `(intDiv(${doe} - intDiv(pb_doe, ${integer(1460)}) + intDiv(pb_doe, ${integer(36524)}) - intDiv(pb_doe, ${integer(146096)}), ${integer(365)}) AS pb_yoe)`;
  const doy = `((pb_doe - (${integer(365)} * ${yoe} + intDiv(pb_yoe, ${integer(4)}) - intDiv(pb_yoe, ${integer(100)}))) AS pb_doy)`;
  const mp = `(intDiv(${integer(5)} * ${doy} + ${integer(2)}, ${integer(153)}) AS pb_mp)`;
  return `(${integer(1)} + pb_doy - intDiv(${integer(153)} * ${mp} + ${integer(2)}, ${integer(5)}))`;
}

/** The first day (days since 1970-01-01) of the bucket of an epoch-milliseconds expression; NULL stays NULL. */
export function bucketDaySql(bucket: 'day' | 'week' | 'month', millis: string): string {
  const days = `(${floorDiv(millis, MS_PER_DAY)} AS pb_days)`;
  switch (bucket) {
    case 'day':
      return days;
    case 'week':
      // 1970-01-01 was a Thursday: Monday-based weeks are offset by three days.
      return `(${days} - ${floorMod(`(pb_days + ${integer(3)})`, 7)})`;
    case 'month':
      return `(${days} - (${dayOfMonthSql('pb_days')} - ${integer(1)}))`;
  }
}

const bits = (expression: string): string => `toString(reinterpretAsUInt64(reinterpretAsString(${expression})))`;

/**
 * One row per group (or one row): `n` the count, `v` the sum / min / max as bits where the op needs one,
 * `k` the group key (a string, or a bucket's first day number as text), ordered by key with NULL last.
 */
export function aggregateSql(scope: DatasetScope, q: AggregateQuery): string {
  const column = q.field === null ? null : slotOf(scope.definition, q.field.key).column;
  const select = [column === null ? 'toString(count()) AS n' : `toString(count(${column})) AS n`];
  if (column !== null) {
    if (q.op === 'sum' || q.op === 'avg') select.push(`${bits(`sumKahan(${column})`)} AS v`);
    else if (q.op === 'min' || q.op === 'max') select.push(`${bits(`${q.op}(${column})`)} AS v`);
  }
  const from = `FROM ${scope.tables.records} FINAL WHERE ${whereSql(scope, q.filters)}`;
  if (q.groupBy === null) return `SELECT ${select.join(', ')} ${from}`;
  const g = slotOf(scope.definition, q.groupBy.key).column;
  const key = q.groupBy.bucket === null ? g : bucketDaySql(q.groupBy.bucket, g);
  return `SELECT ${select.join(', ')}, ${key} AS pb_group, toString(pb_group) AS k ${from} GROUP BY pb_group ORDER BY pb_group ASC NULLS LAST`;
}


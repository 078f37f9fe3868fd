import { fieldOf } from './definition';
import { invalid, quoteValue } from './errors';
import { civilFromDays, isCalendarDate, parseDateMillis, parseDateTimeMillis } from './time';
import type { DatasetDefinition, DatasetRecord, FieldType, FieldValue } from './types';

/*
 * The read API's queries: what a widget may ask of one dataset, and the rules every read model (the embedded
 * fold, ClickHouse) answers by — the semantics are docs/read-api.md → Records: paging, order, filters and
 * Aggregates. `parse*Query` checks syntax only, so the gateway can refuse nonsense before any read; `resolve*`
 * types every value against the very definition the adapter then reads with. Errors are `invalid` with the
 * query parameter as the path, so the 400 names what to fix. Strings order by code point, which is UTF-8 byte
 * order, what ClickHouse compares.
 */

export const FILTER_OPS = ['eq', 'lt', 'lte', 'gt', 'gte', 'null'] as const;
export type FilterOp = (typeof FILTER_OPS)[number];
export const AGGREGATE_OPS = ['count', 'sum', 'min', 'max', 'avg'] as const;
export type AggregateOp = (typeof AGGREGATE_OPS)[number];
export const BUCKETS = ['day', 'week', 'month'] as const;
export type Bucket = (typeof BUCKETS)[number];
export type SortOrder = 'asc' | 'desc';

export const READ_LIMITS = Object.freeze({ defaultPageSize: 100, maxPageSize: 1000, maxOffset: 1_000_000 });

/** One filter as the query string gave it: `filter.<field>[.<op>]=<value>`. */
export interface FilterParam {
  readonly field: string;
  readonly op: FilterOp;
  readonly value: string;
  /** The query parameter, for errors. */
  readonly param: string;
}

export interface RecordQueryParams {
  readonly filters: readonly FilterParam[];
  readonly sort: string | null;
  readonly order: SortOrder;
  readonly limit: number;
  readonly offset: number;
}

export interface AggregateQueryParams {
  readonly op: AggregateOp;
  readonly field: string | null;
  readonly groupBy: string | null;
  readonly bucket: Bucket | null;
  readonly filters: readonly FilterParam[];
}

/** A filter typed by its field: numbers for number kinds, normalised strings for dates, datetimes, strings. */
export type Filter =
  | { readonly field: string; readonly type: FieldType; readonly op: Exclude<FilterOp, 'null'>; readonly value: string | number }
  | { readonly field: string; readonly type: FieldType; readonly op: 'null'; readonly value: boolean };

export interface RecordQuery {
  readonly filters: readonly Filter[];
  readonly sort: { readonly field: string; readonly type: FieldType } | null;
  readonly order: SortOrder;
  readonly limit: number;
  readonly offset: number;
}

export interface AggregateQuery {
  readonly op: AggregateOp;
  readonly field: { readonly key: string; readonly type: FieldType } | null;
  readonly groupBy: { readonly key: string; readonly type: FieldType; readonly bucket: Bucket | null } | null;
  readonly filters: readonly Filter[];
}

export interface RecordPage {
  readonly records: DatasetRecord[];
  /** Records matching the filters. */
  readonly total: number;
  readonly offset: number;
  readonly limit: number;
  /** The offset of the next page; null on the last page. */
  readonly next_offset: number | null;
}

export interface AggregateGroup {
  readonly key: string | null;
  readonly value: number | null;
}

/** Without groupBy: one value; with it: the groups, in key order, null last. */
export type AggregateResult = { readonly value: number | null } | { readonly groups: AggregateGroup[] };

const NUMERIC: ReadonlySet<FieldType> = new Set(['number', 'money', 'percentage', 'duration']);
export const isNumericType = (t: FieldType): boolean => NUMERIC.has(t);

// ── Syntax: the query string ──

/** A query string as Koa's (node's querystring) parser gives it: repeated names become arrays. */
export type QueryParams = Readonly<Record<string, string | readonly string[] | undefined>>;

function single(params: QueryParams, name: string): string | undefined {
  const v = params[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw invalid(`The query parameter ${name} is given ${v.length} times; give it once`, name);
  return v;
}

function nonNegativeInteger(params: QueryParams, name: string, fallback: number, max: number, min = 0): number {
  const raw = single(params, name);
  if (raw === undefined) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) < min || Number(raw) > max) throw invalid(`${name} must be an integer from ${min} to ${max}, got ${quoteValue(raw)}`, name);
  return Number(raw);
}

function oneOf<T extends string>(params: QueryParams, name: string, allowed: readonly T[]): T | undefined {
  const raw = single(params, name);
  if (raw === undefined) return undefined;
  const found = allowed.find((a) => a === raw);
  if (found === undefined) throw invalid(`${name} must be one of ${allowed.join(', ')}, got ${quoteValue(raw)}`, name);
  return found;
}

const FILTER_PARAM = /^filter\.([^.]*)(?:\.([^.]*))?$/;

function filtersOf(params: QueryParams, known: ReadonlySet<string>): FilterParam[] {
  const filters: FilterParam[] = [];
  for (const name of Object.keys(params)) {
    if (known.has(name)) continue;
    const m = FILTER_PARAM.exec(name);
    if (m === null) throw invalid(`Unknown query parameter ${quoteValue(name)}; filters are written filter.<field>=<value> or filter.<field>.<op>=<value>`, name);
    const op = FILTER_OPS.find((o) => o === (m[2] ?? 'eq'));
    if (op === undefined) throw invalid(`Unknown filter operator ${quoteValue(m[2])} in ${name}: use one of ${FILTER_OPS.join(', ')}`, name);
    const value = single(params, name) as string;
    filters.push({ field: m[1] as string, op, value, param: name });
  }
  // Object key order is the query string's; sorted, equal queries make equal SQL.
  return filters.sort((a, b) => (a.param < b.param ? -1 : a.param > b.param ? 1 : 0));
}

const RECORD_PARAMS: ReadonlySet<string> = new Set(['limit', 'offset', 'sort', 'order']);
const AGGREGATE_PARAMS: ReadonlySet<string> = new Set(['op', 'field', 'group_by', 'bucket']);

export function parseRecordQuery(params: QueryParams): RecordQueryParams {
  return {
    limit: nonNegativeInteger(params, 'limit', READ_LIMITS.defaultPageSize, READ_LIMITS.maxPageSize, 1),
    offset: nonNegativeInteger(params, 'offset', 0, READ_LIMITS.maxOffset),
    sort: single(params, 'sort') ?? null,
    order: oneOf(params, 'order', ['asc', 'desc'] as const) ?? 'asc',
    filters: filtersOf(params, RECORD_PARAMS),
  };
}

export function parseAggregateQuery(params: QueryParams): AggregateQueryParams {
  const op = oneOf(params, 'op', AGGREGATE_OPS);
  if (op === undefined) throw invalid(`op is required: one of ${AGGREGATE_OPS.join(', ')}`, 'op');
  return {
    op,
    field: single(params, 'field') ?? null,
    groupBy: single(params, 'group_by') ?? null,
    bucket: oneOf(params, 'bucket', BUCKETS) ?? null,
    filters: filtersOf(params, AGGREGATE_PARAMS),
  };
}

// ── Meaning: against the dataset's definition ──

function fieldType(definition: DatasetDefinition, key: string, param: string): FieldType {
  const f = fieldOf(definition.fields, key);
  if (f === undefined) {
    throw invalid(`${param} names ${quoteValue(key)}, which is not a field of this dataset (its fields: ${Object.keys(definition.fields).join(', ')})`, param);
  }
  return f.type;
}

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A filter's value typed and normalised as the field's stored values are. */
function filterValue(type: FieldType, raw: string, param: string): string | number {
  switch (type) {
    case 'number':
    case 'money':
    case 'percentage':
    case 'duration': {
      const n = Number(raw);
      if (!JSON_NUMBER.test(raw) || !Number.isFinite(n)) throw invalid(`${param} must be a number for a ${type} field, got ${quoteValue(raw)}`, param);
      // -0 and 0 are one value to every comparison; 0 keeps the SQL literal simple.
      return n === 0 ? 0 : n;
    }
    case 'date':
      if (!isCalendarDate(raw)) throw invalid(`${param} must be a date YYYY-MM-DD for a date field, got ${quoteValue(raw)}`, param);
      return raw;
    case 'datetime': {
      const ms = parseDateTimeMillis(raw);
      if (ms === undefined) throw invalid(`${param} must be an ISO 8601 date-time such as 2024-01-31T12:00:00Z for a datetime field, got ${quoteValue(raw)}`, param);
      return ms;
    }
    case 'string':
      return raw;
  }
}

function resolveFilters(definition: DatasetDefinition, params: readonly FilterParam[]): Filter[] {
  return params.map((p) => {
    const type = fieldType(definition, p.field, p.param);
    if (p.op === 'null') {
      if (p.value !== 'true' && p.value !== 'false') throw invalid(`${p.param} must be true or false, got ${quoteValue(p.value)}`, p.param);
      return { field: p.field, type, op: 'null', value: p.value === 'true' };
    }
    if (type === 'string' && p.op !== 'eq') throw invalid(`${p.param}: a string field takes equality (filter.${p.field}=<value>) or null, not ${p.op}`, p.param);
    return { field: p.field, type, op: p.op, value: filterValue(type, p.value, p.param) };
  });
}

/**
 * Checks a records query against the dataset's definition. A datetime filter's value becomes epoch
 * milliseconds (any offset the client wrote is applied); every other value keeps its stored form.
 */
export function resolveRecordQuery(definition: DatasetDefinition, params: RecordQueryParams): RecordQuery {
  const sort = params.sort === null ? null : { field: params.sort, type: fieldType(definition, params.sort, 'sort') };
  return { filters: resolveFilters(definition, params.filters), sort, order: params.order, limit: params.limit, offset: params.offset };
}

export function resolveAggregateQuery(definition: DatasetDefinition, params: AggregateQueryParams): AggregateQuery {
  let field: AggregateQuery['field'] = null;
  if (params.field !== null) {
    const type = fieldType(definition, params.field, 'field');
    if (params.op !== 'count' && !isNumericType(type)) throw invalid(`op=${params.op} needs a number, money, percentage or duration field; ${params.field} is a ${type}`, 'field');
    field = { key: params.field, type };
  } else if (params.op !== 'count') {
    throw invalid(`op=${params.op} needs a field: a number, money, percentage or duration field`, 'field');
  }
  let groupBy: AggregateQuery['groupBy'] = null;
  if (params.groupBy !== null) {
    const type = fieldType(definition, params.groupBy, 'group_by');
    if (type === 'string') {
      if (params.bucket !== null) throw invalid('bucket applies to a date or datetime group_by field only; leave it out for a string field', 'bucket');
    } else if (type === 'date' || type === 'datetime') {
      if (params.bucket === null) throw invalid(`group_by a ${type} field needs bucket: one of ${BUCKETS.join(', ')}`, 'bucket');
    } else {
      throw invalid(`group_by takes a string, date or datetime field; ${params.groupBy} is a ${type}`, 'group_by');
    }
    groupBy = { key: params.groupBy, type, bucket: params.bucket };
  } else if (params.bucket !== null) {
    throw invalid('bucket needs group_by: a date or datetime field', 'bucket');
  }
  return { op: params.op, field, groupBy, filters: resolveFilters(definition, params.filters) };
}

// ── The rules, as pure functions: the memory read model's evaluator and ClickHouse's reference ──

/** Compares two strings by Unicode code point (UTF-16 code units mis-order U+E000–U+FFFF against astral ones). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (astral code points) must sort after U+E000–U+FFFF: lift them above, drop the rest below.
    if (x >= 0xd800) x = x < 0xe000 ? x + 0x2000 : x - 0x800;
    if (y >= 0xd800) y = y < 0xe000 ? y + 0x2000 : y - 0x800;
    return x - y;
  }
  return a.length - b.length;
}

const MS_PER_DAY = 86_400_000;

/** A stored date or datetime as epoch milliseconds. */
export function timeMillis(type: FieldType, v: string): number {
  return (type === 'date' ? parseDateMillis(v) : parseDateTimeMillis(v)) as number;
}

/** Compares two non-null values of one field by the order above. */
export function compareValues(type: FieldType, a: string | number, b: string | number): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (type === 'datetime') return timeMillis(type, a as string) - timeMillis(type, b as string);
  return compareCodePoints(String(a), String(b));
}

/** Whether a record's value passes a filter. */
export function matchesFilter(filter: Filter, v: FieldValue): boolean {
  if (filter.op === 'null') return (v === null) === filter.value;
  if (v === null) return false;
  const c = filter.type === 'datetime' ? timeMillis('datetime', v as string) - (filter.value as number) : compareValues(filter.type, v, filter.value);
  switch (filter.op) {
    case 'eq':
      return c === 0;
    case 'lt':
      return c < 0;
    case 'lte':
      return c <= 0;
    case 'gt':
      return c > 0;
    case 'gte':
      return c >= 0;
  }
}

/** The first day of the bucket holding `days` (days since 1970-01-01). Weeks start on Monday. */
export function bucketStartDay(bucket: Bucket, days: number): number {
  switch (bucket) {
    case 'day':
      return days;
    case 'week':
      // 1970-01-01 was a Thursday, three days after a Monday.
      return days - (((days + 3) % 7) + 7) % 7;
    case 'month': {
      const [, , d] = civilFromDays(days);
      return days - (d - 1);
    }
  }
}

/** A day number as `YYYY-MM-DD`; a week bucket of the first days of year 0 starts in year -1, written `-0001-12-27`. */
export function formatDay(days: number): string {
  const [y, m, d] = civilFromDays(days);
  const year = y < 0 ? `-${String(-y).padStart(4, '0')}` : String(y).padStart(4, '0');
  return `${year}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

/** The bucket key of a date or datetime value. */
export function bucketKey(type: FieldType, bucket: Bucket, v: string): string {
  return formatDay(bucketStartDay(bucket, Math.floor(timeMillis(type, v) / MS_PER_DAY)));
}

/** A finished aggregate: null over no values, and for a sum that left the double range. */
export function aggregateValue(op: AggregateOp, count: number, sum: number, min: number, max: number): number | null {
  if (op === 'count') return count;
  if (count === 0) return null;
  const v = op === 'sum' ? sum : op === 'avg' ? sum / count : op === 'min' ? min : max;
  return Number.isFinite(v) ? v : null;
}

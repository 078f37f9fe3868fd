/*
 * What the page charts for a dataset, chosen from its fields alone (pure, so a unit test in Node covers it):
 * a number-kind field (number, money, percentage, duration), summed, over a date or datetime field in day /
 * week / month buckets (a line chart), or summed per value of a string field (a bar chart). The user can
 * pick another field or bucket; the defaults are the first fields that fit, in definition order.
 */

export type FieldType = 'number' | 'money' | 'percentage' | 'duration' | 'string' | 'date' | 'datetime';

export interface FieldDefinition {
  readonly type: FieldType;
  readonly name: string;
  readonly optional?: boolean;
}

export type Fields = Readonly<Record<string, FieldDefinition>>;

export type Bucket = 'day' | 'week' | 'month';

export interface ChartPlan {
  /** The number-kind field summed. */
  readonly value: string;
  /** The field grouped by: a date/datetime (bucketed) or a string field. */
  readonly by: string;
  readonly bucket: Bucket;
  readonly kind: 'line' | 'bar';
}

const NUMERIC: ReadonlySet<FieldType> = new Set(['number', 'money', 'percentage', 'duration']);
const TIME: ReadonlySet<FieldType> = new Set(['date', 'datetime']);

export const valueFields = (fields: Fields): string[] => Object.keys(fields).filter((k) => NUMERIC.has(fields[k]!.type));
export const byFields = (fields: Fields): string[] => [
  ...Object.keys(fields).filter((k) => TIME.has(fields[k]!.type)),
  ...Object.keys(fields).filter((k) => fields[k]!.type === 'string'),
];

/**
 * The chart for `fields`, keeping the user's earlier choices where they still fit; undefined when the
 * dataset has no number-kind field or nothing to group it by.
 */
export function chartPlan(fields: Fields, wanted: Partial<Pick<ChartPlan, 'value' | 'by' | 'bucket'>> = {}): ChartPlan | undefined {
  const values = valueFields(fields);
  const bys = byFields(fields);
  const value = wanted.value !== undefined && values.includes(wanted.value) ? wanted.value : values[0];
  const by = wanted.by !== undefined && bys.includes(wanted.by) ? wanted.by : bys[0];
  if (value === undefined || by === undefined) return undefined;
  const kind = TIME.has(fields[by]!.type) ? 'line' : 'bar';
  return { value, by, bucket: wanted.bucket ?? 'day', kind };
}

/** The read API's aggregate query for a plan. */
export function aggregateQuery(plan: ChartPlan): URLSearchParams {
  const q = new URLSearchParams({ op: 'sum', field: plan.value, group_by: plan.by });
  if (plan.kind === 'line') q.set('bucket', plan.bucket);
  return q;
}

/** A cell's text: null as an empty cell, numbers as the locale writes them, everything else as sent. */
export function cellText(type: FieldType, v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return type === 'percentage' ? `${(v * 100).toLocaleString('en-US', { maximumFractionDigits: 4 })} %` : v.toLocaleString('en-US', { maximumFractionDigits: 6 });
  return typeof v === 'string' ? v : JSON.stringify(v);
}

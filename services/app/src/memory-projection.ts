import type { DatasetListing, ReadModel, SchemaStore } from '@pushbase/contracts';
import {
  aggregateValue,
  bucketKey,
  compareCodePoints,
  compareValues,
  evolve,
  formatUtcMillis,
  initialState,
  matchesFilter,
  recordsOf,
  resolveAggregateQuery,
  resolveRecordQuery,
  type AggregateQueryParams,
  type AggregateResult,
  type DatasetEvent,
  type DatasetRecord,
  type DatasetSummary,
  type Filter,
  type RecordPage,
  type RecordQueryParams,
  type State,
} from '@pushbase/domain';

/**
 * The embedded read model and schema store: the pure fold kept in memory, fed by the event log's listener
 * (the replay at start, then every durable batch), so reads reflect every acknowledged write at once.
 */
export class MemoryProjection implements SchemaStore, ReadModel {
  private state: State;

  /** `state`: where to start, e.g. a loaded snapshot; taken over (evolve consumes it), not copied. */
  constructor(state: State = initialState()) {
    this.state = state;
  }

  /** The live state, for a snapshot to capture synchronously. Read only: the fold owns it. */
  currentState(): State {
    return this.state;
  }

  readonly apply = (events: readonly DatasetEvent[]): void => {
    for (const e of events) this.state = evolve(this.state, e);
  };

  get(account: string, id: string): Promise<DatasetSummary | undefined> {
    return Promise.resolve(this.state.get(account)?.get(id));
  }

  count(account: string): Promise<number> {
    return Promise.resolve(this.state.get(account)?.size ?? 0);
  }

  listDatasets(account: string): Promise<DatasetListing[]> {
    const datasets = [...(this.state.get(account)?.values() ?? [])];
    return Promise.resolve(
      datasets
        .map((d) => ({
          id: d.id,
          fields: d.definition.fields,
          unique_by: d.definition.unique_by,
          record_count: d.rows.size,
          created_at: formatUtcMillis(d.created_at),
          updated_at: formatUtcMillis(d.updated_at),
        }))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    );
  }

  listRecords(account: string, id: string): Promise<DatasetRecord[] | undefined> {
    const ds = this.state.get(account)?.get(id);
    return Promise.resolve(ds === undefined ? undefined : recordsOf(ds));
  }

  queryRecords(account: string, id: string, params: RecordQueryParams): Promise<RecordPage | undefined> {
    const ds = this.state.get(account)?.get(id);
    if (ds === undefined) return Promise.resolve(undefined);
    const q = resolveRecordQuery(ds.definition, params);
    const matched = matching(recordsOf(ds), q.filters);
    if (q.sort !== null) {
      const { field, type } = q.sort;
      const sign = q.order === 'asc' ? 1 : -1;
      // Array#sort is stable: equal values keep insertion order. Nulls last in either direction.
      matched.sort((a, b) => {
        const x = a[field] ?? null;
        const y = b[field] ?? null;
        if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
        return sign * compareValues(type, x, y);
      });
    } else if (q.order === 'desc') {
      matched.reverse();
    }
    const records = matched.slice(q.offset, q.offset + q.limit);
    const next = q.offset + q.limit;
    return Promise.resolve({ records, total: matched.length, offset: q.offset, limit: q.limit, next_offset: next < matched.length ? next : null });
  }

  aggregate(account: string, id: string, params: AggregateQueryParams): Promise<AggregateResult | undefined> {
    const ds = this.state.get(account)?.get(id);
    if (ds === undefined) return Promise.resolve(undefined);
    const q = resolveAggregateQuery(ds.definition, params);
    const matched = matching(recordsOf(ds), q.filters);
    const field = q.field?.key;
    const total = (records: readonly DatasetRecord[]): number | null => {
      const acc = new Accumulator();
      for (const r of records) {
        if (field === undefined) acc.count++;
        else acc.add(r[field] ?? null);
      }
      return aggregateValue(q.op, acc.count, acc.sum, acc.min, acc.max);
    };
    const groupBy = q.groupBy;
    if (groupBy === null) return Promise.resolve({ value: total(matched) });
    const groups = new Map<string | null, DatasetRecord[]>();
    for (const r of matched) {
      const v = r[groupBy.key] ?? null;
      const key = v === null ? null : groupBy.bucket === null ? String(v) : bucketKey(groupBy.type, groupBy.bucket, String(v));
      let members = groups.get(key);
      if (members === undefined) groups.set(key, (members = []));
      members.push(r);
    }
    // Bucket keys are YYYY-MM-DD (a week of year 0 may start in year -1, which sorts first as it should).
    const keys = [...groups.keys()].sort((a, b) => (a === null || b === null ? (a === b ? 0 : a === null ? 1 : -1) : compareCodePoints(a, b)));
    return Promise.resolve({ groups: keys.map((key) => ({ key, value: total(groups.get(key) as DatasetRecord[]) })) });
  }

  /** Totals for logs and the benchmark. */
  stats(): { accounts: number; datasets: number; records: number } {
    let datasets = 0;
    let records = 0;
    for (const a of this.state.values()) {
      datasets += a.size;
      for (const d of a.values()) records += d.rows.size;
    }
    return { accounts: this.state.size, datasets, records };
  }
}

const matching = (records: DatasetRecord[], filters: readonly Filter[]): DatasetRecord[] =>
  filters.length === 0 ? records : records.filter((r) => filters.every((f) => matchesFilter(f, r[f.field] ?? null)));

/**
 * count / Kahan-compensated sum / min / max of one field's non-null numbers. Compensated, as ClickHouse's
 * sumKahan is: a plain running sum of many money amounts drifts in the last digits.
 */
class Accumulator {
  count = 0;
  sum = 0;
  compensation = 0;
  min = Infinity;
  max = -Infinity;

  add(v: string | number | null): void {
    if (v === null) return;
    this.count++;
    if (typeof v !== 'number') return;
    const y = v - this.compensation;
    const t = this.sum + y;
    this.compensation = t - this.sum - y;
    this.sum = t;
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
  }
}

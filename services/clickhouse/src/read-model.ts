import type { DatasetListing, ReadModel } from '@pushbase/contracts';
import {
  aggregateValue,
  formatDay,
  formatUtcMillis,
  resolveAggregateQuery,
  resolveRecordQuery,
  type AggregateQueryParams,
  type AggregateResult,
  type DatasetDefinition,
  type DatasetRecord,
  type RecordPage,
  type RecordQueryParams,
} from '@pushbase/domain';
import { selectRows, type ClickHouseConnection } from './client';
import { decodeRecord, doubleFromBits, slotsOf } from './layout';
import { tablesIn, type ProjectionTables } from './migrations';
import { aggregateSql, OUTPUT_PREFIX, recordQuerySql, type DatasetScope } from './read-sql';
import { readDataset, readSummary } from './records-table';
import { accountLiteral, datasetLiteral } from './sql';

/*
 * The read side in ClickHouse, behind the admin routes and the widgets' read API: the listing from the heads
 * table, a dataset's records from its head and live rows, queries and aggregates in SQL (read-sql.ts).
 * Which table each read trusts after a crash: docs/clickhouse.md → Crash safety.
 */

interface HeadsRow {
  readonly dataset: string;
  readonly incarnation: string;
  readonly definition: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly record_count: string;
  readonly version: string;
}

export class ClickHouseReadModel implements ReadModel {
  readonly tables: ProjectionTables;

  constructor(private readonly conn: ClickHouseConnection, database: string) {
    this.tables = tablesIn(database);
  }

  async listDatasets(account: string): Promise<DatasetListing[]> {
    const heads = await this.liveHeads(account);
    return heads.map((h) => {
      const definition = JSON.parse(h.definition) as DatasetDefinition;
      return {
        id: h.dataset,
        fields: definition.fields,
        unique_by: definition.unique_by,
        record_count: Number(h.record_count),
        created_at: formatUtcMillis(Number(h.created_at)),
        updated_at: formatUtcMillis(Number(h.updated_at)),
      };
    });
  }

  async listRecords(account: string, id: string): Promise<DatasetRecord[] | undefined> {
    const stored = await readDataset(this.conn, this.tables, account, id, 'all');
    if (stored === undefined || stored.deleted) return undefined;
    return [...stored.state.rows.values()];
  }

  async queryRecords(account: string, id: string, params: RecordQueryParams): Promise<RecordPage | undefined> {
    const scope = await this.scopeOf(account, id);
    if (scope === undefined) return undefined;
    const q = resolveRecordQuery(scope.definition, params);
    const sql = recordQuerySql(scope, q);
    // Two statements, so under concurrent writes the total and the page may be of two moments.
    const [rows, total] = await Promise.all([
      selectRows<Record<string, string | null>>(this.conn, sql.page, `reading records of ${account}/${id}`),
      selectRows<{ n: string }>(this.conn, sql.total, `counting records of ${account}/${id}`),
    ]);
    const slots = slotsOf(scope.definition);
    const records = rows.slice(0, q.limit).map((r) => decodeRecord(slots, Object.fromEntries(slots.map((s) => [s.stored, r[`${OUTPUT_PREFIX}${s.stored}`]]))));
    return { records, total: Number(total[0]?.n ?? 0), offset: q.offset, limit: q.limit, next_offset: rows.length > q.limit ? q.offset + q.limit : null };
  }

  async aggregate(account: string, id: string, params: AggregateQueryParams): Promise<AggregateResult | undefined> {
    const scope = await this.scopeOf(account, id);
    if (scope === undefined) return undefined;
    const q = resolveAggregateQuery(scope.definition, params);
    const rows = await selectRows<{ n: string; v?: string | null; k?: string | null }>(this.conn, aggregateSql(scope, q), `aggregating ${account}/${id}`);
    const valueOf = (r: { n: string; v?: string | null }): number | null => {
      const v = r.v === undefined || r.v === null ? NaN : doubleFromBits(r.v);
      return aggregateValue(q.op, Number(r.n), v, v, v);
    };
    const groupBy = q.groupBy;
    if (groupBy === null) return { value: valueOf(rows[0] ?? { n: '0' }) };
    return {
      groups: rows.map((r) => ({
        key: r.k === undefined || r.k === null ? null : groupBy.bucket === null ? r.k : formatDay(Number(r.k)),
        value: valueOf(r),
      })),
    };
  }

  /** What a query of a live dataset needs: its definition and the incarnation whose rows are its records. */
  private async scopeOf(account: string, id: string): Promise<DatasetScope | undefined> {
    const summary = await readSummary(this.conn, this.tables, account, id);
    if (summary === undefined) return undefined;
    return { tables: this.tables, accountLiteral: accountLiteral(account), datasetLiteral: datasetLiteral(id), incarnation: summary.incarnation, definition: summary.definition };
  }

  private liveHeads(account: string): Promise<HeadsRow[]> {
    return selectRows<HeadsRow>(
      this.conn,
      `SELECT dataset, incarnation, definition, toString(created_at) AS created_at, toString(updated_at) AS updated_at,
  toString(record_count) AS record_count, toString(version) AS version
FROM ${this.tables.heads} FINAL
WHERE account = ${accountLiteral(account)} AND deleted = 0
ORDER BY dataset`,
      `listing the datasets of ${account}`,
    );
  }
}

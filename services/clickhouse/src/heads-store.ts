import type { SchemaStore } from '@pushbase/contracts';
import type { DatasetSummary } from '@pushbase/domain';
import { selectRows, type ClickHouseConnection } from './client';
import { tablesIn, type ProjectionTables } from './migrations';
import { readSummary } from './records-table';
import { accountLiteral } from './sql';

/*
 * A SchemaStore view of the projection's heads (the schema service's own store is Redis): a dataset from its
 * head row, which is never behind its rows; the count from the heads table (docs/clickhouse.md → Crash safety).
 */
export class ClickHouseHeadsStore implements SchemaStore {
  readonly tables: ProjectionTables;

  constructor(private readonly conn: ClickHouseConnection, database: string) {
    this.tables = tablesIn(database);
  }

  get(account: string, id: string): Promise<DatasetSummary | undefined> {
    return readSummary(this.conn, this.tables, account, id);
  }

  async count(account: string): Promise<number> {
    const rows = await selectRows<{ n: string }>(
      this.conn,
      `SELECT toString(count()) AS n FROM ${this.tables.heads} FINAL WHERE account = ${accountLiteral(account)} AND deleted = 0`,
      `counting the datasets of ${account}`,
    );
    return Number(rows[0]?.n ?? 0);
  }
}

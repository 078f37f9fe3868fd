/*
 * The benches' wait for the Grafana-ready views, which the projector makes in the background after a
 * dataset's first write (docs/clickhouse.md → Grafana-ready views).
 */
import { performance } from 'node:perf_hooks';
import type { ClickHouseConnection } from '@pushbase/clickhouse';
import { selectRows } from '../services/clickhouse/src/client';

/**
 * Waits until the views database of the projection `database` holds `count` views, or `timeoutMs` passed:
 * how many it held then and after how many seconds.
 */
export async function viewsMade(conn: ClickHouseConnection, database: string, count: number, timeoutMs: number): Promise<{ made: number; seconds: number }> {
  const start = performance.now();
  for (;;) {
    const [row] = await selectRows<{ n: string }>(conn, `SELECT toString(count()) AS n FROM system.tables WHERE database = '${database}_views' AND engine = 'View'`, 'counting the views');
    const made = Number(row?.n ?? 0);
    const seconds = (performance.now() - start) / 1000;
    if (made >= count || seconds * 1000 >= timeoutMs) return { made, seconds };
    await new Promise((r) => setTimeout(r, 250));
  }
}

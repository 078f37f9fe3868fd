import type { DatasetListing, ReadModel, SchemaStore } from '@pushbase/contracts';
import { evolve, initialState, recordsOf, type DatasetEvent, type DatasetRecord, type DatasetSummary, type State } from '@pushbase/domain';

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
        .map((d) => ({ id: d.id, fields: d.definition.fields, unique_by: d.definition.unique_by, record_count: d.rows.size }))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    );
  }

  listRecords(account: string, id: string): Promise<DatasetRecord[] | undefined> {
    const ds = this.state.get(account)?.get(id);
    return Promise.resolve(ds === undefined ? undefined : recordsOf(ds));
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

import { initialState, type DatasetEvent, type State } from '@pushbase/domain';
import { emptyBatch, projectEvent, testDatabase, writeBatch } from '../../services/clickhouse/test/support';
import { describeReadApiContract } from '../contract/read-api.contract';

/*
 * The read API of the distributed mode: the ClickHouse projection (a database of its own on the real
 * ClickHouse) against the pure fold's reference. Events reach it as the projector writes them: folded into
 * rows and heads by the projector's own `project`, positions counting up like Kafka offsets.
 */
describeReadApiContract(
  'ClickHouseProjection (distributed)',
  async () => {
    const db = await testDatabase();
    let state: State = initialState();
    let offset = 0;
    return {
      readModel: db.readModel,
      load: async (events: readonly DatasetEvent[]) => {
        const batch = emptyBatch();
        // Decoded from the log as the projector gets them: fresh objects (project.ts recognises rows by identity).
        for (const e of JSON.parse(JSON.stringify(events)) as DatasetEvent[]) state = projectEvent(state, e, { partition: 0, offset: offset++ }, batch);
        await writeBatch(db.store, batch);
      },
      cleanup: () => db.drop(),
    };
  },
  25,
);

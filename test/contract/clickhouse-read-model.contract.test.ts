import { initialState, type State } from '@pushbase/domain';
import { emptyBatch, projectEvent, projectionReads, testDatabase, writeBatch } from '../../services/clickhouse/test/support';
import { describeProjectionContract } from './read-model.contract';

/*
 * The ReadModel (and SchemaStore view) of the ClickHouse projection against a real ClickHouse, behind the
 * same behaviour suite as the memory projection. Events reach it the way the projector will deliver them:
 * folded into rows and heads by the projector's own `project`, one write per applied batch, positions
 * counting up like Kafka offsets.
 */
describeProjectionContract('ClickHouseProjection', async () => {
  const db = await testDatabase();
  let state: State = initialState();
  let offset = 0;
  let written: Promise<void> = Promise.resolve();
  return {
    store: projectionReads(db),
    apply: (events) => {
      const batch = emptyBatch();
      for (const e of events) state = projectEvent(state, e, { partition: 0, offset: offset++ }, batch);
      written = written.then(() => writeBatch(db.store, batch));
    },
    // A write resolves once ClickHouse has it, and reads see every finished insert: nothing to poll.
    settle: () => written,
    cleanup: () => db.drop(),
  };
});

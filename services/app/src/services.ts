import type { DatasetBody, DatasetRef, EventLog, FindOrCreateResult, RawDatasetBody, RecordService, SchemaService, SchemaStore } from '@pushbase/contracts';
import { decideDefine, decideDelete, notFound, parseDatasetId, type DatasetSummary } from '@pushbase/domain';
import { inProcessDecider, type WriteDecider, type WriteKind } from './write-decider';
import { KeyedMutex } from './keyed-mutex';

/** Time and fresh ids are inputs, so tests can pin them. */
export interface Clock {
  now(): number;
}
export interface IdSource {
  newIncarnation(): string;
}

export interface SchemaServiceDeps {
  readonly log: EventLog;
  readonly store: SchemaStore;
  readonly clock: Clock;
  readonly ids: IdSource;
}

/**
 * The schema service: find-or-create, get, delete. Decisions that depend on other datasets of the account
 * are serialised per account; the store is updated by the log's listener before `append` resolves.
 */
export function createSchemaService({ log, store, clock, ids }: SchemaServiceDeps): SchemaService {
  const accountLock = new KeyedMutex();
  return {
    findOrCreate: ({ account, id, body }: DatasetBody): Promise<FindOrCreateResult> =>
      accountLock.run(account, async () => {
        const safeId = parseDatasetId(id);
        const [existing, count] = await Promise.all([store.get(account, safeId), store.count(account)]);
        const decision = decideDefine({ account, id: safeId, body, at: clock.now(), newIncarnation: ids.newIncarnation() }, existing, count);
        if (decision.outcome === 'found') return { created: false, dataset: decision.dataset };
        await log.append([decision.event]);
        return { created: true, dataset: decision.dataset };
      }),
    get: async ({ account, id }: DatasetRef): Promise<DatasetSummary> => {
      const ds = await store.get(account, parseDatasetId(id));
      if (ds === undefined) throw notFound();
      return ds;
    },
    delete: ({ account, id }: DatasetRef): Promise<void> =>
      accountLock.run(account, async () => {
        const safeId = parseDatasetId(id);
        const event = decideDelete({ account, id: safeId, at: clock.now() }, await store.get(account, safeId));
        await log.append([event]);
      }),
  };
}

export interface RecordServiceDeps {
  /** Only the schema is needed to decide a write; the window is the fold's job. */
  readonly schemas: SchemaStore;
  readonly log: EventLog;
  readonly clock: Clock;
  /** Where writes are parsed and validated; on the calling thread by default. */
  readonly decider?: WriteDecider;
}

/** The record-command service: validates against the schema and writes one event. Stateless. */
export function createRecordService({ schemas, log, clock, decider = inProcessDecider }: RecordServiceDeps): RecordService {
  const write =
    (kind: WriteKind) =>
    async ({ account, id, json }: RawDatasetBody): Promise<void> => {
      const dataset = await schemas.get(account, parseDatasetId(id));
      const { events, encoded } = await decider({ kind, account, id, json, at: clock.now() }, dataset);
      await log.append(events, encoded);
    };
  return { append: write('append'), replace: write('replace') };
}

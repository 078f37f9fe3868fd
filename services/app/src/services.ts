import type { DatasetBody, DatasetRef, EventAppender, KeyedWrite, WriteAnswer, EventLog, FindOrCreateResult, QuotaSource, RawDatasetBody, RecordService, SchemaService, SchemaStore } from '@pushbase/contracts';
import {
  decideDefine,
  decideDelete,
  DomainError,
  LIMITS,
  notFound,
  parseDatasetId,
  parseDefinition,
  type DatasetDefined,
  type DefineDecision,
  type DatasetDeleted,
  type DatasetSummary,
  type IdempotencyMark,
} from '@pushbase/domain';
import { inProcessDecider, type WriteDecider, type WriteKind } from './write-decider';
import { KeyedMutex } from './keyed-mutex';

/** The event with the write's Idempotency-Key inside it, when it was sent with one. */
const marked = <E extends DatasetDefined | DatasetDeleted>(event: E, idempotency: IdempotencyMark | undefined): E => (idempotency === undefined ? event : { ...event, idempotency });

/** Time and fresh ids are inputs, so tests can pin them. */
export interface Clock {
  now(): number;
}
export interface IdSource {
  newIncarnation(): string;
}

/** A schema decision: the event that makes it take effect (none when nothing changes) and the answer. */
export interface SchemaDecision<T> {
  readonly event?: DatasetDefined | DatasetDeleted;
  readonly answer: T;
}

/**
 * How schema decisions take effect. `decide` runs alone for its account — no other decision of that account
 * runs meanwhile, in this process or (distributed) in any replica — against a store that holds every
 * earlier decision of the account; its event is then stored in the log and visible in the store before
 * `decided` resolves with the answer.
 * Rejections: `unavailable` only when the event is not and will never be stored; `outcome_unknown` when it
 * was handed on and its fate cannot be told.
 */
export interface SchemaChanges {
  decided<T>(account: string, decide: () => Promise<SchemaDecision<T>>): Promise<T>;
  /**
   * A read of one dataset without the account's lock, for answers that change nothing (find of an
   * existing dataset, get): the dataset as the store shows it, and whether a change of it is pending —
   * decided, perhaps durable, not yet in the store (a distributed holder stopped between the log and the
   * store). When it is, the caller must not answer from the store but go through `decided`, which
   * completes that change first. Absent when the store always holds every change `decided` resolved and
   * no other (embedded: one process, the log's listener updates the store before the append resolves).
   */
  settled?(account: string, id: string): Promise<SettledDataset>;
}

/** See SchemaChanges.settled. */
export interface SettledDataset {
  readonly dataset: DatasetSummary | undefined;
  readonly pending: boolean;
}

/**
 * The embedded mode's changes: one process decides, so a per-account mutex serialises decisions, and the
 * log's listener updates the store before `append` resolves.
 */
export function logSchemaChanges(log: EventLog): SchemaChanges {
  const accountLock = new KeyedMutex();
  return {
    decided: (account, decide) =>
      accountLock.run(account, async () => {
        const { event, answer } = await decide();
        if (event !== undefined) await log.append([event]);
        return answer;
      }),
  };
}

interface SchemaServiceCommonDeps {
  readonly store: SchemaStore;
  readonly clock: Clock;
  readonly ids: IdSource;
  /** Each account's dataset limit in force (its quota); the API's limit for every account when not given. */
  readonly quotas?: QuotaSource;
}

/** Either an event log whose listener feeds `store` (embedded), or the changes of a distributed schema service. */
export type SchemaServiceDeps = SchemaServiceCommonDeps & ({ readonly log: EventLog } | { readonly changes: SchemaChanges });

/**
 * What the Idempotency-Key guard (idempotency.ts) adds to a keyed write in process, never sent: awaited right
 * before the write's event is handed to the log; rejects with `unavailable` (nothing stored) when the attempt
 * no longer holds its key.
 */
export interface Fenced {
  readonly fence?: () => Promise<void>;
}

/**
 * The schema service: find-or-create, get, delete. The decisions are the domain's (decideDefine,
 * decideDelete) made from what `store` holds; how they are serialised and made durable and visible is
 * `changes`' part, the one thing the embedded and the distributed schema service do differently.
 */
export function createSchemaService(deps: SchemaServiceDeps): SchemaService {
  const { store, clock, ids, quotas } = deps;
  const datasetLimit = (account: string): Promise<number> => (quotas === undefined ? Promise.resolve(LIMITS.datasetsPerAccount) : quotas.datasetLimit(account));
  const changes = 'changes' in deps ? deps.changes : logSchemaChanges(deps.log);
  const settled = async (account: string, id: string): Promise<SettledDataset> =>
    changes.settled === undefined ? { dataset: await store.get(account, id), pending: false } : changes.settled(account, id);
  return {
    findOrCreate: async ({ account, id, body, idempotency, fence }: DatasetBody & Fenced): Promise<FindOrCreateResult> => {
      const safeId = parseDatasetId(id);
      // Checked before anything is read, so an invalid definition is its 400 whatever the store's state
      // (decideDefine checks it again; a definition is small).
      parseDefinition(body);
      const decide = async () => {
        const [existing, count, limit] = await Promise.all([store.get(account, safeId), store.count(account), datasetLimit(account)]);
        return { existing, decision: (): DefineDecision => decideDefine({ account, id: safeId, body, at: clock.now(), newIncarnation: ids.newIncarnation() }, existing, count, limit) };
      };
      // A dataset that exists is found (or conflicts) from one read, without the account's lock: that answer
      // changes nothing and rests on the dataset alone, so it is correct as of the read (a delete running
      // meanwhile comes after it). Only a create, which rests on the count too, must be serialised — and an
      // answer while a change of the dataset is pending, which the store does not show yet.
      const seen = await settled(account, safeId);
      if (!seen.pending && seen.dataset !== undefined) {
        // The count matters only to a create, which is never answered here.
        const found = decideDefine({ account, id: safeId, body, at: clock.now(), newIncarnation: ids.newIncarnation() }, seen.dataset, 0);
        if (found.outcome === 'found') return { created: false, dataset: found.dataset };
      }
      return changes.decided(account, async (): Promise<SchemaDecision<FindOrCreateResult>> => {
        const decision = (await decide()).decision();
        if (decision.outcome === 'found') return { answer: { created: false, dataset: decision.dataset } };
        await fence?.();
        return { event: marked(decision.event, idempotency), answer: { created: true, dataset: decision.dataset } };
      });
    },
    get: async ({ account, id }: DatasetRef): Promise<DatasetSummary> => {
      const safeId = parseDatasetId(id);
      const seen = await settled(account, safeId);
      // A pending change is completed under the lock (decided with no event of its own) before the answer.
      const ds = seen.pending ? await changes.decided(account, async () => ({ answer: await store.get(account, safeId) })) : seen.dataset;
      if (ds === undefined) throw notFound();
      return ds;
    },
    delete: async ({ account, id, idempotency, fence }: DatasetRef & KeyedWrite & Fenced): Promise<WriteAnswer> => {
      const safeId = parseDatasetId(id);
      return changes.decided(account, async () => {
        const event = decideDelete({ account, id: safeId, at: clock.now() }, await store.get(account, safeId));
        await fence?.();
        return { event: marked(event, idempotency), answer: { replayed: false } };
      });
    },
  };
}

export interface RecordServiceDeps {
  /** Only the schema is needed to decide a write; the window is the fold's job. */
  readonly schemas: SchemaStore;
  /** Only written to: the embedded event log, or the distributed service's Kafka appender. */
  readonly log: EventAppender;
  readonly clock: Clock;
  /** Where writes are parsed and validated; on the calling thread by default. */
  readonly decider?: WriteDecider;
}

/** The record-command service: validates against the schema and writes one event. Stateless. */
export function createRecordService({ schemas, log, clock, decider = inProcessDecider }: RecordServiceDeps): RecordService {
  const write =
    (kind: WriteKind) =>
    async ({ account, id, json, idempotency, fence }: RawDatasetBody & Fenced): Promise<WriteAnswer> => {
      const dataset = await schemas.get(account, parseDatasetId(id)).catch(async (e: unknown) => {
        // The store cannot answer (distributed: a change of this dataset pending, Redis down). A malformed
        // request is still its 400: decided without a dataset it fails on its body before "not found".
        await decider({ kind, account, id, json, at: clock.now() }, undefined).catch((refusal: unknown) => {
          if (refusal instanceof DomainError && refusal.code === 'invalid') throw refusal;
        });
        throw e;
      });
      const { events, encoded } = await decider({ kind, account, id, json, at: clock.now(), ...(idempotency === undefined ? {} : { idempotency }) }, dataset);
      await fence?.();
      await log.append(events, encoded);
      return { replayed: false };
    };
  return { append: write('append'), replace: write('replace') };
}

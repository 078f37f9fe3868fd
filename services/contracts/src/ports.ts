import type {
  AppliedKey,
  IdempotencyMark,
  AccountQuotas,
  QuotaChange,
  AggregateQueryParams,
  AggregateResult,
  DatasetEvent,
  DatasetRecord,
  DatasetSummary,
  DatasetDefinition,
  KeyScope,
  QuotaLimits,
  RecordPage,
  RecordQueryParams,
} from '@pushbase/domain';

/*
 * The ports of pushbase. Each has an embedded adapter now and a distributed one later (file | Kafka,
 * memory | Redis, memory | ClickHouse, in-process | gRPC); one behaviour suite runs against every adapter.
 */

/**
 * Called synchronously, in log order (per dataset), for every durable batch of events. Dataset events by
 * default; the embedded account log is the same kind of log over account events.
 */
export type EventListener<E = DatasetEvent> = (events: readonly E[]) => void;

/**
 * Where an event sits in the log. Kafka: its partition and offset. One dataset's events live in one
 * partition (keyed by `account/dataset`), so within a dataset positions only grow.
 */
export interface StreamPosition {
  readonly partition: number;
  readonly offset: number;
}

export interface PositionedEvent {
  readonly event: DatasetEvent;
  readonly position: StreamPosition;
}

/**
 * The write half of the log: all the schema and record services need. A distributed writer never reads
 * the log back, so it has no listener; readers (the projector, replay) consume the log on their own.
 */
export interface EventAppender<E = DatasetEvent> {
  /**
   * Appends the events in order and resolves once they are durable (fsync'd / acknowledged by all
   * in-sync replicas). Rejects with a DomainError of code `unavailable` when the log cannot take the
   * write; then none of the events is stored.
   * All events of one append belong to one dataset: the log is ordered, and stores an append atomically,
   * per dataset (one Kafka partition holds a dataset; nothing is atomic across partitions).
   * `encoded`, when given, is `JSON.stringify(events)` as UTF-8, already made elsewhere (a worker thread).
   */
  append(events: readonly E[], encoded?: Uint8Array): Promise<void>;
  /** Stops taking appends, waits for those in flight, releases the log. */
  close(): Promise<void>;
}

export interface EventLog<E = DatasetEvent> extends EventAppender<E> {
  /**
   * Delivers every stored event to `listener` (the replay), then every newly durable batch: one dataset's
   * events in append order, each append's events in one call. Call once, before the first append.
   */
  start(listener: EventListener<E>): Promise<void>;
  /**
   * Appends the events in order and resolves once they are durable (fsync'd / acknowledged by all
   * replicas) and the listener has seen them. Rejects with a DomainError of code `unavailable` when the
   * log cannot take the write; then none of the events is stored.
   * `encoded`, when given, is `JSON.stringify(events)` as UTF-8, already made elsewhere (a worker thread):
   * the log stores it as the events' payload instead of serialising them again.
   */
  append(events: readonly E[], encoded?: Uint8Array): Promise<void>;
  /** Stops taking appends, waits for those in flight, releases the log. */
  close(): Promise<void>;
}

/** What the schema service reads to decide: the live datasets' definitions and the per-account count. */
export interface SchemaStore {
  get(account: string, id: string): Promise<DatasetSummary | undefined>;
  count(account: string): Promise<number>;
}

/**
 * The writer side of a SchemaStore kept outside the process (Redis): the projector and the replay tool
 * feed it the log's events. Idempotent per incarnation: applying an event again, or an event of an
 * incarnation that was since deleted or superseded, changes nothing, so redelivering any suffix of the
 * log leaves the store as delivering it once. Each event is applied atomically; resolves once all are.
 */
export interface SchemaStoreWriter {
  apply(events: readonly DatasetEvent[]): Promise<void>;
}

export interface DatasetListing {
  readonly id: string;
  readonly fields: DatasetDefinition['fields'];
  readonly unique_by: readonly string[];
  readonly record_count: number;
  /** When the dataset was created and last written, UTC `YYYY-MM-DDThh:mm:ss.sssZ`. */
  readonly created_at: string;
  readonly updated_at: string;
}

/**
 * The read side, behind the admin listener and the widgets' read API. The queries' rules (order, nulls,
 * filters, aggregates, buckets) are the domain's (read-query.ts); each adapter checks a query against the
 * definition of the dataset it reads (resolveRecordQuery / resolveAggregateQuery) and rejects with a
 * DomainError `invalid` naming the query parameter. Aggregates are computed where the records are (the
 * fold in memory; ClickHouse's GROUP BY), never by shipping records to the caller.
 */
export interface ReadModel {
  /** By id. */
  listDatasets(account: string): Promise<DatasetListing[]>;
  /** Oldest insertion first; undefined when the dataset does not exist. */
  listRecords(account: string, id: string): Promise<DatasetRecord[] | undefined>;
  /** One page of the records that match the filters, in the asked order; undefined when the dataset does not exist. */
  queryRecords(account: string, id: string, query: RecordQueryParams): Promise<RecordPage | undefined>;
  /** An aggregate of the records that match the filters; undefined when the dataset does not exist. */
  aggregate(account: string, id: string, query: AggregateQueryParams): Promise<AggregateResult | undefined>;
}

export interface RateDecision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Milliseconds until the next request would be allowed again / the window resets. */
  readonly resetMs: number;
}

export interface RateLimiter {
  /**
   * Counts one request for `key` unless it is refused; refused requests do not count. `limit` is the limit
   * in force for this key now (its account's requests_per_minute quota), so a quota change applies from
   * the next request without a new limiter.
   */
  consume(key: string, limit: number): Promise<RateDecision>;
}

/** Maps a presented API key to who it is (account, key, scope, quotas in force). Keys are stored only as hashes. */
export interface KeyStore {
  resolve(apiKey: string): Promise<Principal | undefined>;
}

/**
 * The dataset limit in force for an account (its `datasets` quota, else the API's 100), read by the schema
 * service when it decides a create.
 */
export interface QuotaSource {
  datasetLimit(account: string): Promise<number>;
}

// ── The service contracts (proto/pushbase/v1): implemented in-process now, by gRPC clients later. ──

export interface DatasetRef {
  readonly account: string;
  readonly id: string;
}

/** A write sent with an Idempotency-Key: the key and the fingerprint of the request the gateway saw. */
export interface KeyedWrite {
  readonly idempotency?: IdempotencyMark;
}

/** How a write was answered: `replayed` when it repeated a keyed write already applied, and nothing was applied now. */
export interface WriteAnswer {
  readonly replayed: boolean;
}

export interface DatasetBody extends DatasetRef, KeyedWrite {
  /** The parsed JSON body of the request. */
  readonly body: unknown;
}

/**
 * A write as the gateway received it: the JSON body's bytes, parsed and validated by the record service
 * (over gRPC they travel as `bytes body_json`), so the gateway never parses 500 records it only forwards.
 */
export interface RawDatasetBody extends DatasetRef, KeyedWrite {
  readonly json: Uint8Array;
}

export interface FindOrCreateResult {
  readonly created: boolean;
  readonly dataset: DatasetSummary;
  /** The answer of an earlier request with the same Idempotency-Key, repeated (WriteAnswer). */
  readonly replayed?: boolean;
}

export interface SchemaService {
  findOrCreate(req: DatasetBody): Promise<FindOrCreateResult>;
  /** Rejects with `not_found` when the dataset does not exist. */
  get(req: DatasetRef): Promise<DatasetSummary>;
  delete(req: DatasetRef & KeyedWrite): Promise<WriteAnswer>;
}

export interface RecordService {
  append(req: RawDatasetBody): Promise<WriteAnswer>;
  replace(req: RawDatasetBody): Promise<WriteAnswer>;
}

/**
 * The attempt of a keyed write that holds its key, until it settles with what became of the write:
 * `applied` (the event is stored), `not_applied` (proven never stored: a refusal, `unavailable`) or
 * `unknown` (`outcome_unknown`, a failure after the event was handed on), which the next attempt must
 * settle from the log before it may run (docs/api.md → Retrying a write).
 */
export interface KeyClaim {
  /**
   * Right before the attempt's event goes to the log: checks, atomically, that the attempt still holds the
   * key and renews its lease from now, so the lease covers the append. Rejects with `unavailable` when the
   * claim was lost (its lease ran out and another request began settling it): then nothing may be appended.
   */
  hold(): Promise<void>;
  settle(outcome: KeyOutcome): Promise<void>;
}

/** What became of a keyed attempt: stored (with what a repeat is answered from), proven not stored, or unknown. */
export type KeyOutcome = { readonly applied: AppliedKey } | 'not_applied' | 'unknown';

/**
 * The Idempotency-Keys of the applied writes, per account, retained for the TTL after their write. Fed
 * from the log (the key travels inside its event), so it holds exactly the keys of the stored writes.
 */
export interface IdempotencyLedger {
  /**
   * The stored write that carried `key` for `account`, while retained. An earlier attempt whose outcome is
   * unknown is settled first, from the log; while it cannot be yet, rejects with `idempotency_in_flight`.
   */
  applied(account: string, key: string): Promise<AppliedKey | undefined>;
  /** Claims the key for one attempt at a write of `dataset`; undefined while another attempt holds it (answered 409). */
  claim(account: string, key: string, dataset: string): Promise<KeyClaim | undefined>;
}

// ── Accounts and keys (docs/operations.md → Accounts and API keys): the admin side, one port for both modes. ──

/** An account as the admin listener shows it: its quotas as set (null = the server's default) and in force. */
export interface AccountView {
  readonly account: string;
  readonly created_at: string;
  readonly quotas: AccountQuotas;
  readonly effective_quotas: QuotaLimits;
  readonly key_count: number;
}

/** A key as listed: never the key, never its hash. */
export interface KeyView {
  readonly key_id: string;
  readonly account: string;
  readonly scope: KeyScope;
  readonly label: string | null;
  readonly created_at: string;
}

/**
 * Accounts and keys, behind the admin listener (and `pushbase accounts|keys`, which call it). Each change
 * is appended to the account log (embedded: the data directory's account log; distributed: the accounts
 * topic) before it is answered, and is in force on every gateway within 5 seconds. Rejects with DomainError
 * codes: `invalid`, `not_found` (no such account or key), `conflict` (the account exists), `unavailable` /
 * `outcome_unknown` as every write.
 */
export interface AccountAdmin {
  createAccount(account: string, quotas: AccountQuotas): Promise<AccountView>;
  listAccounts(): Promise<AccountView[]>;
  getAccount(account: string): Promise<AccountView>;
  /** Changes the quotas given (null: back to the default) and keeps the others, merged inside the decision. */
  setQuotas(account: string, change: QuotaChange): Promise<AccountView>;
  /** Deletes the account's datasets (DatasetDeleted events, so projections follow), then the account and its keys. */
  deleteAccount(account: string): Promise<{ readonly datasets_deleted: number }>;
  /** A new random key, returned this once; only its hash is stored. */
  createKey(account: string, options: { readonly scope: KeyScope; readonly label: string | null }): Promise<KeyView & { readonly key: string }>;
  listKeys(account: string): Promise<KeyView[]>;
  revokeKey(account: string, keyId: string): Promise<void>;
}

/**
 * AccountAdmin as the distributed schema service serves it (proto/pushbase/v1/accounts.proto): the caller
 * (the gateway's adapter) makes the key and hands over only its hash, so the key never leaves the process
 * that shows it once.
 */
export interface AccountCommands extends Omit<AccountAdmin, 'createKey'> {
  createKeyByHash(account: string, key: { readonly hash: string; readonly scope: KeyScope; readonly label: string | null }): Promise<KeyView>;
}

/** Who a presented key is: its account, scope and the account's quotas in force. */
export interface Principal {
  readonly account: string;
  readonly key_id: string;
  readonly scope: KeyScope;
  readonly quotas: QuotaLimits;
}

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/*
 * What each part of pushbase measures, as small objects with methods: the code measured never touches
 * prom-client's label API, so the names, labels and buckets are all here (docs/metrics.md lists them).
 *
 * Labels are of low cardinality only: a route pattern, never a raw path; a status code; a partition number.
 * Never an account, a dataset id or a key: every distinct label value is a series kept for ever.
 */

const seconds = (ms: number): number => ms / 1000;

// From a cached append (well under a millisecond) to a client's patience.
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
// A group commit is one write and one fdatasync: tens of microseconds on a cache, tens of ms on a slow disk.
const FSYNC_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
// A Kafka transaction: a produce round trip and a commit round trip, retries up to the append deadline.
const KAFKA_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
// A ClickHouse insert: from one row (an idle projector's timed flush) to PUSHBASE_PROJECTOR_FLUSH_ROWS and more.
const ROWS_BUCKETS = [1, 10, 100, 1000, 5000, 10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000];
/** Loads are held to tens of milliseconds: finer steps there. */
const LOAD_BUCKETS = [0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5];
const INSERT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Methods the API knows; anything else a client sends is counted as `other`, so it cannot add series. */
const METHODS = new Set(['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH', 'OPTIONS']);

/** Which limit refused a request: the per-key rate limit, or the per-address guard on failed authentications. */
export type RateLimitKind = 'api_key' | 'auth_failures';

export interface HttpMetrics {
  /** One answered request: `route` is the matched route pattern (`/datasets/:id/data`), or `unmatched`. */
  request(route: string, method: string, status: number, durationMs: number): void;
  rateLimitRefused(limit: RateLimitKind): void;
  /** A keyed write answered from its first attempt (Idempotent-Replayed: true), by route pattern. */
  idempotentReplay(route: string): void;
}

export function httpMetrics(registry: Registry): HttpMetrics {
  const labelNames = ['route', 'method', 'status'] as const;
  const requests = new Counter({ name: 'pushbase_http_requests_total', help: 'Requests answered by the public API, by route pattern, method and status code.', labelNames, registers: [registry] });
  const duration = new Histogram({
    name: 'pushbase_http_request_duration_seconds',
    help: 'Time from a request reaching the public API to its answer, by route pattern, method and status code.',
    labelNames,
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'pushbase_rate_limit_refusals_total',
    help: 'Requests refused with 429: limit="api_key" by the per-key rate limit, limit="auth_failures" by the guard on failed authentications per address.',
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  const replays = new Counter({
    name: 'pushbase_idempotent_replays_total',
    help: 'Writes answered from an earlier request with the same Idempotency-Key (Idempotent-Replayed: true), not applied again, by route pattern.',
    labelNames: ['route'] as const,
    registers: [registry],
  });
  return {
    request(route, method, status, durationMs) {
      const labels = { route, method: METHODS.has(method) ? method : 'other', status: String(status) };
      requests.inc(labels);
      duration.observe(labels, seconds(durationMs));
    },
    rateLimitRefused(limit) {
      refusals.inc({ limit });
    },
    idempotentReplay(route) {
      replays.inc({ route });
    },
  };
}

/** The embedded file event log (services/embedded/src/file-event-log.ts). */
export interface EventLogMetrics {
  /** One group commit written and fdatasync'd: its duration and how many appends it carried. */
  commit(durationMs: number, appends: number): void;
  /** One append made durable: from append() to its commit's fdatasync (queueing behind a commit included). */
  append(durationMs: number): void;
}

export function eventLogMetrics(registry: Registry): EventLogMetrics {
  const commitDuration = new Histogram({
    name: 'pushbase_event_log_commit_duration_seconds',
    help: 'Embedded event log: duration of one group commit (one write and one fdatasync).',
    buckets: FSYNC_BUCKETS,
    registers: [registry],
  });
  const commitAppends = new Histogram({
    name: 'pushbase_event_log_commit_appends',
    help: 'Embedded event log: appends carried by one group commit.',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
    registers: [registry],
  });
  const appendDuration = new Histogram({
    name: 'pushbase_event_log_append_duration_seconds',
    help: 'Embedded event log: from an append to its group commit being durable (waiting for the commit before it included).',
    buckets: FSYNC_BUCKETS,
    registers: [registry],
  });
  return {
    commit(durationMs, appends) {
      commitDuration.observe(seconds(durationMs));
      commitAppends.observe(appends);
    },
    append(durationMs) {
      appendDuration.observe(seconds(durationMs));
    },
  };
}

/** What an append to Kafka came to (services/kafka/src/appender.ts); `error` is a bug, not an outage. */
export type AppendOutcome = 'committed' | 'unavailable' | 'outcome_unknown' | 'error';
/** What a Kafka transaction came to: its commit confirmed, aborted (or never sent), or unconfirmed. */
export type TransactionOutcome = 'committed' | 'aborted' | 'unknown';

export interface KafkaAppenderMetrics {
  /** One transaction, from its produce request to the commit's outcome, with the appends it carried. */
  transaction(outcome: TransactionOutcome, durationMs: number, appends: number): void;
  /** One append settled: its outcome and the time from append() (linger and queueing included). */
  append(outcome: AppendOutcome, durationMs: number): void;
}

export function kafkaAppenderMetrics(registry: Registry): KafkaAppenderMetrics {
  const transactionDuration = new Histogram({
    name: 'pushbase_kafka_transaction_duration_seconds',
    help: 'Kafka appender: one transaction from its produce request to its commit outcome (committed, aborted or unknown).',
    labelNames: ['outcome'] as const,
    buckets: KAFKA_BUCKETS,
    registers: [registry],
  });
  const transactionAppends = new Histogram({
    name: 'pushbase_kafka_transaction_appends',
    help: 'Kafka appender: appends (writes) carried by one transaction.',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
    registers: [registry],
  });
  const appendDuration = new Histogram({
    name: 'pushbase_kafka_append_duration_seconds',
    help: 'Kafka appender: from an append to its outcome (linger, queueing behind the transaction before it, produce and commit).',
    labelNames: ['outcome'] as const,
    buckets: KAFKA_BUCKETS,
    registers: [registry],
  });
  const appends = new Counter({
    name: 'pushbase_kafka_appends_total',
    help: 'Kafka appender: appends by outcome: committed, unavailable (never stored), outcome_unknown (commit sent, unconfirmed), error (a bug).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  return {
    transaction(outcome, durationMs, count) {
      transactionDuration.observe({ outcome }, seconds(durationMs));
      transactionAppends.observe(count);
    },
    append(outcome, durationMs) {
      appends.inc({ outcome });
      appendDuration.observe({ outcome }, seconds(durationMs));
    },
  };
}

/** Which end of a gRPC call is timed: the service answering it, or the gateway making it. */
export type GrpcSide = 'server' | 'client';

/**
 * gRPC calls between the services (@pushbase/grpc), by the side measuring them. `service` is the full
 * service name (`pushbase.v1.RecordService`), `code` the status name (`OK`, `INVALID_ARGUMENT`,
 * `UNAVAILABLE`…): both fixed sets. What the difference between the two sides means, and where it does not
 * hold (a retried Get), is in docs/metrics.md.
 */
export interface GrpcMetrics {
  call(service: string, method: string, code: string, durationMs: number): void;
}

export function grpcMetrics(registry: Registry, side: GrpcSide): GrpcMetrics {
  const duration = new Histogram({
    name: `pushbase_grpc_${side}_handling_seconds`,
    help:
      side === 'server'
        ? 'gRPC server: from a call reaching its handler (the request read and decoded) to its answer being handed to grpc-js, by service, method and status code.'
        : 'gRPC client (the gateway): from a call being made to its answer or failure arriving (the wire, both processes\' queues and the server\'s handling), by service, method and status code.',
    labelNames: ['service', 'method', 'code'] as const,
    // The HTTP answers' buckets: a call is a part of one, and the shares over a bound compare directly.
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  return {
    call(service, method, code, durationMs) {
      duration.observe({ service, method, code }, seconds(durationMs));
    },
  };
}

/** The projector (services/projector/src/projector.ts). */
export interface ProjectorMetrics {
  /** A partition's lag: its high watermark as last fetched minus the offset the projector has written up to. */
  lag(partition: number, messages: number): void;
  /** This member no longer reads the partition: another one reports it. */
  forget(partition: number): void;
  /** One successful insert into the store (ClickHouse): its rows and duration. */
  insert(rows: number, durationMs: number): void;
  /** One successful load of dataset states it did not hold (one query, up to 8 datasets; each counts in `loads`). */
  load(durationMs: number): void;
  /** Events folded, written batches, datasets loaded back, states evicted by the memory bound, store retries, failed dataset views. */
  count(what: 'events' | 'writes' | 'loads' | 'evictions' | 'retries' | 'viewFailures', n?: number): void;
}

export function projectorMetrics(registry: Registry): ProjectorMetrics {
  const lag = new Gauge({
    name: 'pushbase_projector_lag_messages',
    help: "Projector: a partition's high watermark (as of its last fetched batch) minus the offset its written rows reach, transaction markers included.",
    labelNames: ['partition'] as const,
    registers: [registry],
  });
  const insertRows = new Histogram({ name: 'pushbase_clickhouse_insert_rows', help: 'Projector: rows of one insert into ClickHouse.', buckets: ROWS_BUCKETS, registers: [registry] });
  const insertDuration = new Histogram({
    name: 'pushbase_clickhouse_insert_duration_seconds',
    help: 'Projector: duration of one successful insert into ClickHouse (rows and dataset heads).',
    buckets: INSERT_BUCKETS,
    registers: [registry],
  });
  const loadDuration = new Histogram({
    name: 'pushbase_projector_load_duration_seconds',
    help: 'Projector: duration of one successful load of dataset states it did not hold (one query, up to 8 datasets).',
    buckets: LOAD_BUCKETS,
    registers: [registry],
  });
  const counter = (name: string, help: string): Counter => new Counter({ name, help, registers: [registry] });
  const counters = {
    events: counter('pushbase_projector_events_total', 'Projector: events folded (redelivered ones included).'),
    writes: counter('pushbase_projector_writes_total', 'Projector: batches written to the store.'),
    loads: counter('pushbase_projector_loads_total', 'Projector: dataset states read back from the store (first sight, after eviction, after a revocation).'),
    evictions: counter('pushbase_projector_evictions_total', 'Projector: dataset states dropped by the memory bound (PUSHBASE_PROJECTOR_MAX_ROWS).'),
    retries: counter('pushbase_projector_store_retries_total', 'Projector: store calls that failed as unavailable and were tried again.'),
    viewFailures: counter('pushbase_projector_view_failures_total', 'Projector: dataset views that could not be created or dropped (each is tried again at the next write).'),
  };
  return {
    lag(partition, messages) {
      lag.set({ partition: String(partition) }, Math.max(0, messages));
    },
    forget(partition) {
      lag.remove({ partition: String(partition) });
    },
    insert(rows, durationMs) {
      insertRows.observe(rows);
      insertDuration.observe(seconds(durationMs));
    },
    load(durationMs) {
      loadDuration.observe(seconds(durationMs));
    },
    count(what, n = 1) {
      counters[what].inc(n);
    },
  };
}

import type { StreamPosition } from '@pushbase/contracts';
import { DomainError } from '@pushbase/domain';
import type { KafkaAppenderMetrics } from '@pushbase/metrics';
import type { Span } from '@pushbase/telemetry';
import type { BaseOffsets, OutgoingMessage, PlacedMessage } from './messages';

/*
 * What the Kafka appender's queue (appender.ts) and its two send strategies (send-transaction.ts,
 * send-confirmed.ts) share: an append waiting in a batch, the producer a batch goes out on, and the
 * queue's ways to tell each append its outcome. The rules for those outcomes: docs/architecture.md →
 * The Kafka appender.
 */

/** What the appender needs from a producer: one transaction (in `idempotent` mode, one batch) at a time. */
export interface ProduceSession {
  /** Connects (and initialises the transactional id); resolves with the topic's partition count. */
  connect(): Promise<number>;
  /**
   * Begins a transaction and sends the messages (partition already chosen) in it; resolves with each
   * partition's first offset. In `idempotent` mode: sends them (stored once acknowledged), rejects with
   * NotSentError when no request went out, and with `again` sends the same batches (the same sequence
   * numbers) once more.
   */
  send(messages: readonly PlacedMessage[], again?: boolean): Promise<BaseOffsets>;
  /**
   * Sends EndTxn(commit); may be called again after any rejection. Rejects with TransactionAbortedError /
   * TransactionFencedError / CommitNotProcessedError when the coordinator answered so, with anything else
   * when no answer came.
   */
  commit(): Promise<void>;
  /** Aborts the open transaction; does nothing when none is open or its commit was sent. */
  abort(): Promise<void>;
  disconnect(): Promise<void>;
}

export interface Pending {
  readonly messages: readonly OutgoingMessage[];
  readonly bytes: number;
  /**
   * queued: in the queue; sending: in a transaction not yet committing; committing: its commit was sent
   * (idempotent mode: its produce request may have been written).
   */
  phase: 'queued' | 'sending' | 'committing';
  readonly resolve: (positions: StreamPosition[]) => void;
  readonly reject: (err: Error) => void;
  settled: boolean;
  deadline?: NodeJS.Timeout;
  /** performance.now() when append() queued it. */
  readonly queuedAt: number;
  /** The append's producer span (non-recording while tracing is off); its context is in the messages' headers. */
  readonly span: Span;
}

export interface Session {
  readonly session: ProduceSession;
  readonly partitionOf: (key: string) => number;
}

/** The appender's counters (AppenderStats), counted by the queue and the strategies alike. */
export interface AppenderCounts {
  requests: number;
  appends: number;
  messages: number;
  commitRetries: number;
}

/** What a send strategy is given of the queue. */
export interface AppendQueue {
  readonly counts: AppenderCounts;
  readonly metrics: KafkaAppenderMetrics | undefined;
  readonly commitRetryMs: number;
  /** Whether close() was called. */
  closing(): boolean;
  /** Tells an append its outcome, once; later calls for it do nothing. */
  settle(p: Pending, outcome: StreamPosition[] | Error): void;
  /** Drops a producer: the next batch goes out on a new one. */
  discard(session: Session | undefined): void;
  /** Takes a producer out of the queue's use without closing it (it confirms a batch on its own). */
  retire(session: Session): void;
  /** Batches being confirmed beside the queue; close() waits for them. */
  readonly confirming: Set<Promise<void>>;
}

/**
 * Sends one batch of live appends on `session` and settles each of them, one way or the other. Rejects only
 * on a bug; the queue then settles what is left.
 */
export type SendBatch = (q: AppendQueue, session: Session, live: Pending[], messages: PlacedMessage[], started: number) => Promise<void>;

export const outcomeUnknown = (message: string): DomainError => new DomainError('outcome_unknown', message);

export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The batch is stored (committed, or acknowledged): each append still waiting is told where its events are. */
export function stored(q: AppendQueue, live: readonly Pending[], positions: ReadonlyMap<Pending, StreamPosition[]>): void {
  for (const p of live) {
    if (p.settled) continue; // told outcome_unknown at its deadline; stored
    q.counts.appends += 1;
    q.counts.messages += p.messages.length;
    q.settle(p, positions.get(p)!);
  }
}

/**
 * Where each append's events were stored: a partition's messages are stored in the order sent, from its
 * base offset on. Undefined when the answer lacks a partition of the batch.
 */
export function positionsOf(session: Session, live: readonly Pending[], acks: BaseOffsets): Map<Pending, StreamPosition[]> | undefined {
  const next = new Map(acks.map((a) => [a.partition, a.baseOffset]));
  const positions = new Map<Pending, StreamPosition[]>();
  for (const p of live) {
    const at: StreamPosition[] = [];
    for (const m of p.messages) {
      const partition = session.partitionOf(m.key);
      const offset = next.get(partition);
      if (offset === undefined) return undefined;
      next.set(partition, offset + 1);
      at.push({ partition, offset });
    }
    positions.set(p, at);
  }
  return positions;
}

import { unavailable, type BaseOffsets, type PlacedMessage } from './messages';
import { NotSentError } from './idempotent-producer';
import { errorText, outcomeUnknown, positionsOf, stored, type AppendQueue, type Pending, type Session } from './append-batch';

/*
 * The Kafka appender's `idempotent` mode: a batch is one produce request, and when its answer is lost the
 * batch is confirmed, sent again with the same sequence numbers beside the queue, until the broker
 * acknowledges it or nobody waits any more. Why that stores it exactly once: docs/architecture.md → The
 * Kafka appender.
 */

/**
 * One produce request; its outcome, when the answer was lost, confirmed by sending the same batch again.
 * From the moment the request may go out, a deadline means outcome_unknown, never unavailable.
 */
export async function sendConfirmed(q: AppendQueue, session: Session, live: Pending[], messages: PlacedMessage[], started: number): Promise<void> {
  for (const p of live) p.phase = 'committing';
  let acks: BaseOffsets;
  try {
    q.counts.requests += 1;
    acks = await session.session.send(messages);
  } catch (err) {
    if (err instanceof NotSentError) {
      q.metrics?.transaction('aborted', performance.now() - started, live.length);
      for (const p of live) q.settle(p, unavailable(`Kafka did not take the write: ${errorText(err)}`));
      q.discard(session);
      return;
    }
    // It may be stored. The queue goes on with a new producer; this one is kept to confirm the batch.
    q.retire(session);
    const confirmation: Promise<void> = confirm(q, session, live, messages, started)
      .catch((e: unknown) => {
        // A bug rather than an outage; whether the batch is stored is not known.
        for (const p of live) q.settle(p, outcomeUnknown(`The event appender failed: ${errorText(e)}`));
      })
      .finally(() => q.confirming.delete(confirmation));
    q.confirming.add(confirmation);
    return;
  }
  acknowledge(q, session, live, acks, started);
}

/** Sends the batch again until the broker answers (stored once: it dedupes by sequence) or nobody waits any more. */
async function confirm(q: AppendQueue, session: Session, live: readonly Pending[], messages: PlacedMessage[], started: number): Promise<void> {
  let wait = q.commitRetryMs;
  try {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 1000);
      if (live.every((p) => p.settled)) {
        // Told outcome_unknown at their deadlines. Nothing is sent on this producer again.
        q.metrics?.transaction('unknown', performance.now() - started, live.length);
        return;
      }
      q.counts.commitRetries += 1;
      let acks: BaseOffsets;
      try {
        acks = await session.session.send(messages, true);
      } catch {
        // Not answered again (or, NotSentError, not sent this time; an earlier attempt may have been).
        if (q.closing()) {
          // Shutting down: nobody is left to answer (the service's calls are drained or cancelled first).
          q.metrics?.transaction('unknown', performance.now() - started, live.length);
          for (const p of live) q.settle(p, outcomeUnknown('Kafka did not confirm the write before the appender closed; it may or may not be stored'));
          return;
        }
        continue;
      }
      acknowledge(q, session, live, acks, started);
      return;
    }
  } finally {
    await session.session.disconnect().catch(() => undefined);
  }
}

/** The broker stored the batch; each append is told where its events are. */
function acknowledge(q: AppendQueue, session: Session, live: readonly Pending[], acks: BaseOffsets, started: number): void {
  const positions = positionsOf(session, live, acks);
  if (positions === undefined) {
    // Stored, by the answer, but where cannot be told: a broken answer, not an outage.
    q.metrics?.transaction('unknown', performance.now() - started, live.length);
    for (const p of live) q.settle(p, outcomeUnknown('Kafka acknowledged the request without the partition of a write'));
    return;
  }
  q.metrics?.transaction('committed', performance.now() - started, live.length);
  stored(q, live, positions);
}

import { unavailable, type BaseOffsets, type PlacedMessage } from './messages';
import { CommitNotProcessedError, TransactionAbortedError, TransactionFencedError } from './transactional-producer';
import { errorText, outcomeUnknown, positionsOf, stored, type AppendQueue, type Pending, type Session } from './append-batch';

/*
 * The Kafka appender's `transactional` mode: a batch is one transaction, its appends told their positions
 * once the commit is confirmed, `unavailable` when the commit was never sent or was refused, and
 * `outcome_unknown` only when no retry of a sent commit could tell. Why: docs/architecture.md → The Kafka
 * appender.
 */

/** What a transaction's commit came to. */
type CommitOutcome = 'committed' | 'aborted' | 'unknown';

export async function sendTransaction(q: AppendQueue, session: Session, live: Pending[], messages: PlacedMessage[], started: number): Promise<void> {
  let acks: BaseOffsets;
  try {
    q.counts.requests += 1;
    acks = await session.session.send(messages);
  } catch (err) {
    q.metrics?.transaction('aborted', performance.now() - started, live.length);
    await abandon(q, session, live, `Kafka did not take the write: ${errorText(err)}`, true);
    return;
  }
  const positions = positionsOf(session, live, acks);
  if (positions === undefined) {
    q.metrics?.transaction('aborted', performance.now() - started, live.length);
    await abandon(q, session, live, 'Kafka acknowledged the request without the partition of a write', false);
    return;
  }
  // The last moment to back out: an append whose deadline came while sending was told `unavailable`,
  // which holds only if this transaction is never committed.
  if (live.some((p) => p.settled)) {
    q.metrics?.transaction('aborted', performance.now() - started, live.length);
    await abandon(q, session, live, 'Kafka did not acknowledge a write of the same transaction in time', false);
    return;
  }
  for (const p of live) p.phase = 'committing';
  const outcome = await commit(q, session, live);
  q.metrics?.transaction(outcome, performance.now() - started, live.length);
  if (outcome === 'committed') {
    stored(q, live, positions);
    return;
  }
  for (const p of live) {
    if (outcome === 'aborted') {
      q.settle(p, unavailable('Kafka aborted the transaction of the write; nothing of it is stored'));
    } else {
      q.settle(p, outcomeUnknown('Kafka did not confirm the commit of the write; it may or may not be stored'));
    }
  }
}

/**
 * Commits, retrying while the answer is lost or the coordinator is busy, until the outcome is known or
 * every append of the transaction has been told outcome_unknown at its deadline.
 */
async function commit(q: AppendQueue, session: Session, live: readonly Pending[]): Promise<CommitOutcome> {
  let unanswered = false; // an attempt got no answer: it may have reached the coordinator
  let wait = q.commitRetryMs;
  for (let attempt = 0; ; attempt++) {
    if (attempt > 0) {
      q.counts.commitRetries += 1;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 1000);
    }
    try {
      await session.session.commit();
      return 'committed';
    } catch (err) {
      if (err instanceof TransactionAbortedError) return 'aborted';
      if (err instanceof TransactionFencedError) {
        // No commit of ours got to the coordinator before the fence: it can only have aborted. Otherwise
        // the earlier attempt may have committed first, and no retry can tell any more.
        q.discard(session);
        return unanswered ? 'unknown' : 'aborted';
      }
      if (!(err instanceof CommitNotProcessedError)) unanswered = true;
    }
    if (live.every((p) => p.settled)) {
      // Nobody waits any more. The next producer's initialisation settles the transaction (completes a
      // commit the coordinator received, aborts otherwise) before anything else is written.
      q.discard(session);
      return 'unknown';
    }
  }
}

/** Aborts the transaction (its commit was never sent) and tells its appends `unavailable`. */
async function abandon(q: AppendQueue, session: Session, live: readonly Pending[], reason: string, discard: boolean): Promise<void> {
  for (const p of live) q.settle(p, unavailable(reason));
  // After a failed send the producer's sequence numbers may disagree with the broker's: replace it.
  if (discard) {
    q.discard(session);
    return;
  }
  try {
    await session.session.abort();
  } catch {
    // The next initialisation of the transactional id aborts it (docs/architecture.md → The Kafka appender).
    q.discard(session);
  }
}

import { decodeAccountEvent, encodeAccountEvent, EventDecodeError, type StreamPosition } from '@pushbase/contracts';
import type { AccountEvent } from '@pushbase/domain';
import type { KafkaEventAppender } from './appender';
import type { MessageDecoder } from './consumer';
import { offsetNumber, PoisonEventError, type OutgoingMessage } from './messages';

/*
 * The accounts topic: account and key events (services/domain/src/accounts.ts), one per message, apart
 * from the dataset events because they have another reader (whoever resolves keys) and no dataset.
 *   key   = the account, so one account's events share a partition and keep their order (the fold is
 *           order-dependent per account: a key revoked before it was created stays live);
 *   value = the account event's envelope (services/contracts/src/account-codec.ts).
 * Created by `pushbase migrate` as the dataset topic is: no retention, no compaction — the topic is the
 * only place accounts and keys live, and replay rebuilds every store of them from it.
 * Its name: PUSHBASE_KAFKA_ACCOUNTS_TOPIC, by default the dataset topic's name + `.accounts`.
 */

/** The accounts topic of a dataset topic, when PUSHBASE_KAFKA_ACCOUNTS_TOPIC is not set. */
export const defaultAccountsTopic = (datasetTopic: string): string => `${datasetTopic}.accounts`;

/**
 * Partitions of a new accounts topic. Account events are rare (an operator's commands), so one partition
 * is plenty; the message key still keeps every account on one partition should an operator create it wider.
 */
export const ACCOUNTS_TOPIC_PARTITIONS = 1;

export function accountMessage(event: AccountEvent): OutgoingMessage {
  return { key: event.account, value: Buffer.from(encodeAccountEvent(event), 'utf8') };
}

/** An account event with where it sits in the accounts topic. */
export interface PositionedAccountEvent {
  readonly event: AccountEvent;
  readonly position: StreamPosition;
}

/** The accounts topic's decoder for KafkaEventConsumer: a message that is not a well-formed account event of its key is poison. */
export const decodeAccountMessage: MessageDecoder<PositionedAccountEvent> = (topic, partition, message) => {
  const poison = (reason: string): PoisonEventError => new PoisonEventError(topic, partition, message.offset, reason);
  const offset = offsetNumber(message.offset);
  if (message.value === null) throw poison('the message has no value');
  let event: AccountEvent;
  try {
    event = decodeAccountEvent(message.value);
  } catch (e) {
    if (e instanceof EventDecodeError) throw poison(e.message);
    throw e;
  }
  if (message.key === null || message.key.toString('utf8') !== event.account) {
    throw poison(`its key ${message.key === null ? 'is missing' : JSON.stringify(message.key.toString('utf8'))}, not the account ${JSON.stringify(event.account)}`);
  }
  return { event, position: { partition, offset } };
};

/**
 * The write half of the accounts topic: a transactional KafkaEventAppender pointed at it (so `unavailable`
 * means "never stored" and `outcome_unknown` "may be stored", exactly as for dataset events), resolving
 * with each event's position — what the Redis account store orders its applies by.
 */
export class KafkaAccountLog {
  constructor(private readonly appender: Pick<KafkaEventAppender, 'appendMessagesAt' | 'close'>) {}

  append(events: readonly AccountEvent[]): Promise<StreamPosition[]> {
    return this.appender.appendMessagesAt(events.map(accountMessage));
  }

  close(): Promise<void> {
    return this.appender.close();
  }
}

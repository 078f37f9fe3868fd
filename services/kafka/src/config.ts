import { z } from 'zod';
import { blankToUndefined, kafkaName, optionalKafkaName } from '@pushbase/config';
import { parseBrokers } from './connection';

/* The Kafka variables of the services that read the event topic, read the same way in each (docs/configuration.md). */

export const kafkaEnv = {
  PUSHBASE_KAFKA_BROKERS: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('127.0.0.1:9092')
      .transform((list, ctx) => {
        try {
          return parseBrokers(list);
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : String(e) });
          return z.NEVER;
        }
      }),
  ),
  // Kafka's own rule for names, so a typo fails at start and not in the first fetch.
  PUSHBASE_KAFKA_TOPIC: kafkaName('PUSHBASE_KAFKA_TOPIC', 'pushbase.dataset-events'),
};

/** The accounts topic (account-log.ts); unset: PUSHBASE_KAFKA_TOPIC + ".accounts" (defaultAccountsTopic). */
export const accountsTopicEnv = { PUSHBASE_KAFKA_ACCOUNTS_TOPIC: optionalKafkaName('PUSHBASE_KAFKA_ACCOUNTS_TOPIC') };

/**
 * The projector's consumer group: the projector's own, and where records and schema learn how far it has
 * folded the log (an Idempotency-Key attempt of unknown outcome is settled from it).
 */
export const projectorGroupEnv = { PUSHBASE_PROJECTOR_GROUP: kafkaName('PUSHBASE_PROJECTOR_GROUP', 'pushbase-projector') };

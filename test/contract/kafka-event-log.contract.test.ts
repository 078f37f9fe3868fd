import { KafkaEventLog } from '@pushbase/kafka';
import { describeEventLogContract } from './event-log.contract';
import { deleteTopics, randomName, requireKafka, testAdmin, testConnection } from '../helpers/kafka';

/*
 * The EventLog contract against the shared Kafka: a random topic of three partitions per test (so the
 * suite's datasets spread over partitions), deleted afterwards. A "reopen" is a new process's log on the
 * same topic: it replays the topic from the beginning, as a restarted file log replays its file.
 */

beforeAll(requireKafka);

describeEventLogContract('KafkaEventLog (3 partitions)', () => {
  const topic = randomName('pushbase-contract');
  const make = (): KafkaEventLog => new KafkaEventLog({ connection: testConnection(), topic, partitions: 3 });
  return Promise.resolve({
    log: make(),
    reopen: () => Promise.resolve(make()),
    cleanup: async () => {
      const admin = await testAdmin();
      try {
        await deleteTopics(admin, [topic]);
      } finally {
        await admin.disconnect();
      }
    },
  });
});

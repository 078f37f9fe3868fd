/*
 * setupFiles of the int-kafka-3.9 jest project: the Kafka suites against the second, 3.9.x broker that
 * jest's global setup starts when that project is selected (or none is). Each suite reads
 * PUSHBASE_KAFKA_BROKERS (test/helpers/kafka.ts, and the services they spawn), so pointing it at that broker
 * here, before the suite is loaded, runs it unchanged; this file's copy of process.env is the suite's own.
 * With no such broker the suite fails here: it never runs against the 4.x broker instead.
 */
const brokers = process.env.PUSHBASE_TEST_LEGACY_KAFKA_BROKERS;
const version = process.env.PUSHBASE_TEST_LEGACY_KAFKA_VERSION;
if (brokers === undefined || brokers === '' || version === undefined || !version.startsWith('3.9.')) {
  throw new Error(`no 3.9.x Kafka for int-kafka-3.9 (PUSHBASE_TEST_LEGACY_KAFKA_BROKERS=${brokers ?? ''}, version ${version ?? 'unset'}): jest's global setup starts it, run this project through jest`);
}
process.env.PUSHBASE_KAFKA_BROKERS = brokers;
process.env.PUSHBASE_KAFKA_VERSION = version;

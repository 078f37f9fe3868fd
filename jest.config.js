// Tests name their layer: *.unit.test.ts (pure, fast), *.contract.test.ts (one port's suite against each
// adapter), *.int.test.ts (an adapter against real Kafka, ClickHouse, Redis, the filesystem, processes or
// threads), *.e2e.test.ts (the real server over HTTPS).
// `npm test` runs every project; none may be skipped, and a suite that cannot reach its server fails.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] };
// Data directories kept as fixtures hold `.snap` files of their own, which jest would take for obsolete snapshots.
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'], modulePathIgnorePatterns: ['<rootDir>/services/[^/]+/test/fixtures/'] };

// The Kafka suites that run once more in int-kafka-3.9, on a 3.9.x broker, the older line pushbase still
// supports (docs/kafka.md): the Kafka adapter's own (every request kafkajs makes for pushbase: produce in and
// out of transactions, fetch, consumer groups, topics), the event-log contract, and replay, the one user of
// the consumer-group admin requests (offsets fetched and set, groups described and deleted). The services'
// suites built on the adapter add no request of their own and would make the project half as long again
// (220 s against 154 s, measured on the shared 2-core machine).
const kafkaSuites = ['services/kafka/test/*.int.test.ts', 'test/contract/kafka-event-log.contract.test.ts', 'services/projector/test/replay.int.test.ts'];

const clusterE2eSuites = ['datasets', 'read-api', 'geckoboard-client', 'records', 'window', 'auth-and-limits'];

/** @type {import('jest').Config} */
module.exports = {
  // Per-test ceiling; e2e tests start real servers. Unit tests finish far below it.
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/global-setup.js',
  globalTeardown: '<rootDir>/test/global-teardown.js',
  // Tells the global setup which projects have tests in this run (what to start for them).
  testSequencer: '<rootDir>/test/helpers/project-sequencer.js',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/services/**/*.unit.test.ts', '<rootDir>/test/**/*.unit.test.ts'] },
    { ...common, displayName: 'contract', testMatch: ['<rootDir>/services/**/*.contract.test.ts', '<rootDir>/test/**/*.contract.test.ts'] },
    { ...common, displayName: 'int', testMatch: ['<rootDir>/services/**/*.int.test.ts', '<rootDir>/test/**/*.int.test.ts'] },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/**/*.e2e.test.ts'] },
    // The end-to-end suites of test/e2e once more, each TestServer being the four services of
    // `npm run start:distributed` as separate processes (test/helpers/distributed-mode.ts). test/embedded
    // holds the tests about the embedded data directory itself and runs only against `pushbase serve`.
    { ...common, displayName: 'e2e-distributed', testMatch: ['<rootDir>/test/e2e/**/*.e2e.test.ts'], setupFilesAfterEnv: ['<rootDir>/test/helpers/distributed-mode.ts'] },
    // pushbase installed with helm on the single-node Kubernetes cluster of `npm run cluster:up` (deploy/cluster;
    // jest's global setup builds the image and brings it up; docs/cluster.md).
    { ...common, displayName: 'cluster', testMatch: ['<rootDir>/test/k8s/**/*.cluster.test.ts'] },
    // The e2e suites that can run against one shared installation, once more against it (through the
    // gateway's Service; test/helpers/cluster-target.ts). The others restart or kill servers, set what
    // only a server's environment sets, or read a server's files: docs/cluster.md lists them.
    { ...common, displayName: 'e2e-cluster', testMatch: clusterE2eSuites.map((s) => `<rootDir>/test/e2e/${s}.e2e.test.ts`), setupFilesAfterEnv: ['<rootDir>/test/helpers/cluster-mode.ts'] },
    // The Kafka suites once more, on the 3.9.x broker jest's global setup starts beside the 4.x one
    // (PUSHBASE_KAFKA_LEGACY_VERSION, PUSHBASE_KAFKA_LEGACY_BROKERS; test/helpers/legacy-kafka.ts).
    { ...common, displayName: 'int-kafka-3.9', testMatch: kafkaSuites.map((s) => `<rootDir>/${s}`), setupFiles: ['<rootDir>/test/helpers/legacy-kafka.ts'] },
  ],
};

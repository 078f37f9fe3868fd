// Tests name their layer: *.unit.test.ts (pure, fast), *.contract.test.ts (ports against adapters),
// *.int.test.ts (real Kafka, ClickHouse or Redis), *.e2e.test.ts (the real server over HTTPS).
// `npm test` runs every project; none may be skipped, and a suite that cannot reach its server fails.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] };
// Data directories kept as fixtures hold `.snap` files of their own, which jest would take for obsolete snapshots.
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'], modulePathIgnorePatterns: ['<rootDir>/services/[^/]+/test/fixtures/'] };

/** @type {import('jest').Config} */
module.exports = {
  // Per-test ceiling; e2e tests start real servers. Unit tests finish far below it.
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/global-setup.js',
  globalTeardown: '<rootDir>/test/global-teardown.js',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/services/**/*.unit.test.ts', '<rootDir>/test/**/*.unit.test.ts'] },
    { ...common, displayName: 'contract', testMatch: ['<rootDir>/services/**/*.contract.test.ts', '<rootDir>/test/**/*.contract.test.ts'] },
    { ...common, displayName: 'int', testMatch: ['<rootDir>/services/**/*.int.test.ts', '<rootDir>/test/**/*.int.test.ts'] },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/**/*.e2e.test.ts'] },
    // The end-to-end suites of test/e2e once more, each TestServer being the four services of
    // `npm run start:distributed` as separate processes (test/helpers/distributed-mode.ts). test/embedded
    // holds the tests about the embedded data directory itself and runs only against `pushbase serve`.
    { ...common, displayName: 'e2e-distributed', testMatch: ['<rootDir>/test/e2e/**/*.e2e.test.ts'], setupFilesAfterEnv: ['<rootDir>/test/helpers/distributed-mode.ts'] },
  ],
};

// Tests name their layer: *.unit.test.ts (pure, fast), *.contract.test.ts (ports against adapters),
// *.e2e.test.ts (the real server over HTTPS). `npm test` runs every project; none may be skipped.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] };
const common = { transform, testEnvironment: 'node', moduleFileExtensions: ['ts', 'js', 'json'] };

/** @type {import('jest').Config} */
module.exports = {
  // Per-test ceiling; e2e tests start real servers. Unit tests finish far below it.
  testTimeout: 60000,
  globalSetup: '<rootDir>/test/global-setup.js',
  globalTeardown: '<rootDir>/test/global-teardown.js',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/services/**/*.unit.test.ts', '<rootDir>/test/**/*.unit.test.ts'] },
    { ...common, displayName: 'contract', testMatch: ['<rootDir>/services/**/*.contract.test.ts', '<rootDir>/test/**/*.contract.test.ts'] },
    { ...common, displayName: 'e2e', testMatch: ['<rootDir>/test/**/*.e2e.test.ts'] },
  ],
};

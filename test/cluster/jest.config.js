// The single-node cluster's own suite (`npx jest -c test/cluster/jest.config.js`): its global setup brings
// the cluster up (deploy/cluster; built once per machine, tens of minutes cold), the suite checks it and
// ends with `cluster:down` and the host as it was. Not in the main jest.config.js yet: docs/cluster.md says
// how it joins `npm test`.
const transform = { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] };

/** @type {import('jest').Config} */
module.exports = {
  rootDir: '../..',
  displayName: 'cluster',
  testMatch: ['<rootDir>/test/cluster/**/*.cluster.test.ts'],
  transform,
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'json'],
  // As in the main config: fixture folders hold `.snap` files of their own.
  modulePathIgnorePatterns: ['<rootDir>/services/[^/]+/test/fixtures/'],
  testTimeout: 300000,
  globalSetup: '<rootDir>/test/cluster/global-setup.js',
  globalTeardown: '<rootDir>/test/cluster/global-teardown.js',
};

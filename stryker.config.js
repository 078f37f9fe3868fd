// Mutation testing of the pure domain (`npm run test:mutation`): every rule in services/domain/src must be
// pinned by a test that fails when the rule is broken. Not part of `npm test` or CI: a full run takes
// about half an hour on two shared cores. Incremental: a rerun only tests the mutants whose code or
// covering tests changed since the last run (the file below; delete it to start afresh).
const os = require('node:os');
const path = require('node:path');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
module.exports = {
  testRunner: 'jest',
  // Only the domain's unit tests (services/domain/jest.config.js, the same @swc/jest transform as the root):
  // the gateway and e2e suites would cost minutes per mutant and pin nothing the domain tests cannot.
  jest: { projectType: 'custom', configFile: 'services/domain/jest.config.js' },
  // perTest: each mutant runs only the tests that reach it (the jest-runner installs its own environment).
  coverageAnalysis: 'perTest',
  mutate: ['services/domain/src/**/*.ts'],
  // The sandbox needs the domain and the root manifests only (node_modules is linked, not copied).
  ignorePatterns: ['/*', '!/services', '/services/*', '!/services/domain', '!/package.json', '!/tsconfig*.json'],
  // The machine is shared: two workers at most (`--concurrency 1` to be gentler still).
  concurrency: 2,
  timeoutFactor: 3,
  thresholds: { high: 95, low: 90, break: 90 },
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  incremental: true,
  incrementalFile: 'reports/mutation/stryker-incremental.json',
  // The sandbox lives outside the repository: inside it, the root jest would find a second
  // @pushbase/domain package and every suite importing it would fail while a run is under way.
  tempDirName: path.join(os.tmpdir(), 'pushbase-stryker'),
  cleanTempDir: 'always',
};

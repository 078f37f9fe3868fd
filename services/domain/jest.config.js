// The domain's own tests alone: what StrykerJS runs for every mutant (stryker.config.js), and a quick
// `npx jest -c services/domain/jest.config.js` while working on the rules. Same transform as the root.
/** @type {import('jest').Config} */
module.exports = {
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] },
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'json'],
  testMatch: ['<rootDir>/test/**/*.unit.test.ts'],
};

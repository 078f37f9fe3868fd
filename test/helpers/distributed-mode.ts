/*
 * Setup of the jest project e2e-distributed: the same e2e suites, each TestServer being the four services
 * of `npm run start:distributed` (test/helpers/server.ts reads the mode). Four processes start slower than
 * one on a shared 2-core machine, so tests and hooks get more time.
 */
process.env.PUSHBASE_E2E_MODE = 'distributed';
jest.setTimeout(180_000);

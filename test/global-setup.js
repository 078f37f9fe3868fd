// One temporary parent directory per jest run for every test server's data; removed by the teardown,
// so runs leave nothing behind in the system temp directory.
const { mkdtempSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// It also builds dist/pushbase.js, so end-to-end tests always run the code as it is now, as shipped.
const { execFileSync } = require('node:child_process');

// Kafka, ClickHouse and Redis answer before any suite runs (deploy/local/test-services.ts): local
// processes, installed on first use, or containers where a Docker engine is reachable. Their URLs go into
// the environment the test workers inherit; the teardown stops only what this run started.
const tsx = require('tsx/cjs/api');

module.exports = async (globalConfig) => {
  execFileSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'build.js')], { stdio: 'inherit' });
  process.env.PUSHBASE_TEST_TMP = mkdtempSync(path.join(os.tmpdir(), 'pushbase-tests-'));

  // Only the unit project needs no server.
  const selected = globalConfig.selectProjects ?? [];
  if (selected.length > 0 && selected.every((p) => p === 'unit')) return;

  // schemathesis for test/e2e/schemathesis.e2e.test.ts: a pinned Python tool in the project's own
  // virtualenv, installed once (so its minute of pip is never counted in a test's timeout), then instant.
  if (selected.length === 0 || selected.some((p) => p.startsWith('e2e'))) {
    const { ensureSchemathesis } = require('../scripts/ensure-schemathesis.js');
    process.env.PUSHBASE_SCHEMATHESIS_PYTHON = ensureSchemathesis((line) => process.stderr.write(`\npushbase tests: ${line}…\n`)).python;
  }

  const { startTestServices } = tsx.require('../deploy/local/test-services.ts', __filename);
  // Quiet unless slow: only the once-per-machine steps (apt-get, Maven, formatting) are announced.
  const say = (line, kind) => {
    if (kind === 'provision') process.stderr.write(`\npushbase test services: ${line}…\n`);
  };
  const services = await startTestServices(process.env, path.join(__dirname, '..'), say);
  Object.assign(process.env, services.urls);
  globalThis.__pushbaseTestServices = services;
};

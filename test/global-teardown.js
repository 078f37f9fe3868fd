const { rmSync } = require('node:fs');

// The topics, ClickHouse databases and Redis keys of the distributed e2e stacks (test/helpers/stack-names.ts).
const tsx = require('tsx/cjs/api');

module.exports = async () => {
  const dir = process.env.PUSHBASE_TEST_TMP;
  if (dir) {
    const { dropListedStacks } = tsx.require('./helpers/stack-names.ts', __filename);
    await dropListedStacks(dir).catch((e) => process.stderr.write(`pushbase tests: could not remove the distributed stacks' names: ${e instanceof Error ? e.message : String(e)}\n`));
  }
  // Stops only the servers the global setup started; ones that already answered stay up.
  const services = globalThis.__pushbaseTestServices;
  if (services) await services.stop();
  // The cluster (and pushbase on it) only when the global setup started it.
  if (globalThis.__pushbaseClusterStarted) {
    const path = require('node:path');
    const { readClusterConfig } = tsx.require('../deploy/cluster/config.ts', __filename);
    const { down } = tsx.require('../deploy/cluster/cluster.ts', __filename);
    await down(readClusterConfig(process.env, path.join(__dirname, '..')), (line) => process.stderr.write(`pushbase cluster: ${line}\n`));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
};

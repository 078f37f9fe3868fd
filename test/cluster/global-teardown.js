// Stops the cluster when this run started it and the suite's last test did not already (a failed run).
const { rmSync } = require('node:fs');
const path = require('node:path');
const tsx = require('tsx/cjs/api');

module.exports = async () => {
  const { readClusterConfig } = tsx.require('../../deploy/cluster/config.ts', __filename);
  const { down } = tsx.require('../../deploy/cluster/cluster.ts', __filename);
  if (globalThis.__pushbaseClusterStarted) {
    await down(readClusterConfig(process.env, path.join(__dirname, '..', '..')), (line) => process.stderr.write(`pushbase cluster: ${line}\n`));
  }
  if (process.env.PUSHBASE_CLUSTER_TEST_TMP) rmSync(process.env.PUSHBASE_CLUSTER_TEST_TMP, { recursive: true, force: true });
};

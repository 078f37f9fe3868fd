// Brings the cluster up before the suite (building Kubernetes first on a machine that has none), after
// recording what the host looks like, so the suite can tell that neither `up` nor `down` changed it.
const { mkdtempSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tsx = require('tsx/cjs/api');

module.exports = async () => {
  const root = path.join(__dirname, '..', '..');
  const { readClusterConfig } = tsx.require('../../deploy/cluster/config.ts', __filename);
  const { up, healthy } = tsx.require('../../deploy/cluster/cluster.ts', __filename);
  const { hostSnapshot } = tsx.require('./host.ts', __filename);
  const config = readClusterConfig(process.env, root);
  const wasUp = await healthy(config);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pushbase-cluster-test-'));
  const before = path.join(dir, 'host-before.json');
  writeFileSync(before, JSON.stringify(await hostSnapshot()));
  // The bare cluster: this suite checks Kubernetes itself (pushbase on it is test/k8s's).
  await up(config, (line) => process.stderr.write(`\npushbase cluster: ${line}\n`), { pushbase: false });
  process.env.PUSHBASE_CLUSTER_HOST_BEFORE = before;
  process.env.PUSHBASE_CLUSTER_TEST_TMP = dir;
  globalThis.__pushbaseClusterStarted = !wasUp;
};

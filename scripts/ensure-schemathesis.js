#!/usr/bin/env node
// schemathesis (a Python tool, installed from PyPI by pip) for test/e2e/schemathesis.e2e.test.ts, in a
// virtualenv of its own: schemathesis-<hash of test/schemathesis/requirements.txt>/ in the same cache as
// scripts/ensure-helm.js's helm (outside the work tree, so a fresh clone on the same machine reuses it).
// Like ensure-deps.js it is quiet and instant when the virtualenv is already in place; jest's global setup
// calls it.
//
// Every version is pinned (requirements.txt: schemathesis and all it pulls in), so a new release of a
// dependency cannot change what the test checks; editing the file makes a new virtualenv. Two runs may
// provision at once (scripts/tool-cache.js). A virtualenv's console scripts hold their folder's path, so
// the tool runs as `<venv>/bin/python -m schemathesis.cli`, which works from the renamed folder.
//
//   node scripts/ensure-schemathesis.js    installs when missing, prints the interpreter to run it with
//   PUSHBASE_PYTHON=/path/to/python3       the Python to make the virtualenv with (default: python3)
//   PUSHBASE_TOOLS_DIR=/some/dir           cache folder (default: $XDG_CACHE_HOME/pushbase or ~/.cache/pushbase)
'use strict';
const { createHash } = require('node:crypto');
const { existsSync, readFileSync, openSync, closeSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { printOrExit, provisionOnce, tail, toolsDir } = require('./tool-cache.js');

const REQUIREMENTS = path.resolve(__dirname, '..', 'test', 'schemathesis', 'requirements.txt');
/** schemathesis 4 needs Python 3.9 or later; the virtualenv uses whichever python3 is on PATH. */
const MIN_PYTHON = [3, 9];

function pinnedVersion(requirements) {
  const m = /^schemathesis==(\S+)$/m.exec(requirements);
  if (m === null) throw new Error(`${REQUIREMENTS} pins no schemathesis version`);
  return m[1];
}

function run(file, args, log, opts = {}) {
  const fd = openSync(log, 'a');
  try {
    const res = spawnSync(file, args, { stdio: ['ignore', fd, fd], timeout: 15 * 60_000, ...opts });
    if (res.error !== undefined) throw res.error;
    return res.status;
  } finally {
    closeSync(fd);
  }
}

/** A python3 with the venv module, installed from Debian's packages when missing and apt-get is there. */
function findPython(log, say) {
  const probe = `import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (${MIN_PYTHON.join(', ')}) else 3)`;
  const python = process.env.PUSHBASE_PYTHON || 'python3';
  const ok = () => spawnSync(python, ['-c', probe], { stdio: 'ignore' }).status === 0;
  if (ok()) return python;
  if (existsSync('/usr/bin/apt-get') && process.getuid?.() === 0) {
    say('pushbase: installing Debian packages: python3 python3-venv…');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    if (run('/usr/bin/apt-get', ['update'], log, { env }) === 0 && run('/usr/bin/apt-get', ['install', '-y', '--no-install-recommends', 'python3', 'python3-venv'], log, { env }) === 0 && ok()) {
      return python;
    }
  }
  throw new Error(`schemathesis needs ${python} (${MIN_PYTHON.join('.')} or later) with its venv module; install it (Debian: python3 python3-venv) or point PUSHBASE_PYTHON at one${existsSync(log) ? `; ${log} ends:\n${tail(log)}` : ''}`);
}

/**
 * Returns the virtualenv's interpreter and the pinned schemathesis version, creating the virtualenv first
 * when it is missing. `say` announces the slow, once-per-machine steps.
 */
function ensureSchemathesis(say = (line) => process.stderr.write(`${line}\n`)) {
  const requirements = readFileSync(REQUIREMENTS, 'utf8');
  const version = pinnedVersion(requirements);
  const hash = createHash('sha256').update(requirements).digest('hex').slice(0, 16);
  const name = `schemathesis-${hash}`;
  const home = provisionOnce(name, (dir, log) => {
    say(`pushbase: installing schemathesis ${version} from PyPI into ${path.join(toolsDir(), name)} (once per machine; a minute)…`);
    const base = findPython(log, say);
    if (run(base, ['-m', 'venv', dir], log) !== 0) throw new Error(`${base} -m venv failed; ${log} ends:\n${tail(log)}`);
    const venvPython = path.join(dir, 'bin', 'python');
    const pip = ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--no-cache-dir', '-r', REQUIREMENTS];
    if (run(venvPython, pip, log) !== 0) throw new Error(`pip install -r ${REQUIREMENTS} failed; ${log} ends:\n${tail(log)}`);
    const check = spawnSync(venvPython, ['-m', 'schemathesis.cli', '--version'], { encoding: 'utf8' });
    if (check.status !== 0 || !check.stdout.includes(version)) {
      throw new Error(`the new virtualenv does not run schemathesis ${version}: ${check.stdout}${check.stderr}`);
    }
  });
  return { python: path.join(home, 'bin', 'python'), version, home };
}

module.exports = { ensureSchemathesis, REQUIREMENTS };

if (require.main === module) printOrExit(() => ensureSchemathesis().python);

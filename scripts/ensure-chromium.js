#!/usr/bin/env node
// Provides the browser the dataset page's test drives (test/e2e/browser.e2e.test.ts): Debian's `chromium`
// package, installed with apt-get when missing (it is a Debian package like ClickHouse and Redis, and the
// machines here reach Debian's archive but not the hosts browser downloaders use), driven by playwright-core
// through the executable's path. Prints the path on stdout.
//
//   node scripts/ensure-chromium.js     installs when missing, prints the executable's path
//   PUSHBASE_CHROMIUM=/path/to/chrome   use that browser instead (no install)
'use strict';
const { existsSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const { printOrExit } = require('./tool-cache.js');

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

const found = () => CANDIDATES.find((p) => existsSync(p));

/** The browser's path, installing Debian's chromium first when there is none. Throws when it cannot. */
function ensureChromium(log = (line) => process.stderr.write(`${line}\n`)) {
  if (process.env.PUSHBASE_CHROMIUM) {
    if (!existsSync(process.env.PUSHBASE_CHROMIUM)) throw new Error(`PUSHBASE_CHROMIUM=${process.env.PUSHBASE_CHROMIUM} does not exist`);
    return process.env.PUSHBASE_CHROMIUM;
  }
  const have = found();
  if (have !== undefined) return have;
  const apt = ['/usr/bin/apt-get', '/bin/apt-get'].find((p) => existsSync(p));
  if (apt === undefined) throw new Error('no chromium, and no apt-get to install it with: install Chromium and set PUSHBASE_CHROMIUM to its path');
  log('pushbase: installing Debian package chromium (once per machine; a minute or two)…');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', 'chromium']]) {
    const res = spawnSync(apt, args, { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (exit ${res.status}): ${(res.stderr || '').trim().split('\n').slice(-3).join(' / ')}`);
  }
  const installed = found();
  if (installed === undefined) throw new Error('apt-get installed chromium, but no chromium executable was found');
  return installed;
}

module.exports = { ensureChromium };

if (require.main === module) printOrExit(ensureChromium);

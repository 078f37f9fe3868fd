#!/usr/bin/env node
// chDB (ClickHouse in this process) for services/clickhouse/test/current-engine.int.test.ts: the npm
// package pinned by test/chdb/package.json and its lock, installed with npm into the per-machine tool cache
// (scripts/tool-cache.js), not into the project's node_modules. Kept apart because its engine package is
// ~540 MB and published for Linux x64 only, and its other platforms' optional packages cannot be fetched,
// which `npm ci` of the project (and of the image's build stage) would refuse. Jest's global setup calls it.
//
//   node scripts/ensure-chdb.js    installs when missing, prints the folder whose node_modules holds chdb
'use strict';
const { createHash } = require('node:crypto');
const { closeSync, copyFileSync, openSync, readFileSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { printOrExit, provisionOnce, tail } = require('./tool-cache.js');

const PINS = path.resolve(__dirname, '..', 'test', 'chdb');
const FILES = ['package.json', 'package-lock.json'];

function ensureChdb(say = (line) => process.stderr.write(`${line}\n`)) {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error(`chDB's engine is published for Linux x64 only, not ${process.platform}-${process.arch}: run the int tests there`);
  }
  const hash = createHash('sha256');
  for (const f of FILES) hash.update(readFileSync(path.join(PINS, f)));
  const version = JSON.parse(readFileSync(path.join(PINS, 'package.json'), 'utf8')).dependencies.chdb;
  return provisionOnce(`chdb-${hash.digest('hex').slice(0, 16)}`, (dir, log) => {
    say(`pushbase: installing chdb ${version} with npm (once per machine; ~540 MB)…`);
    for (const f of FILES) copyFileSync(path.join(PINS, f), path.join(dir, f));
    const fd = openSync(log, 'a');
    try {
      // `npm install`, not `npm ci`: it skips the optional engine packages of other platforms, which ci refuses.
      const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-save'], { cwd: dir, stdio: ['ignore', fd, fd], timeout: 15 * 60_000 });
      if (npm.error !== undefined || npm.status !== 0) throw new Error(`npm install of chdb ${version} failed; ${log} ends:\n${tail(log)}`);
    } finally {
      closeSync(fd);
    }
    const check = spawnSync(process.execPath, ['-e', `new (require(${JSON.stringify(path.join(dir, 'node_modules', 'chdb'))}).Session)().close()`], { encoding: 'utf8' });
    if (check.status !== 0) throw new Error(`chdb ${version} does not load: ${check.stderr.slice(-2000)}`);
  });
}

module.exports = { ensureChdb };

if (require.main === module) printOrExit(ensureChdb);

#!/usr/bin/env node
// Runs before `npm start` and `npm test` so that a fresh clone needs no separate install step:
// installs exactly what package-lock.json pins (npm ci) when node_modules is missing or was installed
// from another lock file. Quiet and instant when everything is already in place.
'use strict';
const { createHash } = require('node:crypto');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const lock = path.join(root, 'package-lock.json');
const stamp = path.join(root, 'node_modules', '.pushbase-lock-hash');
const hash = createHash('sha256').update(readFileSync(lock)).digest('hex');

if (existsSync(stamp) && readFileSync(stamp, 'utf8') === hash) process.exit(0);

process.stderr.write('pushbase: installing dependencies from package-lock.json (npm ci)…\n');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const res = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
if (res.status !== 0) {
  process.stderr.write(`pushbase: npm ci failed (exit ${res.status}); see the output above\n`);
  process.exit(res.status ?? 1);
}
writeFileSync(stamp, hash);

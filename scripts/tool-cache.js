// The per-machine cache of the tools the tests fetch (outside the work tree, so a fresh clone on the same
// machine reuses them), and the one way a tool gets into it: built in a folder of its own, checked, marked
// complete, then renamed into place, so two runs provisioning at once never see half a tool (a loser uses
// the winner's).
'use strict';
const { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/** $PUSHBASE_TOOLS_DIR, else $XDG_CACHE_HOME/pushbase or ~/.cache/pushbase. */
function toolsDir() {
  if (process.env.PUSHBASE_TOOLS_DIR) return path.resolve(process.env.PUSHBASE_TOOLS_DIR);
  const cache = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(cache, 'pushbase');
}

function tail(file, lines = 30) {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** The build folders and logs of runs killed midway; a live run's are younger than this. */
const STALE_MS = 6 * 3600_000;

function removeStale(home) {
  const parent = path.dirname(home);
  const prefix = `${path.basename(home)}.`;
  for (const f of readdirSync(parent)) {
    if (!f.startsWith(prefix) || !/^\d+\.\d+(\.log)?$/.test(f.slice(prefix.length))) continue;
    const where = path.join(parent, f);
    if (Date.now() - statSync(where).mtimeMs > STALE_MS) rmSync(where, { recursive: true, force: true });
  }
}

/**
 * `<tools>/<name>` once it is complete; otherwise runs `build(folder, log)` into a fresh folder (it throws
 * on failure; `log` is a file it may append to), marks it complete and renames it into place. `name` may
 * hold a slash: its parent folder is made first.
 */
function provisionOnce(name, build) {
  const home = path.join(toolsDir(), name);
  const done = path.join(home, '.complete');
  if (existsSync(done)) return home;
  mkdirSync(path.dirname(home), { recursive: true });
  removeStale(home);
  const mine = `${home}.${process.pid}.${Date.now()}`;
  const log = `${mine}.log`;
  try {
    mkdirSync(mine);
    build(mine, log);
    writeFileSync(path.join(mine, '.complete'), `${new Date().toISOString()}\n`);
    try {
      // A folder left by a run killed before it wrote .complete is incomplete: replace it.
      if (existsSync(home) && !existsSync(done)) rmSync(home, { recursive: true, force: true });
      renameSync(mine, home);
    } catch (err) {
      if (!existsSync(done)) throw err;
    }
  } finally {
    rmSync(mine, { recursive: true, force: true });
  }
  rmSync(log, { force: true });
  return home;
}

/** The command line of an ensure-*.js script: prints what `provide` returns, or the error, and exits 1 then. */
function printOrExit(provide) {
  try {
    process.stdout.write(`${provide()}\n`);
  } catch (e) {
    process.stderr.write(`pushbase: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  }
}

module.exports = { toolsDir, provisionOnce, tail, printOrExit };

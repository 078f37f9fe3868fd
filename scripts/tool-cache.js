// The per-machine cache of the tools the tests fetch (outside the work tree, so a fresh clone on the same
// machine reuses them), and the one way a tool gets into it: built in a folder of its own, checked, marked
// complete, then renamed into place, so two runs provisioning at once never see half a tool (a loser uses
// the winner's).
'use strict';
const { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } = require('node:fs');
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

/**
 * `<tools>/<name>` once it is complete; otherwise runs `build(folder, log)` into a fresh folder (it throws
 * on failure; `log` is a file it may append to), marks it complete and renames it into place.
 */
function provisionOnce(name, build) {
  const tools = toolsDir();
  const home = path.join(tools, name);
  const done = path.join(home, '.complete');
  if (existsSync(done)) return home;
  mkdirSync(tools, { recursive: true });
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

module.exports = { toolsDir, provisionOnce, tail };

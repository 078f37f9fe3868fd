import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sessionIdOf } from '../src/priority';

// yieldCpu changes the priority of the process that calls it, so it runs in a child, never in jest's worker.
const MODULE = path.resolve(__dirname, '../src/priority.ts');

interface ChildReport {
  readonly yielded: { nice: number; autogroup: boolean; problem?: string };
  /** The niceness of every thread of the child afterwards (field 19 of /proc/self/task/<tid>/stat). */
  readonly threadNices: number[];
  readonly autogroupFile: string | null;
}

function runChild(nice: number, detached: boolean): Promise<ChildReport> {
  const script = `
    const { yieldCpu } = require(${JSON.stringify(MODULE)});
    const { readFileSync, readdirSync } = require('node:fs');
    yieldCpu(${nice}).then((yielded) => {
      const threadNices = readdirSync('/proc/self/task').map((tid) => {
        const stat = readFileSync('/proc/self/task/' + tid + '/stat', 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      });
      let autogroupFile = null;
      try { autogroupFile = readFileSync('/proc/self/autogroup', 'utf8').trim(); } catch {}
      process.stdout.write(JSON.stringify({ yielded, threadNices, autogroupFile }));
    });`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { detached, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as ChildReport) : reject(new Error(`child exited ${String(code)}: ${out}`))));
  });
}

const autogroups = ((): boolean => {
  try {
    return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';
  } catch {
    return false;
  }
})();

const ownAutogroup = (): string => (autogroups ? readFileSync('/proc/self/autogroup', 'utf8').trim() : '');

describe('the projector yields the CPU (priority.ts)', () => {
  it('reads the session id past a command name holding spaces and parentheses', () => {
    expect(sessionIdOf('4242 (node) S 1 4242 4240 0 -1 4194560 …')).toBe(4240);
    expect(sessionIdOf('77 (a) b (c)) R 5 77 31337 34816 77 0')).toBe(31337);
  });

  it('raises the niceness of every thread, and its session group’s when it leads its session', async () => {
    // Never below what it inherited (jest may itself run niced).
    const expected = Math.max(7, os.getPriority());
    const report = await runChild(7, true);
    expect(report.yielded.problem).toBeUndefined();
    expect(report.yielded.nice).toBe(expected);
    // Node runs several threads from the start (V8's platform workers, libuv's): all of them yield.
    expect(report.threadNices.length).toBeGreaterThan(1);
    expect(new Set(report.threadNices)).toEqual(new Set([expected]));
    // This machine has autogroups (Linux default); where it has none, there is no group to set.
    expect(report.yielded.autogroup).toBe(autogroups);
    if (autogroups) expect(report.autogroupFile).toMatch(/ nice 7$/);
  });

  it('leaves the group of the session it was started in alone (the shell’s, the supervisor’s)', async () => {
    const before = ownAutogroup();
    try {
      const report = await runChild(9, false);
      expect(report.yielded.nice).toBe(Math.max(9, os.getPriority()));
      expect(report.yielded.autogroup).toBe(false);
      expect(ownAutogroup()).toBe(before);
      expect(before).not.toMatch(/ nice 9$/);
    } finally {
      // Were the leader check broken, jest's own session would stay niced for the rest of the run.
      const nice = / nice (-?\d+)$/.exec(before)?.[1];
      if (nice !== undefined && ownAutogroup() !== before) writeFileSync('/proc/self/autogroup', nice);
    }
  });
});

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { sessionIdOf } from '../src/priority';

// yieldCpu changes the priority of the process that calls it, so it runs in a child, never in jest's worker.
const MODULE = path.resolve(__dirname, '../src/priority.ts');

interface ChildReport {
  readonly yielded: { nice: number; autogroup: boolean; problem?: string };
  readonly autogroupFile: string | null;
}

function runChild(nice: number, detached: boolean): Promise<ChildReport> {
  const script = `
    const { yieldCpu } = require(${JSON.stringify(MODULE)});
    const { readFileSync } = require('node:fs');
    const yielded = yieldCpu(${nice});
    let autogroupFile = null;
    try { autogroupFile = readFileSync('/proc/self/autogroup', 'utf8').trim(); } catch {}
    process.stdout.write(JSON.stringify({ yielded, autogroupFile }));`;
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

  it('raises its own niceness, and its session group’s when it leads its session', async () => {
    const report = await runChild(7, true);
    expect(report.yielded.problem).toBeUndefined();
    expect(report.yielded.nice).toBe(7);
    // This machine has autogroups (Linux default); where it has none, there is no group to set.
    expect(report.yielded.autogroup).toBe(autogroups);
    if (autogroups) expect(report.autogroupFile).toMatch(/ nice 7$/);
  });

  it('leaves the group of the session it was started in alone (the shell’s, the supervisor’s)', async () => {
    const before = ownAutogroup();
    const report = await runChild(9, false);
    expect(report.yielded.nice).toBe(9);
    expect(report.yielded.autogroup).toBe(false);
    expect(ownAutogroup()).toBe(before);
    expect(before).not.toMatch(/ nice 9$/);
  });
});

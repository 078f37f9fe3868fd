import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';

/*
 * The process helpers of deploy/local and deploy/cluster: finding an executable, a step run with its
 * output in a log, Debian packages, a lock folder whose holder's pid is inside it, stopping a pid.
 */

export type Say = (line: string) => void;

export function findExecutable(name: string): string | undefined {
  // Root's PATH usually has the sbin folders, a CI runner's may not (clickhouse-server, iptables, runc live there).
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/local/bin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Alive and not a zombie. What `up` starts outlives it and is reparented to the machine's init, which may
 * reap an exited child only seconds later; an exited process has stopped all the same.
 */
export function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs one slow step to completion, its output appended to a log; fails with the log's tail. */
export class Provisioner {
  constructor(
    readonly logFile: string,
    readonly say: Say,
    /** Where a step runs unless it says otherwise (default: this process's). */
    readonly cwd?: string,
  ) {}

  async run(file: string, args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<void> {
    await mkdir(path.dirname(this.logFile), { recursive: true });
    const log = openSync(this.logFile, 'a');
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(file, args, { cwd: opts.cwd ?? this.cwd, env: opts.env ?? process.env, stdio: ['ignore', log, log] });
        child.on('error', reject);
        child.on('exit', (c) => resolve(c));
      });
      if (code !== 0) throw new Error(`${path.basename(file)} ${args.join(' ')} exited with ${code}; ${this.logFile} ends:\n${tail(this.logFile)}`);
    } finally {
      closeSync(log);
    }
  }
}

/** Installs Debian packages with apt-get; nothing to do for none. */
export async function aptInstall(p: Provisioner, pkgs: readonly string[]): Promise<void> {
  if (pkgs.length === 0) return;
  const apt = findExecutable('apt-get');
  if (apt === undefined) throw new Error(`missing ${pkgs.join(', ')}, and there is no apt-get to install them with: install them yourself`);
  p.say(`installing Debian packages: ${pkgs.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // A fresh machine has no package lists yet.
  await p.run(apt, ['update'], { env });
  await p.run(apt, ['install', '-y', '--no-install-recommends', ...pkgs], { env });
}

export interface LockOptions {
  /** Who holds it, for the line said while waiting: "waiting for <what> (pid <holder>)". */
  readonly what: string;
  readonly say: Say;
  /** How long to wait for a live holder before failing. */
  readonly deadlineMs: number;
}

/**
 * One holder at a time of `lock` (a folder). It appears with its holder's pid already inside (made aside,
 * then renamed into place), so a run killed at any moment leaves a lock whose pid is dead, which the next
 * run takes over.
 */
export async function withLock<T>(lock: string, opts: LockOptions, fn: () => Promise<T>): Promise<T> {
  await mkdir(path.dirname(lock), { recursive: true });
  const mine = `${lock}.${process.pid}.${Date.now()}`;
  await mkdir(mine, { recursive: true });
  await writeFile(path.join(mine, 'pid'), String(process.pid));
  const deadline = Date.now() + opts.deadlineMs;
  let told = false;
  for (;;) {
    try {
      await rename(mine, lock);
      break;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') {
        await rm(mine, { recursive: true, force: true });
        throw err;
      }
      const holder = Number((await readFile(path.join(lock, 'pid'), 'utf8').catch(() => '')).trim());
      // A holder that died leaves a stale lock behind; so does an older version of these scripts killed
      // between making the directory and writing its pid (no pid at all).
      if (!(Number.isInteger(holder) && holder > 0) || !alive(holder)) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) {
        await rm(mine, { recursive: true, force: true });
        throw new Error(`${lock} is held by pid ${holder}`);
      }
      if (!told) opts.say(`waiting for ${opts.what} (pid ${holder})`);
      told = true;
      await sleep(500);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

export interface StopOptions {
  /** How long the process has after `signal` before SIGKILL. */
  readonly graceMs: number;
  readonly signal?: 'SIGTERM' | 'SIGKILL';
  /** Whether the pid is still there: by default running(); alive() waits until it is reaped too. */
  readonly isRunning?: (pid: number) => boolean;
}

/**
 * Sends `signal` (SIGTERM by default) to `pid` and waits until it has stopped; one still running after
 * `graceMs` gets SIGKILL. A pid already gone returns at once.
 */
export async function stopPid(pid: number, name: string, say: Say, opts: StopOptions): Promise<void> {
  const signal = opts.signal ?? 'SIGTERM';
  const isRunning = opts.isRunning ?? running;
  say(`${name}: stopping pid ${pid}${signal === 'SIGKILL' ? ' (SIGKILL)' : ''}`);
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const end = Date.now() + opts.graceMs;
  while (isRunning(pid) && Date.now() < end) await sleep(100);
  if (isRunning(pid)) {
    say(`${name}: pid ${pid} still running after ${opts.graceMs / 1000} s; SIGKILL`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    while (isRunning(pid)) await sleep(50);
  }
}

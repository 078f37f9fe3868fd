import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';

/*
 * Small process helpers of the cluster scripts: running a step with its output in a log, installing Debian
 * packages, a lock folder per task. The same shapes as deploy/local's (a Provisioner that says what it does,
 * a lock whose holder's pid is inside it), kept here so the two scripts change independently.
 */

export type Say = (line: string) => void;

export function findExecutable(name: string): string | undefined {
  // Root's PATH usually has the sbin folders, a CI runner's may not (iptables, runc live there).
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/local/bin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

export function need(name: string): string {
  const found = findExecutable(name);
  if (found === undefined) throw new Error(`${name} not found`);
  return found;
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

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end and collects its output; never throws for a non-zero exit. */
export function capture(file: string, args: readonly string[], opts: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    if (child.stdin !== null) {
      // A command that exits without reading its input must not crash us with EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.input);
    }
  });
}

/** Like capture, but a non-zero exit is an error naming the command and what it printed. */
export async function check(file: string, args: readonly string[], opts: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string } = {}): Promise<string> {
  const r = await capture(file, args, opts);
  if (r.code !== 0) throw new Error(`${path.basename(file)} ${args.join(' ')} exited with ${r.code}: ${(r.stderr || r.stdout).trim().slice(-2000)}`);
  return r.stdout;
}

/** Runs one slow step to completion, its output appended to a log; fails with the log's tail. */
export class Provisioner {
  constructor(
    readonly logFile: string,
    readonly say: Say,
  ) {}

  async run(file: string, args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<void> {
    await mkdir(path.dirname(this.logFile), { recursive: true });
    const log = openSync(this.logFile, 'a');
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        const child = spawn(file, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', log, log] });
        child.on('error', reject);
        child.on('exit', (c) => resolve(c));
      });
      if (code !== 0) throw new Error(`${path.basename(file)} ${args.join(' ')} exited with ${code}; ${this.logFile} ends:\n${tail(this.logFile)}`);
    } finally {
      closeSync(log);
    }
  }
}

/** Debian packages the cluster needs, by a file that tells whether each is installed. */
export const PACKAGES: readonly { readonly file: string; readonly pkg: string }[] = [
  { file: 'containerd', pkg: 'containerd' },
  { file: 'ctr', pkg: 'containerd' },
  { file: 'runc', pkg: 'runc' },
  { file: '/usr/lib/cni/bridge', pkg: 'containernetworking-plugins' },
  { file: 'etcd', pkg: 'etcd-server' },
  { file: 'iptables', pkg: 'iptables' },
  { file: 'conntrack', pkg: 'conntrack' },
  { file: 'socat', pkg: 'socat' },
  { file: '/bin/busybox', pkg: 'busybox-static' },
  { file: 'openssl', pkg: 'openssl' },
  { file: 'nsenter', pkg: 'util-linux' },
  { file: 'ip', pkg: 'iproute2' },
  { file: 'gcc', pkg: 'gcc' },
  { file: '/usr/lib/x86_64-linux-gnu/libc.a', pkg: 'libc6-dev' },
];

export async function aptInstallMissing(p: Provisioner): Promise<void> {
  const missing = [...new Set(PACKAGES.filter((x) => (x.file.startsWith('/') ? !existsSync(x.file) : findExecutable(x.file) === undefined)).map((x) => x.pkg))];
  if (missing.length === 0) return;
  const apt = findExecutable('apt-get');
  if (apt === undefined) throw new Error(`missing ${missing.join(', ')}, and there is no apt-get to install them with: install them yourself`);
  p.say(`installing Debian packages: ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // A fresh machine has no package lists yet. Debian's etcd and containerd packages would start their
  // services where an init system runs; none does here, and the cluster starts its own copies anyway.
  await p.run(apt, ['update'], { env });
  await p.run(apt, ['install', '-y', '--no-install-recommends', ...missing], { env });
}

/**
 * One holder at a time of `lock` (a folder). It appears with its holder's pid already inside (made aside,
 * then renamed into place), so a run killed at any moment leaves a lock whose pid is dead, which the next
 * run takes over.
 */
export async function withLock<T>(lock: string, what: string, say: Say, deadlineMs: number, fn: () => Promise<T>): Promise<T> {
  await mkdir(path.dirname(lock), { recursive: true });
  const mine = `${lock}.${process.pid}.${Date.now()}`;
  await mkdir(mine, { recursive: true });
  await writeFile(path.join(mine, 'pid'), String(process.pid));
  const deadline = Date.now() + deadlineMs;
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
      if (!(Number.isInteger(holder) && holder > 0) || !alive(holder)) {
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) {
        await rm(mine, { recursive: true, force: true });
        throw new Error(`${lock} is held by pid ${holder}`);
      }
      if (!told) say(`waiting for ${what} (pid ${holder})`);
      told = true;
      await sleep(1000);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

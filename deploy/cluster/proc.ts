import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { aptInstall, findExecutable, type Provisioner } from '../proc';

/*
 * The cluster scripts' own process helpers (capturing a command's output, the Debian packages the cluster
 * needs); the ones deploy/local shares live in deploy/proc.ts.
 */

export function need(name: string): string {
  const found = findExecutable(name);
  if (found === undefined) throw new Error(`${name} not found`);
  return found;
}

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
  // Debian's etcd and containerd packages would start their services where an init system runs; none does
  // here, and the cluster starts its own copies anyway.
  await aptInstall(p, [...new Set(PACKAGES.filter((x) => (x.file.startsWith('/') ? !existsSync(x.file) : findExecutable(x.file) === undefined)).map((x) => x.pkg))]);
}

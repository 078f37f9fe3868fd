import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';

/*
 * What of the host a cluster could change if it escaped its namespaces: links, iptables rules, mounts, the
 * sysctls the kubelet rewrites, named network namespaces, pod cgroups. Taken before `up`, while up, and
 * after `down`; all must be equal.
 */

const run = promisify(execFile);

/** The sysctls the kubelet sets for the whole machine when it runs on the host itself. */
export const KUBELET_SYSCTLS = ['vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/panic', 'kernel/panic_on_oops', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes'] as const;

export interface HostSnapshot {
  readonly links: string[];
  /** iptables-save and ip6tables-save, without the comment lines (timestamps) and the packet counters. */
  readonly iptables: string[];
  readonly iptablesLines: number;
  readonly sysctls: Record<string, string>;
  readonly mountPoints: string[];
  readonly netns: string[];
  readonly podCgroups: string[];
}

function sbin(name: string): string {
  for (const d of ['/usr/sbin', '/sbin', '/usr/bin', '/bin']) if (existsSync(path.join(d, name))) return path.join(d, name);
  return name;
}

/**
 * Where the cluster's components mount things when they run on a host (containerd's snapshots and shm under
 * /run and /var/lib, the kubelet's volumes, CNI's network namespaces under /run/netns, the namespace's own
 * tmpfs, hosts, resolv.conf and sysctl files), and the cluster's folder. Mounts elsewhere belong to other
 * programs sharing the machine (an image builder's storage, say) and come and go on their own.
 */
function clusterCouldMount(mountPoint: string): boolean {
  const cluster = path.resolve(process.env.PUSHBASE_CLUSTER_DIR ?? path.join(__dirname, '..', '..', '.cluster'));
  return ['/run', '/var', '/etc', '/proc', '/sys', '/tmp', cluster].some((p) => mountPoint === p || mountPoint.startsWith(`${p}/`));
}

export async function hostSnapshot(): Promise<HostSnapshot> {
  const links = (await run(sbin('ip'), ['-o', 'link', 'show'])).stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.split(':')[1]!.trim().replace(/@.*$/, ''))
    .sort();
  const iptables: string[] = [];
  for (const cmd of ['iptables-save', 'ip6tables-save']) {
    const out = (await run(sbin(cmd), [])).stdout;
    iptables.push(...out.split('\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.replace(/\[\d+:\d+\]/g, '[0:0]')));
  }
  const sysctls = Object.fromEntries(KUBELET_SYSCTLS.map((s) => [s, readFileSync(`/proc/sys/${s}`, 'utf8').trim()]));
  const mountPoints = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(' ')[4]!)
    .filter(clusterCouldMount)
    .sort();
  const netns = (await run(sbin('ip'), ['netns', 'list'])).stdout.split('\n').filter((l) => l.trim() !== '').sort();
  const podCgroups = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => / - cgroup2? /.test(l))
    .map((l) => path.join(l.split(' ')[4]!, 'kubepods'))
    .filter((p) => existsSync(p));
  return { links, iptables, iptablesLines: iptables.length, sysctls, mountPoints, netns, podCgroups };
}

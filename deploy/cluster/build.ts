import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import * as path from 'node:path';
import { COREDNS_VERSION, KUBERNETES_VERSION } from './config';
import { findExecutable, Provisioner, withLock, type Say } from '../proc';
import { check } from './proc';

/*
 * Kubernetes and CoreDNS built from source through Go's module proxy, once per machine: release binaries
 * are downloads from hosts these machines cannot reach, the module proxy is reachable. The result is kept
 * under ~/.cache/pushbase (never in the work tree) and skipped when present; a lock folder keeps two
 * builders from compiling the same thing at once, and each build goes to a folder of its own renamed into
 * place at the end, so a reader never sees half a set.
 *
 * `go install k8s.io/kubernetes/cmd/...@vX` is refused: k8s.io/kubernetes' go.mod replaces its ~31 staging
 * modules (k8s.io/api, client-go, …) with folders of its own tree. A module of ours requires it and replaces
 * each of those by the published staging module of the same release (v0.<minor>.<patch>), the list read
 * from the module's own go.mod, so it follows every release without a hand-kept copy.
 */

export const KUBE_COMMANDS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy', 'kubectl'] as const;
export type KubeCommand = (typeof KUBE_COMMANDS)[number];

export interface Binaries {
  readonly dir: string;
  readonly kube: Record<KubeCommand, string>;
  readonly coredns: string;
  /** The static pause binary of the sandbox image. */
  readonly pause: string;
}

export function binariesIn(cacheDir: string): Binaries {
  const dir = path.join(cacheDir, `kubernetes-${KUBERNETES_VERSION}`);
  const kube = Object.fromEntries(KUBE_COMMANDS.map((c) => [c, path.join(dir, 'bin', c)])) as Record<KubeCommand, string>;
  return { dir, kube, coredns: path.join(dir, 'bin', 'coredns'), pause: path.join(dir, 'bin', 'pause') };
}

function goCommand(): string {
  if (process.env.GO !== undefined && process.env.GO !== '') return process.env.GO;
  return findExecutable('go') ?? (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go');
}

/** v1.34.4 → the staging modules' v0.34.4. */
export function stagingVersion(kube: string): string {
  const m = /^v1\.(\d+)\.(\d+)$/.exec(kube);
  if (m === null) throw new Error(`not a Kubernetes release version: ${kube}`);
  return `v0.${m[1]}.${m[2]}`;
}

/** The staging modules a k8s.io/kubernetes go.mod replaces with folders of its own tree. */
export function stagingModules(goMod: string): string[] {
  const block = /^replace \(\n([\s\S]*?)^\)/m.exec(goMod);
  if (block === null) throw new Error('k8s.io/kubernetes go.mod has no replace block');
  const mods = [...block[1]!.matchAll(/^\s*(\S+)\s+=>\s+\.\/staging\//gm)].map((m) => m[1]!);
  if (mods.length === 0) throw new Error('k8s.io/kubernetes go.mod replaces no staging module');
  return mods;
}

/** What hack/lib/version.sh stamps into a release build, so the components report their real version. */
export function versionLdflags(kube: string): string {
  const m = /^v(\d+)\.(\d+)\./.exec(kube);
  if (m === null) throw new Error(`not a Kubernetes release version: ${kube}`);
  const set = (pkg: string, values: Record<string, string>): string[] => Object.entries(values).map(([k, v]) => `-X ${pkg}.${k}=${v}`);
  const values = { gitVersion: kube, gitMajor: m[1]!, gitMinor: m[2]!, gitTreeState: 'clean', buildDate: '1970-01-01T00:00:00Z' };
  return ['-s', '-w', ...set('k8s.io/component-base/version', values), ...set('k8s.io/client-go/pkg/version', values)].join(' ');
}

/** The binaries, building whatever the cache lacks. Returns at once when all are present. */
export async function ensureBinaries(cacheDir: string, say: Say): Promise<Binaries> {
  const bins = binariesIn(cacheDir);
  const complete = (): boolean => [...Object.values(bins.kube), bins.coredns, bins.pause].every((f) => existsSync(f));
  if (complete()) return bins;
  return withLock(`${bins.dir}.lock`, { what: 'another Kubernetes build', say, deadlineMs: 3 * 60 * 60_000 }, async () => {
    if (complete()) return bins; // built by the holder we waited for
    const work = `${bins.dir}.build-${process.pid}`;
    await rm(work, { recursive: true, force: true });
    await mkdir(path.join(work, 'bin'), { recursive: true });
    const p = new Provisioner(path.join(cacheDir, `kubernetes-${KUBERNETES_VERSION}.build.log`), say);
    const t0 = Date.now();
    const cpu0 = childCpuSeconds();
    say(`building Kubernetes ${KUBERNETES_VERSION} and CoreDNS ${COREDNS_VERSION} from source at nice 19 (once per machine; tens of minutes), log ${p.logFile}`);
    try {
      await buildKubernetes(work, p, say);
      await buildCoreDNS(work, p, say);
      await buildPause(work, p, say);
      await rm(bins.dir, { recursive: true, force: true });
      await rm(path.join(work, 'src'), { recursive: true, force: true });
      await rename(work, bins.dir);
    } catch (e) {
      await rm(work, { recursive: true, force: true });
      throw e;
    }
    const wall = (Date.now() - t0) / 1000;
    say(`built in ${(wall / 60).toFixed(1)} min wall, ${((childCpuSeconds() - cpu0) / 60).toFixed(1)} min CPU; ${bins.dir}`);
    return bins;
  });
}

/** CPU seconds (user + system) of this process's waited-for children: the compilers. */
function childCpuSeconds(): number {
  // Fields 16 and 17 of /proc/self/stat (cutime, cstime), in clock ticks (100 a second on Linux).
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

const nice = (args: readonly string[]): [string, string[]] => {
  const n = findExecutable('nice');
  return n === undefined ? [args[0]!, args.slice(1)] : [n, ['-n', '19', ...args]];
};

async function buildKubernetes(work: string, p: Provisioner, say: Say): Promise<void> {
  const go = goCommand();
  const src = path.join(work, 'src');
  await mkdir(src, { recursive: true });
  const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod', GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local' };
  await writeFile(path.join(src, 'go.mod'), `module pushbase.local/kubernetes-build\n\ngo 1.24\n\nrequire k8s.io/kubernetes ${KUBERNETES_VERSION}\n`);
  const info = JSON.parse(await check(go, ['mod', 'download', '-json', `k8s.io/kubernetes@${KUBERNETES_VERSION}`], { cwd: src, env })) as { GoMod?: string; Error?: string };
  if (info.GoMod === undefined) throw new Error(`go mod download k8s.io/kubernetes@${KUBERNETES_VERSION}: ${info.Error ?? 'no go.mod'}`);
  const staging = stagingVersion(KUBERNETES_VERSION);
  const replaces = stagingModules(readFileSync(info.GoMod, 'utf8')).map((m) => `\t${m} => ${m} ${staging}\n`);
  await writeFile(path.join(src, 'go.mod'), `module pushbase.local/kubernetes-build\n\ngo 1.24\n\nrequire k8s.io/kubernetes ${KUBERNETES_VERSION}\n\nreplace (\n${replaces.join('')})\n`);
  // The tags and flags of kubernetes' own hack/lib/golang.sh for a static release build.
  const ldflags = versionLdflags(KUBERNETES_VERSION);
  for (const cmd of KUBE_COMMANDS) {
    const t0 = Date.now();
    say(`go build ${cmd}`);
    const [file, args] = nice([go, 'build', '-trimpath', '-tags=selinux,notest,grpcnotrace', '-ldflags', ldflags, '-o', path.join(work, 'bin', cmd), `k8s.io/kubernetes/cmd/${cmd}`]);
    await p.run(file, args, { cwd: src, env });
    say(`${cmd} built in ${((Date.now() - t0) / 60_000).toFixed(1)} min`);
  }
}

async function buildCoreDNS(work: string, p: Provisioner, say: Say): Promise<void> {
  const t0 = Date.now();
  say(`go install github.com/coredns/coredns@${COREDNS_VERSION}`);
  const [file, args] = nice([goCommand(), 'install', '-trimpath', '-ldflags', '-s -w', `github.com/coredns/coredns@${COREDNS_VERSION}`]);
  await p.run(file, args, { cwd: os.tmpdir(), env: { ...process.env, CGO_ENABLED: '0', GOBIN: path.join(work, 'bin'), GOFLAGS: '', GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local' } });
  say(`coredns built in ${((Date.now() - t0) / 60_000).toFixed(1)} min`);
}

/** The sandbox ("pause") container's program: the C file the release ships, linked statically as upstream does. */
async function buildPause(work: string, p: Provisioner, say: Say): Promise<void> {
  const info = JSON.parse(await check(goCommand(), ['mod', 'download', '-json', `k8s.io/kubernetes@${KUBERNETES_VERSION}`], { cwd: path.join(work, 'src') })) as { Dir?: string };
  if (info.Dir === undefined) throw new Error(`k8s.io/kubernetes@${KUBERNETES_VERSION} has no source folder in the module cache`);
  const gcc = findExecutable('gcc');
  if (gcc === undefined) throw new Error('gcc not found (the pause program is C)');
  say('gcc -static pause.c');
  await p.run(gcc, ['-Os', '-Wall', '-Werror', '-static', `-DVERSION=${KUBERNETES_VERSION}-pushbase`, '-o', path.join(work, 'bin', 'pause'), path.join(info.Dir, 'build', 'pause', 'linux', 'pause.c')]);
  await p.run(findExecutable('strip') ?? 'strip', [path.join(work, 'bin', 'pause')]);
}

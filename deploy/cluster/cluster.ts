import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readlinkSync, rmdirSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import * as https from 'node:https';
import * as net from 'node:net';
import * as path from 'node:path';
import { ensureBinaries, type Binaries } from './build';
import { COREDNS_IMAGE, DEPS_IP, KUBERNETES_VERSION, NODE_BRIDGE, NODE_IP, NODE_NAME, PAUSE_IMAGE, type ClusterConfig } from './config';
import { buildImageArchive } from './images';
import { apiServerArgs, cniConfig, containerdConfig, controllerManagerArgs, coreDnsObjects, etcdArgs, kubeletConfig, kubeProxyConfig, schedulerArgs } from './manifests';
import { ensurePki, kubeconfig, type Pki } from './pki';
import { forgetDeps, installPushbase, type ClusterHands, type Endpoints } from './pushbase';
import { alive, Provisioner, running, sleep, stopPid, tail, withLock, type Say } from '../proc';
import { aptInstallMissing, capture, check, need } from './proc';

/*
 * A real single-node Kubernetes cluster (etcd, the control plane, containerd + runc, the kubelet,
 * kube-proxy, CoreDNS) inside one private mount + network namespace held open by a `holder` process.
 * Every component is started with `nsenter -t <holder> -m -n`, so:
 *   - /run, /var/lib and /var/log inside are fresh tmpfs: containerd's images, etcd's data and the pods'
 *     logs never touch the host's folders, and an `up` always starts from an empty cluster;
 *   - interfaces, routes and iptables rules (kube-proxy's, CNI's) live in the namespace's own network
 *     stack, which has no link out: pod traffic cannot leave the machine;
 *   - the few /proc/sys files the kubelet rewrites for the whole machine (vm.overcommit_memory,
 *     kernel.panic, …) are covered inside the namespace by files of ours holding the values it wants.
 * The host reaches the API server through two socat processes: one inside listening on a unix socket in
 * .cluster/run, one on a host loopback port connecting to it.
 *
 * `down` stops only what `up` recorded, by pid (and, for what containerd started — shims, containers —
 * by membership of our namespace or of the kubelet's pod cgroups), removes the pod cgroups, ends the
 * holder (the namespace and its mounts go with it) and stops the host-side socat.
 */

interface Recorded {
  readonly name: string;
  readonly pid: number;
  /** 'ns': runs inside the holder's namespaces; 'host': the host-side socat. */
  readonly side: 'ns' | 'host';
}

interface State {
  readonly holder: { readonly pid: number; readonly mntNs: string; readonly netNs: string } | undefined;
  readonly processes: Recorded[];
  readonly apiHostPort: number;
}

export interface Layout {
  readonly dir: string;
  readonly state: string;
  readonly lock: string;
  readonly logs: string;
  readonly etc: string;
  readonly cni: string;
  readonly run: string;
  readonly apiSocket: string;
  readonly images: string;
  readonly pki: string;
  readonly kubeconfig: string;
  readonly endpoints: string;
}

export function layout(c: ClusterConfig): Layout {
  const d = c.dir;
  return {
    dir: d,
    state: path.join(d, 'state.json'),
    lock: path.join(d, 'lock'),
    logs: path.join(d, 'logs'),
    etc: path.join(d, 'etc'),
    cni: path.join(d, 'etc', 'cni'),
    run: path.join(d, 'run'),
    apiSocket: path.join(d, 'run', 'apiserver.sock'),
    images: path.join(d, 'images'),
    pki: path.join(d, 'pki'),
    kubeconfig: path.join(d, 'kubeconfig'),
    endpoints: path.join(d, 'endpoints.json'),
  };
}

// ── State ──

function readState(l: Layout): State | undefined {
  try {
    return JSON.parse(readFileSync(l.state, 'utf8')) as State;
  } catch {
    return undefined;
  }
}

async function writeState(l: Layout, s: State): Promise<void> {
  await writeFile(l.state, `${JSON.stringify(s, null, 2)}\n`);
}

function nsOf(pid: number, kind: 'mnt' | 'net'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/${kind}`);
  } catch {
    return undefined;
  }
}

/** The holder, if its pid still is the process that holds the namespace we recorded. */
function liveHolder(s: State | undefined): number | undefined {
  const h = s?.holder;
  if (h === undefined || !running(h.pid)) return undefined;
  return nsOf(h.pid, 'mnt') === h.mntNs ? h.pid : undefined;
}

/**
 * Whether a recorded pid is still the process we started (a reused pid is never signalled). A host-side
 * process is one of our socats: its command line names a socket in `run` (.cluster/run).
 */
function stillOurs(s: State, p: Recorded, run: string): boolean {
  if (!running(p.pid)) return false;
  if (p.side === 'ns') return s.holder !== undefined && nsOf(p.pid, 'mnt') === s.holder.mntNs;
  try {
    return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(`${run}/`);
  } catch {
    return false;
  }
}

// ── Running things inside the namespace ──

class Namespace {
  constructor(
    readonly holder: number,
    private readonly nsenter: string,
  ) {}

  /** argv prefixed so it runs inside the holder's mount and network namespaces (same pid: no fork). */
  argv(file: string, args: readonly string[], cwd?: string): [string, string[]] {
    // Never the host's own namespaces: a mount or a link meant for the cluster would land on the host.
    const [mnt, netns] = [nsOf(this.holder, 'mnt'), nsOf(this.holder, 'net')];
    if (mnt === undefined || netns === undefined || mnt === nsOf(process.pid, 'mnt') || netns === nsOf(process.pid, 'net')) {
      throw new Error(`pid ${this.holder} does not hold a namespace of its own`);
    }
    // Entering a mount namespace moves the working directory to its root unless nsenter is given one.
    return [this.nsenter, ['-t', String(this.holder), '-m', '-n', ...(cwd === undefined ? [] : [`--wd=${cwd}`]), '--', file, ...args]];
  }

  async run(file: string, args: readonly string[], input?: string): Promise<string> {
    const [f, a] = this.argv(file, args);
    return check(f, a, input === undefined ? {} : { input });
  }
}

const ENV = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
  LANG: 'C.UTF-8',
};

/** Starts a long-running process detached, its output to logs/<name>.log; records its pid in the state. */
async function launch(l: Layout, state: State, name: string, side: 'ns' | 'host', argv: [string, string[]]): Promise<Recorded> {
  const logFile = path.join(l.logs, `${name}.log`);
  const fd = openSync(logFile, 'w');
  try {
    const child = spawn(argv[0], argv[1], { cwd: l.dir, env: ENV, detached: true, stdio: ['ignore', fd, fd] });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.unref();
    const rec: Recorded = { name, pid: child.pid!, side };
    state.processes.push(rec);
    await writeState(l, state);
    return rec;
  } finally {
    closeSync(fd);
  }
}

async function waitFor(what: string, deadlineMs: number, ok: () => Promise<boolean>, died: () => string | undefined): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await ok()) return;
    const why = died();
    if (why !== undefined) throw new Error(`${what}: ${why}`);
    if (Date.now() > end) throw new Error(`${what}: not within ${Math.round(deadlineMs / 1000)} s`);
    await sleep(500);
  }
}

function diedUnless(l: Layout, state: State, rec: Recorded): () => string | undefined {
  return () => (running(rec.pid) ? undefined : `${rec.name} exited; ${path.join(l.logs, `${rec.name}.log`)} ends:\n${tail(path.join(l.logs, `${rec.name}.log`))}`);
}

// ── The API server, from the host ──

export interface ApiClient {
  get(p: string): Promise<{ status: number; body: string }>;
}

export function apiClient(c: ClusterConfig): ApiClient {
  const pki = path.join(c.dir, 'pki');
  const agent = (): https.Agent =>
    new https.Agent({
      ca: readFileSync(path.join(pki, 'ca.crt')),
      cert: readFileSync(path.join(pki, 'admin.crt')),
      key: readFileSync(path.join(pki, 'admin.key')),
      keepAlive: false,
    });
  return {
    get: (p) =>
      new Promise((resolve, reject) => {
        const req = https.get({ host: '127.0.0.1', port: c.apiHostPort, path: p, agent: agent(), timeout: 5000 }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (b: Buffer) => chunks.push(b));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        });
        req.on('timeout', () => req.destroy(new Error('timed out')));
        req.on('error', reject);
      }),
  };
}

async function apiReady(c: ClusterConfig): Promise<boolean> {
  try {
    const r = await apiClient(c).get('/readyz');
    return r.status === 200;
  } catch {
    return false;
  }
}

async function nodeReady(c: ClusterConfig): Promise<boolean> {
  try {
    const r = await apiClient(c).get(`/api/v1/nodes/${NODE_NAME}`);
    if (r.status !== 200) return false;
    const node = JSON.parse(r.body) as { status?: { conditions?: { type: string; status: string }[] } };
    return node.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false;
  } catch {
    return false;
  }
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// ── Cgroups ──

/** Every cgroup hierarchy mounted on this machine (v1 controllers, the named systemd one, the v2 one). */
function cgroupMounts(): string[] {
  const lines = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const out: string[] = [];
  for (const line of lines) {
    const [left, right] = line.split(' - ');
    if (left === undefined || right === undefined) continue;
    const fstype = right.split(' ')[0];
    if (fstype === 'cgroup' || fstype === 'cgroup2') out.push(left.split(' ')[4]!);
  }
  return out;
}

/** The kubelet's pod cgroups (kubepods and below) in every hierarchy, deepest first. */
function podCgroups(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(dir, e);
      try {
        if (statSync(p).isDirectory()) walk(p);
      } catch {
        // removed meanwhile
      }
    }
    found.push(dir);
  };
  for (const m of cgroupMounts()) {
    const root = path.join(m, 'kubepods');
    if (existsSync(root)) walk(root);
  }
  return found;
}

function pidsIn(cgroups: readonly string[]): number[] {
  const pids = new Set<number>();
  for (const cg of cgroups) {
    try {
      for (const x of readFileSync(path.join(cg, 'cgroup.procs'), 'utf8').split('\n')) if (x.trim() !== '') pids.add(Number(x));
    } catch {
      // gone
    }
  }
  return [...pids];
}

// ── up ──

export interface UpResult {
  readonly already: boolean;
  readonly seconds: number;
  /** pushbase's addresses, token and keys (as in endpoints.json), when it was installed. */
  readonly pushbase?: Endpoints;
}

export interface UpOptions {
  /** Install pushbase too (pushbase.ts): the default; false brings up the bare cluster. */
  readonly pushbase?: boolean;
  /** An image archive to import for pushbase rather than the cached build. */
  readonly archive?: string;
  /** The archive's image id: the release is upgraded to it when it runs another build (pushbase.ts). */
  readonly imageId?: string;
}

export async function up(c: ClusterConfig, say: Say, opts: UpOptions = {}): Promise<UpResult> {
  const l = layout(c);
  await mkdir(l.dir, { recursive: true });
  const t0 = Date.now();
  return withLock(l.lock, { what: 'another cluster command', say, deadlineMs: 60 * 60_000 }, async () => {
    if (await healthy(c)) {
      say(`already up and healthy: API server https://127.0.0.1:${c.apiHostPort}, node ${NODE_NAME} Ready`);
      const installed = opts.pushbase === false ? undefined : await withPushbase(c, say, opts);
      return { already: true, seconds: (Date.now() - t0) / 1000, ...(installed === undefined ? {} : { pushbase: installed }) };
    }
    if (readState(l) !== undefined) {
      say('a previous cluster is recorded but not healthy: stopping it first');
      await stopAll(c, say);
    }
    const p = new Provisioner(path.join(l.dir, 'provision.log'), say);
    await aptInstallMissing(p);
    const bins = await ensureBinaries(c.cacheDir, say);
    const t1 = Date.now();
    try {
      await start(c, l, bins, say);
    } catch (e) {
      say('bring-up failed: stopping what it started');
      await stopAll(c, say).catch((err: unknown) => say(`stopping failed too: ${String(err)}`));
      throw e;
    }
    say(`up in ${((Date.now() - t1) / 1000).toFixed(1)} s (after the build and install steps); kubeconfig ${l.kubeconfig}`);
    let installed: Endpoints | undefined;
    if (opts.pushbase !== false) {
      try {
        installed = await withPushbase(c, say, opts);
      } catch (e) {
        say('installing pushbase failed: stopping the cluster');
        await stopAll(c, say).catch((err: unknown) => say(`stopping failed too: ${String(err)}`));
        throw e;
      }
    }
    return { already: false, seconds: (Date.now() - t0) / 1000, ...(installed === undefined ? {} : { pushbase: installed }) };
  });
}

/** The hands pushbase.ts installs with: commands inside the namespace, recorded long-running processes. */
export function hands(c: ClusterConfig): ClusterHands {
  const l = layout(c);
  const s = readState(l);
  const holder = liveHolder(s);
  if (s === undefined || holder === undefined) throw new Error('the cluster is not up');
  const ns = new Namespace(holder, need('nsenter'));
  const { kubectl } = kubectlFor(c);
  return {
    inside: (file, args, cwd) => ns.argv(file, args, cwd),
    keep: async (name, side, argv, replace = false) => {
      const now = readState(l) ?? s;
      const existing = now.processes.find((p) => p.name === name && stillOurs(now, p, l.run));
      if (existing !== undefined && !replace) return;
      if (existing !== undefined) {
        // Its process group: a forking socat's connections go with it.
        try {
          process.kill(-existing.pid, 'SIGTERM');
        } catch {
          // gone
        }
        while (running(existing.pid)) await sleep(50);
      }
      const mutable: State = { ...now, processes: now.processes.filter((p) => p.name !== name) };
      const rec = await launch(l, mutable, name, side, argv);
      await sleep(300);
      if (!running(rec.pid)) throw new Error(`${name} exited at once: ${tail(path.join(l.logs, `${name}.log`))}`);
    },
    kubectl,
    kubeconfig: l.kubeconfig,
    run: l.run,
    endpoints: l.endpoints,
    ctr: need('ctr'),
    socat: need('socat'),
    importArchive: (tar) => importInto(ns, path.resolve(tar)),
  };
}

async function withPushbase(c: ClusterConfig, say: Say, opts: UpOptions): Promise<Endpoints> {
  const t0 = Date.now();
  const e = await installPushbase(c, hands(c), say, { ...(opts.archive === undefined ? {} : { archive: opts.archive }), ...(opts.imageId === undefined ? {} : { imageId: opts.imageId }) });
  say(`pushbase serving on ${e.public} (admin ${e.admin}) after ${((Date.now() - t0) / 1000).toFixed(1)} s; ${layout(c).endpoints}`);
  return e;
}

const BRIDGE = /^socat-.+-(inner|host)$/;

/** Everything recorded is still running and the API server and node answer. */
export async function healthy(c: ClusterConfig): Promise<boolean> {
  const l = layout(c);
  const s = readState(l);
  if (s === undefined || liveHolder(s) === undefined || s.apiHostPort !== c.apiHostPort) return false;
  // pushbase's bridges are not the cluster's health: `up` starts a missing one again on its own.
  if (!s.processes.filter((p) => !BRIDGE.test(p.name)).every((p) => stillOurs(s, p, l.run))) return false;
  return (await apiReady(c)) && (await nodeReady(c));
}

async function start(c: ClusterConfig, l: Layout, bins: Binaries, say: Say): Promise<void> {
  for (const d of [l.logs, l.etc, l.cni, l.run, l.images]) await mkdir(d, { recursive: true });
  // A new cluster starts with empty servers too (a failed `up` leaves their logs until then).
  await forgetDeps(c);
  await rm(l.apiSocket, { force: true });
  const pki = await ensurePki(l.pki);
  const busyCgroups = podCgroups().filter((cg) => pidsIn([cg]).length > 0);
  if (busyCgroups.length > 0) throw new Error(`pods of another kubelet run on this machine (${busyCgroups[0]}): refusing to start a second one`);
  if (await portAnswers(c.apiHostPort)) throw new Error(`127.0.0.1:${c.apiHostPort} is taken by something else; set PUSHBASE_CLUSTER_API_PORT`);

  // The holder: `unshare` makes the namespaces and execs sleep in them (mount propagation private: no
  // mount made inside reaches the host).
  const state: State = { holder: undefined, processes: [], apiHostPort: c.apiHostPort };
  const holderRec = await launch(l, state, 'holder', 'ns', [need('unshare'), ['--mount', '--net', '--propagation', 'private', '--', need('sleep'), 'infinity']]);
  let mntNs: string | undefined;
  try {
    await waitFor('namespace holder', 5000, () => {
      mntNs = nsOf(holderRec.pid, 'mnt');
      return Promise.resolve(mntNs !== undefined && mntNs !== nsOf(process.pid, 'mnt') && nsOf(holderRec.pid, 'net') !== nsOf(process.pid, 'net'));
    }, diedUnless(l, state, holderRec));
  } catch (e) {
    // Not recorded as a holder yet, so `down` would not know it: stop it here.
    if (alive(holderRec.pid)) process.kill(holderRec.pid, 'SIGKILL');
    await rm(l.state, { force: true });
    throw e;
  }
  const held: State = { holder: { pid: holderRec.pid, mntNs: mntNs!, netNs: nsOf(holderRec.pid, 'net')! }, processes: [], apiHostPort: c.apiHostPort };
  await writeState(l, held);
  const ns = new Namespace(holderRec.pid, need('nsenter'));
  say(`namespace holder pid ${holderRec.pid}`);

  await prepareNamespace(l, ns);
  await writeConfigs(c, l, pki);

  // containerd, then the images it needs (imported, never pulled).
  const containerd = await launch(l, held, 'containerd', 'ns', ns.argv(need('containerd'), ['--config', path.join(l.etc, 'containerd.toml')]));
  const ctr = need('ctr');
  await waitFor('containerd', 30_000, async () => (await capture(...ns.argv(ctr, ['--address', '/run/containerd/containerd.sock', 'version']))).code === 0, diedUnless(l, held, containerd));
  const etcd = await launch(l, held, 'etcd', 'ns', ns.argv(need('etcd'), etcdArgs()));
  await importImages(l, ns, bins);

  const apiserver = await launch(l, held, 'kube-apiserver', 'ns', ns.argv(bins.kube['kube-apiserver'], apiServerArgs({
    ca: pki.ca,
    cert: pki.apiserver.cert,
    key: pki.apiserver.key,
    kubeletClientCert: pki.client('apiserver-kubelet-client').cert,
    kubeletClientKey: pki.client('apiserver-kubelet-client').key,
    saKey: pki.serviceAccountKey,
    saPub: pki.serviceAccountPub,
  })));
  // The loopback bridge: unix socket inside → API server; host loopback port → unix socket.
  const socat = need('socat');
  const inner = await launch(l, held, 'socat-inner', 'ns', ns.argv(socat, [`UNIX-LISTEN:${l.apiSocket},fork,unlink-early,mode=600`, `TCP:${NODE_IP}:6443`]));
  await waitFor('the inner socat socket', 10_000, () => Promise.resolve(existsSync(l.apiSocket)), diedUnless(l, held, inner));
  const outer = await launch(l, held, 'socat-host', 'host', [socat, [`TCP-LISTEN:${c.apiHostPort},bind=127.0.0.1,reuseaddr,fork`, `UNIX-CONNECT:${l.apiSocket}`]]);
  const t0 = Date.now();
  await waitFor('kube-apiserver /readyz', 180_000, () => apiReady(c), () => diedUnless(l, held, apiserver)() ?? diedUnless(l, held, etcd)() ?? diedUnless(l, held, outer)());
  say(`API server ready after ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const k = (name: string): string => path.join(l.etc, `${name}.kubeconfig`);
  await launch(l, held, 'kube-controller-manager', 'ns', ns.argv(bins.kube['kube-controller-manager'], controllerManagerArgs(k('controller-manager'), { ca: pki.ca, caKey: pki.caKey, saKey: pki.serviceAccountKey })));
  await launch(l, held, 'kube-scheduler', 'ns', ns.argv(bins.kube['kube-scheduler'], schedulerArgs(k('scheduler'))));
  const kubelet = await launch(l, held, 'kubelet', 'ns', ns.argv(bins.kube.kubelet, [
    `--config=${path.join(l.etc, 'kubelet.json')}`,
    `--kubeconfig=${k('kubelet')}`,
    `--hostname-override=${NODE_NAME}`,
    `--node-ip=${NODE_IP}`,
  ]));
  const proxy = await launch(l, held, 'kube-proxy', 'ns', ns.argv(bins.kube['kube-proxy'], [`--config=${path.join(l.etc, 'kube-proxy.json')}`]));
  await waitFor(`node ${NODE_NAME} Ready`, 180_000, () => nodeReady(c), () => diedUnless(l, held, kubelet)() ?? diedUnless(l, held, proxy)() ?? diedUnless(l, held, containerd)());
  say(`node ${NODE_NAME} Ready after ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const kubectl = bins.kube.kubectl;
  await check(kubectl, ['--kubeconfig', l.kubeconfig, 'apply', '-f', '-'], { input: JSON.stringify(coreDnsObjects()) });
  await check(kubectl, ['--kubeconfig', l.kubeconfig, '-n', 'kube-system', 'rollout', 'status', 'deployment/coredns', '--timeout=180s']);
  say(`CoreDNS available after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await writeFile(l.endpoints, `${JSON.stringify({ apiServer: `https://127.0.0.1:${c.apiHostPort}`, kubeconfig: l.kubeconfig, kubectl, kubernetesVersion: KUBERNETES_VERSION }, null, 2)}\n`);
}

/** Fresh tmpfs over /run, /var/lib, /var/log; our own hosts, resolv.conf and kubelet sysctls; the node's bridge. */
async function prepareNamespace(l: Layout, ns: Namespace): Promise<void> {
  for (const d of ['/run', '/var/lib', '/var/log']) await ns.run(need('mount'), ['-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs', d]);
  const files = path.join(l.etc, 'ns');
  await mkdir(path.join(files, 'sysctl'), { recursive: true });
  await writeFile(path.join(files, 'hosts'), `127.0.0.1 localhost\n${NODE_IP} ${NODE_NAME}\n`);
  // Nothing outside resolves from in here (no way out); the node's own address answers fast with a refusal.
  await writeFile(path.join(files, 'resolv.conf'), `nameserver ${NODE_IP}\n`);
  await ns.run(need('mount'), ['--bind', path.join(files, 'hosts'), '/etc/hosts']);
  await ns.run(need('mount'), ['--bind', path.join(files, 'resolv.conf'), '/etc/resolv.conf']);
  // The values the kubelet sets for the whole machine (component-helpers' sysctl package), as files of ours
  // over the real ones: the kubelet finds them as it wants them, and the machine's own stay as they are.
  const sysctls: Record<string, string> = {
    'vm/overcommit_memory': '1',
    'vm/panic_on_oom': '0',
    'kernel/panic': '10',
    'kernel/panic_on_oops': '1',
    'kernel/keys/root_maxkeys': '1000000',
    'kernel/keys/root_maxbytes': '25000000',
  };
  for (const [name, value] of Object.entries(sysctls)) {
    const file = path.join(files, 'sysctl', name.replace(/\//g, '.'));
    await writeFile(file, `${value}\n`);
    await ns.run(need('mount'), ['--bind', file, `/proc/sys/${name}`]);
  }
  const ip = need('ip');
  await ns.run(ip, ['link', 'set', 'lo', 'up']);
  await ns.run(ip, ['link', 'add', NODE_BRIDGE, 'type', 'bridge']);
  await ns.run(ip, ['addr', 'add', `${NODE_IP}/24`, 'dev', NODE_BRIDGE]);
  // The address Kafka, ClickHouse and Redis listen on for the pods (deps.ts).
  await ns.run(ip, ['addr', 'add', `${DEPS_IP}/24`, 'dev', NODE_BRIDGE]);
  await ns.run(ip, ['link', 'set', NODE_BRIDGE, 'up']);
  // A default route for the node's own processes (Service addresses are rewritten after routing); the
  // bridge has no ports, so whatever is not rewritten goes nowhere.
  await ns.run(ip, ['route', 'add', 'default', 'dev', NODE_BRIDGE]);
  await ns.run(need('sh'), ['-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward']);
}

async function writeConfigs(c: ClusterConfig, l: Layout, pki: Pki): Promise<void> {
  const inside = `https://${NODE_IP}:6443`;
  for (const [file, identity] of [
    ['controller-manager', 'controller-manager'],
    ['scheduler', 'scheduler'],
    ['kubelet', 'kubelet'],
    ['kube-proxy', 'kube-proxy'],
  ] as const) {
    await writeFile(path.join(l.etc, `${file}.kubeconfig`), kubeconfig(pki, identity, inside), { mode: 0o600 });
  }
  await writeFile(l.kubeconfig, kubeconfig(pki, 'admin', `https://127.0.0.1:${c.apiHostPort}`), { mode: 0o600 });
  await writeFile(path.join(l.etc, 'containerd.toml'), containerdConfig(l.cni, PAUSE_IMAGE));
  await writeFile(path.join(l.cni, '10-pushbase.conflist'), cniConfig());
  await writeFile(path.join(l.etc, 'kubelet.json'), kubeletConfig(pki, '/etc/resolv.conf'));
  await writeFile(path.join(l.etc, 'kube-proxy.json'), kubeProxyConfig(path.join(l.etc, 'kube-proxy.kubeconfig')));
}

async function importImages(l: Layout, ns: Namespace, bins: Binaries): Promise<void> {
  const pause = path.join(l.images, 'pause.tar');
  await buildImageArchive({ ref: PAUSE_IMAGE, files: { '/pause': bins.pause }, entrypoint: ['/pause'], user: '65535:65535' }, pause);
  const coredns = path.join(l.images, 'coredns.tar');
  await buildImageArchive({ ref: COREDNS_IMAGE, files: { '/coredns': bins.coredns }, entrypoint: ['/coredns'] }, coredns);
  for (const tar of [pause, coredns]) await importInto(ns, tar);
}

async function importInto(ns: Namespace, tar: string): Promise<void> {
  await ns.run(need('ctr'), ['--address', '/run/containerd/containerd.sock', '-n', 'k8s.io', 'images', 'import', '--no-unpack=false', tar]);
}

/** Imports a `docker save` / OCI archive into the running cluster's containerd (for images built elsewhere). */
export async function importImage(c: ClusterConfig, tar: string): Promise<void> {
  const s = readState(layout(c));
  const holder = liveHolder(s);
  if (holder === undefined) throw new Error('the cluster is not up');
  await importInto(new Namespace(holder, need('nsenter')), path.resolve(tar));
}

// ── down ──

/** Processes inside the holder's mount namespace (containerd's shims among them), holder excluded. */
function processesInNamespace(mntNs: string, holder: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    const pid = Number(e);
    if (!Number.isInteger(pid) || pid === holder) continue;
    if (nsOf(pid, 'mnt') === mntNs && running(pid)) out.push(pid);
  }
  return out;
}

export async function down(c: ClusterConfig, say: Say): Promise<boolean> {
  const l = layout(c);
  if (!existsSync(l.dir)) return false;
  return withLock(l.lock, { what: 'another cluster command', say, deadlineMs: 10 * 60_000 }, async () => {
    const stopped = await stopAll(c, say);
    // Kafka's, ClickHouse's and Redis's data belong to this cluster, whose etcd is gone with it.
    await forgetDeps(c);
    return stopped;
  });
}

/** Order: the kubelet (so nothing restarts pods), then kube-proxy and the control plane, etcd; then the pods, containerd, the rest. */
const STOP_ORDER = [['kubelet'], ['kube-proxy', 'kube-scheduler', 'kube-controller-manager', 'kube-apiserver'], ['etcd']];

async function stopAll(c: ClusterConfig, say: Say): Promise<boolean> {
  const l = layout(c);
  const s = readState(l);
  if (s === undefined) return false;
  const ours = s.processes.filter((p) => p.name !== 'holder' && stillOurs(s, p, l.run));
  const byName = (n: string): Recorded | undefined => ours.find((p) => p.name === n);
  // Everything is thrown away with the namespace's tmpfs, so a clean shutdown buys little: a short grace
  // (the API server, told to stop, often lingers past 10 s).
  for (const group of STOP_ORDER) {
    await Promise.all(group.map(async (n) => {
      const p = byName(n);
      if (p !== undefined) await stopPid(p.pid, n, say, { graceMs: 5000 });
    }));
  }
  // The pods' processes: everything in the kubelet's pod cgroups (a kubepods tree only our kubelet makes
  // here; `up` refuses to start beside another one). SIGKILL: their kubelet is gone.
  const cgroups = podCgroups();
  for (let round = 0; round < 100; round++) {
    const pids = pidsIn(cgroups);
    if (pids.length === 0) break;
    if (round === 0) say(`stopping ${pids.length} pod processes`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await sleep(100);
  }
  const containerd = byName('containerd');
  if (containerd !== undefined) await stopPid(containerd.pid, 'containerd', say, { graceMs: 10_000 });
  // What containerd left (its shims) and the inner socat: every process in our namespace, the holder last.
  const holder = liveHolder(s);
  if (holder !== undefined && s.holder !== undefined) {
    await Promise.all(processesInNamespace(s.holder.mntNs, holder).map(async (pid) => {
      const comm = (() => {
        try {
          return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        } catch {
          return '?';
        }
      })();
      await stopPid(pid, comm, say, { graceMs: 5000 });
    }));
  }
  let removed = 0;
  for (const cg of podCgroups()) {
    try {
      rmdirSync(cg);
      removed++;
    } catch (e) {
      say(`could not remove cgroup ${cg}: ${(e as Error).message}`);
    }
  }
  if (removed > 0) say(`removed ${removed} pod cgroups`);
  if (holder !== undefined) await stopPid(holder, 'holder', say, { graceMs: 10_000 });
  // The host-side socats (the API server's, pushbase's public and admin bridges), with their connections.
  for (const outer of ours.filter((p) => p.side === 'host')) {
    say(`${outer.name}: stopping pid ${outer.pid} and its connections`);
    try {
      process.kill(-outer.pid, 'SIGTERM');
    } catch {
      // gone
    }
    while (running(outer.pid)) await sleep(50);
  }
  await rm(l.state, { force: true });
  await rm(l.apiSocket, { force: true });
  await rm(l.endpoints, { force: true });
  return true;
}

// ── status ──

export interface Status {
  readonly up: boolean;
  readonly holder: number | undefined;
  readonly processes: readonly (Recorded & { readonly running: boolean })[];
  readonly apiReady: boolean;
  readonly nodeReady: boolean;
  readonly apiServer: string;
  readonly kubeconfig: string;
}

export async function status(c: ClusterConfig): Promise<Status> {
  const l = layout(c);
  const s = readState(l);
  const holder = liveHolder(s);
  const processes = (s?.processes ?? []).map((p) => ({ ...p, running: s !== undefined && stillOurs(s, p, l.run) }));
  const [a, n] = await Promise.all([apiReady(c), nodeReady(c)]);
  return { up: holder !== undefined && a && n && processes.every((p) => p.running), holder, processes, apiReady: a, nodeReady: n, apiServer: `https://127.0.0.1:${c.apiHostPort}`, kubeconfig: l.kubeconfig };
}

/** The kubectl the cluster was built with, and the kubeconfig reaching it, for callers (tests, the install). */
export function kubectlFor(c: ClusterConfig): { kubectl: string; kubeconfig: string } {
  return { kubectl: path.join(c.cacheDir, `kubernetes-${KUBERNETES_VERSION}`, 'bin', 'kubectl'), kubeconfig: layout(c).kubeconfig };
}

export async function readEndpoints(c: ClusterConfig): Promise<unknown> {
  return JSON.parse(await readFile(layout(c).endpoints, 'utf8')) as unknown;
}

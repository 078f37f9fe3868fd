import { existsSync, readlinkSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { provision } from '../local/local-servers';
import { DEFAULT_TAG } from '../image/build';
import { DEPS_IP, PUSHBASE_NAMESPACE, PUSHBASE_RELEASE, type ClusterConfig } from './config';
import { depsConfig } from './deps';
import type { Say } from '../proc';
import { capture, check } from './proc';

/*
 * pushbase on the cluster, installed as a user would (docs/cluster.md, "pushbase on the cluster"):
 *   1. Kafka, ClickHouse and Redis as processes inside the cluster's network namespace on DEPS_IP
 *      (deps.ts), behind selector-less Services with explicit EndpointSlices in the release's namespace;
 *   2. the namespace labelled for Pod Security Admission `restricted` (the API server enforces it);
 *   3. the image imported into the cluster's containerd (built first when there is no archive);
 *   4. `helm upgrade --install --wait` of helm/pushbase with deploy/cluster/pushbase-values.yaml: the
 *      migrate hook Job, the Secret with the generated admin token, gRPC token and API key;
 *   5. loopback bridges from the host to the gateway's public and admin Services, and
 *      .cluster/endpoints.json naming them with the admin token and the API keys.
 * Each step is skipped when its result is already there, so `cluster:up` on a cluster that runs pushbase
 * changes nothing.
 */

/** What cluster.ts lends: commands inside the namespace, and long-running processes recorded for `down`. */
export interface ClusterHands {
  /** argv that runs `file args` inside the holder's namespaces, in `cwd`. */
  readonly inside: (file: string, args: readonly string[], cwd?: string) => [string, string[]];
  /** Starts a recorded long-running process (stopped by `down`), unless one of that name still runs (which `replace` stops first). */
  readonly keep: (name: string, side: 'ns' | 'host', argv: [string, string[]], replace?: boolean) => Promise<void>;
  readonly kubectl: string;
  readonly kubeconfig: string;
  readonly run: string;
  readonly endpoints: string;
  readonly ctr: string;
  readonly socat: string;
  readonly importArchive: (tar: string) => Promise<void>;
}

export const VALUES_FILE = path.join(__dirname, 'pushbase-values.yaml');
export const CHART_DIR = path.join(__dirname, '..', '..', 'helm', 'pushbase');

export interface Endpoints {
  readonly public: string;
  readonly admin: string;
  readonly adminToken: string;
  readonly apiKeys: string[];
  /** The cluster's Kafka from the host (its HOST listener through a bridge): brokers for a client. */
  readonly kafka: string;
}

function helmBinary(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ensureHelm } = require('../../scripts/ensure-helm.js') as { ensureHelm: (log?: (line: string) => void) => string };
  return ensureHelm();
}

export function helmArgs(h: Pick<ClusterHands, 'kubeconfig'>, args: readonly string[], namespace = PUSHBASE_NAMESPACE): string[] {
  return ['--kubeconfig', h.kubeconfig, '--namespace', namespace, ...args];
}

export async function helm(h: Pick<ClusterHands, 'kubeconfig'>, args: readonly string[], namespace = PUSHBASE_NAMESPACE): Promise<string> {
  return check(helmBinary(), helmArgs(h, args, namespace));
}

async function kubectl(h: ClusterHands, args: readonly string[], input?: string): Promise<string> {
  return check(h.kubectl, ['--kubeconfig', h.kubeconfig, ...args], input === undefined ? {} : { input });
}

/** The namespace and the external servers' Services, with their EndpointSlices. */
export function dependencyObjects(namespace = PUSHBASE_NAMESPACE): object[] {
  const external = [
    { name: 'kafka', port: 9092 },
    { name: 'clickhouse', port: 8123 },
    { name: 'redis', port: 6379 },
  ];
  return [
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: namespace,
        labels: {
          'pod-security.kubernetes.io/enforce': 'restricted',
          'pod-security.kubernetes.io/enforce-version': 'latest',
          'pod-security.kubernetes.io/warn': 'restricted',
          'pod-security.kubernetes.io/audit': 'restricted',
        },
      },
    },
    ...external.flatMap(({ name, port }) => [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'pushbase-cluster-deps' } },
        // No selector: the endpoints are the EndpointSlice below, an address outside the pod network.
        spec: { type: 'ClusterIP', ports: [{ name: 'tcp', port, targetPort: port, protocol: 'TCP' }] },
      },
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name: `${name}-external`,
          namespace,
          labels: { 'kubernetes.io/service-name': name, 'endpointslice.kubernetes.io/managed-by': 'pushbase-cluster', 'app.kubernetes.io/part-of': 'pushbase-cluster-deps' },
        },
        addressType: 'IPv4',
        ports: [{ name: 'tcp', port, protocol: 'TCP' }],
        endpoints: [{ addresses: [DEPS_IP], conditions: { ready: true } }],
      },
    ]),
  ];
}

async function depsAnswerInside(c: ClusterConfig, h: ClusterHands): Promise<boolean> {
  // The probes must run inside: DEPS_IP exists only there.
  const d = depsConfig(c);
  const script = `Promise.all([k(${JSON.stringify(d.kafka)}), c(${JSON.stringify(d.clickhouse)}), r(${JSON.stringify(d.redis)})]).then((a) => process.exit(a.every(Boolean) ? 0 : 1))`;
  const prelude = "const { kafkaAnswers: k, clickhouseAnswers: c, redisAnswers: r } = require('./deploy/local/probes');";
  const [f, a] = h.inside(process.execPath, ['--import', 'tsx', '-e', `${prelude}${script}`], c.repoRoot);
  return (await capture(f, a)).code === 0;
}

async function startDeps(c: ClusterConfig, h: ClusterHands, say: Say): Promise<void> {
  const d = depsConfig(c);
  if (await depsAnswerInside(c, h)) return;
  // Packages and Kafka's jars on the host (the namespace has no network), then the servers inside.
  await provision(d, (line, kind) => {
    if (kind === 'provision') say(line);
  });
  say(`Kafka, ClickHouse, Redis: starting on ${DEPS_IP} inside the namespace`);
  const t0 = Date.now();
  const [f, a] = h.inside(process.execPath, ['--import', 'tsx', path.join(__dirname, 'deps-inside.ts'), JSON.stringify(d), ...hostNamespaces()], c.repoRoot);
  const r = await capture(f, a);
  if (r.code !== 0) throw new Error(`starting Kafka, ClickHouse and Redis in the namespace failed: ${(r.stderr || r.stdout).trim().slice(-3000)}`);
  say(`Kafka, ClickHouse, Redis answering on ${DEPS_IP} after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

function hostNamespaces(): [string, string] {
  return [readlinkSync('/proc/self/ns/mnt'), readlinkSync('/proc/self/ns/net')];
}

async function ensureImage(h: ClusterHands, say: Say, tag: string, archive: string | undefined, imageId: string | undefined): Promise<void> {
  const present = (await ctr(h, ['images', 'ls', '-q'])).split('\n').map((x) => x.trim());
  if (present.includes(tag) && (archive === undefined || (imageId !== undefined && present.includes(buildRef(imageId))))) return;
  let tar = archive;
  if (tar === undefined) {
    const { imageTools, buildImage } = await import('../image/build');
    const cached = path.join(imageTools().home, 'pushbase.tar');
    if (existsSync(cached)) tar = cached;
    else {
      say(`building the image ${tag} (deploy/image/build.ts)`);
      tar = (await buildImage({ tag, say })).archive ?? cached;
    }
  }
  say(`importing ${tar} into the cluster's containerd`);
  await h.importArchive(tar);
  if (imageId !== undefined) await ctr(h, ['images', 'tag', '--force', tag, buildRef(imageId)]);
}

async function ctr(h: ClusterHands, args: readonly string[]): Promise<string> {
  const [f, a] = h.inside(h.ctr, ['--address', '/run/containerd/containerd.sock', '-n', 'k8s.io', ...args]);
  return check(f, a);
}

/** The tag naming one build: the image's id, so a release runs exactly the build it was given. */
export const buildTag = (imageId: string): string => `build-${imageId.replace(/^sha256:/, '').slice(0, 12)}`;
const buildRef = (imageId: string): string => `${DEFAULT_TAG.slice(0, DEFAULT_TAG.lastIndexOf(':'))}:${buildTag(imageId)}`;

/** The image tag the deployed release runs, or undefined when the release is not deployed. */
async function releasedTag(h: ClusterHands): Promise<string | undefined> {
  const r = await capture(helmBinary(), helmArgs(h, ['status', PUSHBASE_RELEASE, '-o', 'json']));
  if (r.code !== 0 || (JSON.parse(r.stdout) as { info?: { status?: string } }).info?.status !== 'deployed') return undefined;
  const values = JSON.parse(await helm(h, ['get', 'values', PUSHBASE_RELEASE, '-o', 'json'])) as { image?: { tag?: string } } | null;
  return values?.image?.tag ?? DEFAULT_TAG.slice(DEFAULT_TAG.lastIndexOf(':') + 1);
}

/** Drops the build tags of earlier builds, so containerd can collect their layers. */
async function forgetOtherBuilds(h: ClusterHands, keep: string): Promise<void> {
  const prefix = buildRef('');
  const old = (await ctr(h, ['images', 'ls', '-q'])).split('\n').map((x) => x.trim()).filter((x) => x.startsWith(prefix) && x !== keep);
  if (old.length > 0) await ctr(h, ['images', 'rm', ...old]);
}

export interface InstallOptions {
  /** An image archive to import (and use) rather than the cached one; for upgrades to a new tag. */
  readonly archive?: string;
  /**
   * The archive's image id. The release then runs that build under a tag of its own, and a release that
   * runs another build is upgraded to it: a cluster left running never serves the tests an older build.
   */
  readonly imageId?: string;
}

export async function installPushbase(c: ClusterConfig, h: ClusterHands, say: Say, opts: InstallOptions = {}): Promise<Endpoints> {
  await startDeps(c, h, say);
  await kubectl(h, ['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: dependencyObjects() }));
  await ensureImage(h, say, DEFAULT_TAG, opts.archive, opts.imageId);
  const wanted = opts.imageId === undefined ? undefined : buildTag(opts.imageId);
  const running = await releasedTag(h);
  if (running === undefined) {
    say('helm upgrade --install --wait (the migrate hook first)');
    const t0 = Date.now();
    await helm(h, ['upgrade', '--install', PUSHBASE_RELEASE, CHART_DIR, '--values', VALUES_FILE, ...(wanted === undefined ? [] : ['--set', `image.tag=${wanted}`]), '--wait', '--timeout', '10m']);
    say(`pushbase installed after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } else if (wanted !== undefined && running !== wanted) {
    say(`the release runs ${running}, this build is ${wanted}: helm upgrade --wait (the migrate hook first)`);
    const t0 = Date.now();
    await helm(h, ['upgrade', PUSHBASE_RELEASE, CHART_DIR, '--values', VALUES_FILE, '--set', `image.tag=${wanted}`, '--wait', '--timeout', '10m']);
    say(`pushbase upgraded after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  if (wanted !== undefined) await forgetOtherBuilds(h, buildRef(opts.imageId as string));
  await bridges(c, h);
  const endpoints = await readSecretEndpoints(c, h);
  // Beside what `up` wrote there (the API server, kubeconfig, kubectl).
  const before = existsSync(h.endpoints) ? (JSON.parse(await readFile(h.endpoints, 'utf8')) as object) : {};
  await writeFile(h.endpoints, `${JSON.stringify({ ...before, ...endpoints.file }, null, 2)}\n`, { mode: 0o600 });
  return endpoints.pushbase;
}

/** The namespace (PSA restricted) with the Kafka, ClickHouse and Redis Services a release reaches. */
export async function applyDependencies(h: ClusterHands, namespace: string): Promise<void> {
  await kubectl(h, ['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: dependencyObjects(namespace) }));
}

async function serviceIp(h: ClusterHands, name: string, namespace = PUSHBASE_NAMESPACE): Promise<string> {
  const ip = (await kubectl(h, ['-n', namespace, 'get', 'service', name, '-o', 'jsonpath={.spec.clusterIP}'])).trim();
  if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip)) throw new Error(`service ${name} has no cluster IP (${ip})`);
  return ip;
}

/** host 127.0.0.1:<port> → unix socket in .cluster/run → the Service's cluster IP, like the API server's. */
async function bridges(c: ClusterConfig, h: ClusterHands): Promise<void> {
  await mkdir(h.run, { recursive: true });
  for (const [name, service, port, hostPort] of [
    ['public', `${PUSHBASE_RELEASE}-gateway`, 443, c.publicHostPort],
    ['admin', `${PUSHBASE_RELEASE}-gateway-admin`, 8444, c.adminHostPort],
    // Kafka's HOST listener, on the namespace's loopback at the same port (deps.ts).
    ['kafka', undefined, c.kafkaHostPort, c.kafkaHostPort],
  ] as const) {
    const sock = path.join(h.run, `${name}.sock`);
    const ip = service === undefined ? '127.0.0.1' : await serviceIp(h, service);
    await bridge(h, name, sock, `${ip}:${port}`, hostPort);
  }
}

/** One loopback bridge: host 127.0.0.1:<hostPort> → `sock` → `target` inside; recorded as socat-<name>-*. */
async function bridge(h: ClusterHands, name: string, sock: string, target: string, hostPort: number, replace = false): Promise<void> {
  await h.keep(`socat-${name}-inner`, 'ns', h.inside(h.socat, [`UNIX-LISTEN:${sock},fork,unlink-early,mode=600`, `TCP:${target}`]), replace);
  for (let i = 0; i < 100 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 100));
  await h.keep(`socat-${name}-host`, 'host', [h.socat, [`TCP-LISTEN:${hostPort},bind=127.0.0.1,reuseaddr,fork`, `UNIX-CONNECT:${sock}`]], replace);
}

async function readSecretEndpoints(c: ClusterConfig, h: ClusterHands): Promise<{ pushbase: Endpoints; file: object }> {
  const raw = await kubectl(h, ['-n', PUSHBASE_NAMESPACE, 'get', 'secret', `${PUSHBASE_RELEASE}-auth`, '-o', 'json']);
  const data = (JSON.parse(raw) as { data?: Record<string, string> }).data ?? {};
  const text = (k: string): string => Buffer.from(data[k] ?? '', 'base64').toString('utf8');
  const pushbase: Endpoints = {
    public: `https://127.0.0.1:${c.publicHostPort}`,
    admin: `http://127.0.0.1:${c.adminHostPort}`,
    adminToken: text('admin-token'),
    apiKeys: text('api-keys').split(',').map((x) => x.trim()).filter((x) => x !== ''),
    kafka: `127.0.0.1:${c.kafkaHostPort}`,
  };
  if (pushbase.adminToken === '' || pushbase.apiKeys.length === 0) throw new Error(`secret ${PUSHBASE_RELEASE}-auth holds no admin token or API keys`);
  return { pushbase, file: { ...pushbase, namespace: PUSHBASE_NAMESPACE, release: PUSHBASE_RELEASE } };
}

/**
 * Host loopback bridges to another release's gateway Services (the lifecycle tests' second release),
 * stopped by `down` like the others.
 */
export async function bridgeGateway(h: ClusterHands, namespace: string, release: string, publicPort: number, adminPort: number): Promise<void> {
  await mkdir(h.run, { recursive: true });
  // Replaced when running: a release installed again has Services at new addresses.
  await bridge(h, `${release}-public`, path.join(h.run, `${release}-public.sock`), `${await serviceIp(h, `${release}-pushbase-gateway`, namespace)}:443`, publicPort, true);
  await bridge(h, `${release}-admin`, path.join(h.run, `${release}-admin.sock`), `${await serviceIp(h, `${release}-pushbase-gateway-admin`, namespace)}:8444`, adminPort, true);
}

/** For `down`: the deps' data is thrown away with the cluster. */
export async function forgetDeps(c: ClusterConfig): Promise<void> {
  await rm(depsConfig(c).dir, { recursive: true, force: true });
}

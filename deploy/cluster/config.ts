import os from 'node:os';
import * as path from 'node:path';

/*
 * The versions, addresses and folders of the single-node cluster (`npm run cluster:*`). Every address below
 * except the host port exists only inside the cluster's own network namespace, which has no link to the
 * outside: nothing on the machine or beyond it can see them, and they collide with nothing.
 */

/** The Kubernetes release built from the module proxy; docs/cluster.md says why this one. */
export const KUBERNETES_VERSION = 'v1.34.4';
export const COREDNS_VERSION = 'v1.12.4';
/** The sandbox image kubelet 1.34 expects (kubeadm's PauseVersion); built from the release's pause.c. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';
export const COREDNS_IMAGE = `pushbase.local/coredns:${COREDNS_VERSION.slice(1)}`;

export const NODE_NAME = 'pushbase-node';
/** The node's address: on a bridge with no ports inside the namespace (this kernel has no dummy links). */
export const NODE_IP = '10.250.0.1';
export const NODE_BRIDGE = 'pb-node0';
export const POD_CIDR = '10.244.0.0/16';
/** The one node's pod range, which the CNI config hands out. */
export const NODE_POD_CIDR = '10.244.0.0/24';
export const SERVICE_CIDR = '10.96.0.0/16';
export const API_SERVICE_IP = '10.96.0.1';
export const DNS_SERVICE_IP = '10.96.0.10';
export const API_PORT = 6443;
/**
 * Kafka, ClickHouse and Redis for the pods: processes on a second address of the node's bridge, reached
 * through Services with explicit EndpointSlices, as a managed service outside the cluster would be.
 */
export const DEPS_IP = '10.250.0.2';
/** The namespace and release of `helm install` (the namespace enforces PSA `restricted`). */
export const PUSHBASE_NAMESPACE = 'pushbase';
export const PUSHBASE_RELEASE = 'pushbase';

export interface ClusterConfig {
  readonly repoRoot: string;
  /** `.cluster/`: kubeconfig, endpoints.json, pid files, logs, certificates; git-ignored. */
  readonly dir: string;
  /** Built binaries, kept across clones: `~/.cache/pushbase` (or $PUSHBASE_TOOLS_DIR). */
  readonly cacheDir: string;
  /** The host loopback port that reaches the API server. */
  readonly apiHostPort: number;
  /** The host loopback ports bridged to the gateway's public (HTTPS) and admin Services. */
  readonly publicHostPort: number;
  readonly adminHostPort: number;
  /** The host loopback port bridged to the cluster's Kafka (its HOST listener advertises it). */
  readonly kafkaHostPort: number;
}

function portFrom(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const raw = env[name] ?? '';
  const port = raw.trim() === '' ? def : Number(raw);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`${name}: not a port: ${raw}`);
  return port;
}

export function toolsDir(env: NodeJS.ProcessEnv): string {
  if (env.PUSHBASE_TOOLS_DIR !== undefined && env.PUSHBASE_TOOLS_DIR !== '') return path.resolve(env.PUSHBASE_TOOLS_DIR);
  const cache = env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== '' ? env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache');
  return path.join(cache, 'pushbase');
}

export function readClusterConfig(env: NodeJS.ProcessEnv, repoRoot: string): ClusterConfig {
  const apiHostPort = portFrom(env, 'PUSHBASE_CLUSTER_API_PORT', 16443);
  const rawDir = env.PUSHBASE_CLUSTER_DIR ?? '';
  return {
    repoRoot,
    dir: path.resolve(repoRoot, rawDir.trim() === '' ? '.cluster' : rawDir),
    cacheDir: toolsDir(env),
    apiHostPort,
    publicHostPort: portFrom(env, 'PUSHBASE_CLUSTER_PUBLIC_PORT', 18443),
    adminHostPort: portFrom(env, 'PUSHBASE_CLUSTER_ADMIN_PORT', 18444),
    kafkaHostPort: portFrom(env, 'PUSHBASE_CLUSTER_KAFKA_PORT', 16092),
  };
}

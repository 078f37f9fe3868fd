import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readClusterConfig, PUSHBASE_NAMESPACE, PUSHBASE_RELEASE } from '../../deploy/cluster/config';
import { kubectlFor, layout } from '../../deploy/cluster/cluster';
import { helmArgs } from '../../deploy/cluster/pushbase';

/*
 * What the cluster suites share: the cluster jest's global setup brought up with pushbase installed
 * (test/global-setup.js; deploy/cluster), its kubectl and helm, and .cluster/endpoints.json.
 */

export const ROOT = path.resolve(__dirname, '..', '..');
export const config = readClusterConfig(process.env, ROOT);
export const { kubectl: KUBECTL, kubeconfig: KUBECONFIG } = kubectlFor(config);
export const NAMESPACE = PUSHBASE_NAMESPACE;
export const RELEASE = PUSHBASE_RELEASE;

export interface ClusterEndpoints {
  readonly public: string;
  readonly admin: string;
  readonly adminToken: string;
  readonly apiKeys: string[];
}

/** Fails (never skips) a suite when jest's global setup could not bring the cluster and pushbase up. */
export function requireCluster(): void {
  const error = process.env.PUSHBASE_CLUSTER_ERROR;
  if (error !== undefined && error !== '') throw new Error(`the cluster with pushbase did not come up in jest's global setup: ${error}`);
}

export function endpoints(): ClusterEndpoints {
  return JSON.parse(readFileSync(layout(config).endpoints, 'utf8')) as ClusterEndpoints;
}

export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(file: string, args: readonly string[], timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** kubectl against the cluster; never throws (the caller asserts on the code). */
export function kubectl(args: readonly string[], timeoutMs = 120_000): Promise<Run> {
  return run(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], timeoutMs);
}

/** kubectl that must succeed; its stdout. */
export async function kubectlOk(args: readonly string[], timeoutMs = 120_000): Promise<string> {
  const r = await kubectl(args, timeoutMs);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: exit ${r.code}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

export function helmBinary(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ensureHelm } = require('../../scripts/ensure-helm.js') as { ensureHelm: (log?: (line: string) => void) => string };
  return ensureHelm();
}

/** helm in the release's namespace; never throws. */
export function helm(args: readonly string[], namespace = NAMESPACE, timeoutMs = 900_000): Promise<Run> {
  return run(helmBinary(), helmArgs({ kubeconfig: KUBECONFIG }, args, namespace), timeoutMs);
}

export async function helmOk(args: readonly string[], namespace = NAMESPACE, timeoutMs = 900_000): Promise<string> {
  const r = await helm(args, namespace, timeoutMs);
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: exit ${r.code}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

/*
 * The chart's tests' shared pieces: the helm that scripts/ensure-helm.js built (jest's global setup hands its
 * path over in PUSHBASE_HELM), `helm template` parsed into objects, and lookups over them.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

export const root = path.resolve(__dirname, '..', '..');
export const chart = path.join(root, 'helm', 'pushbase');
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const { HELM_VERSION } = require('../../scripts/ensure-helm.js') as { HELM_VERSION: string };

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> }; spec?: any; data?: Record<string, string> };

/** helm with a home of its own under the run's temp folder: no user's repositories or plugins count. */
export function helm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const binary = process.env.PUSHBASE_HELM;
  if (binary === undefined) throw new Error(`no helm binary: ${process.env.PUSHBASE_HELM_ERROR ?? 'jest global setup did not run scripts/ensure-helm.js'}`);
  const home = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'helm-home-'));
  let res;
  try {
    res = spawnSync(binary, args, {
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: path.join(home, 'cache'), HELM_CONFIG_HOME: path.join(home, 'config'), HELM_DATA_HOME: path.join(home, 'data') },
      timeout: 60_000,
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  if (res.error) throw res.error;
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** `helm template` of the chart; `args` are more of its flags (-f, --set, --set-string). */
export function render(release: string, args: string[] = []): K8sObject[] {
  const res = helm(['template', release, chart, '--namespace', 'pushbase', ...args]);
  if (res.status !== 0) throw new Error(`helm template failed (${res.status}):\n${res.stderr}`);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

export const byKind = (objects: K8sObject[], kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
export const named = (objects: K8sObject[], kind: string, name: string): K8sObject => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
};
export const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined): boolean => Object.entries(selector).every(([k, v]) => labels?.[k] === v);
export const component = (o: K8sObject): string | undefined => o.metadata.labels?.['app.kubernetes.io/component'];
export const isHook = (o: K8sObject): boolean => o.metadata.annotations?.['helm.sh/hook'] !== undefined;

/** The container's environment as the process would see it, each secretKeyRef read from `secrets` ('<Secret>/<key>' → value). */
export function envOf(container: any, secrets: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef !== undefined) {
      const ref = e.valueFrom.secretKeyRef;
      const value = secrets[`${ref.name}/${ref.key}`];
      if (value === undefined && ref.optional !== true) throw new Error(`${e.name}: no value for Secret ${ref.name} key ${ref.key}`);
      if (value !== undefined) env[e.name] = value;
    } else throw new Error(`${e.name}: neither a value nor a secretKeyRef`);
  }
  return env;
}


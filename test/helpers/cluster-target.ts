import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { connect } from 'node:tls';

/*
 * The third e2e target (jest project e2e-cluster, test/helpers/cluster-mode.ts): pushbase installed with
 * helm on the single-node Kubernetes cluster (deploy/cluster), reached through the host loopback bridges
 * of .cluster/endpoints.json. One installation serves every suite at once, so each TestServer gets
 * accounts of its own: the suite's account names (acme, globex, …) map to fresh ones (acme-<hex>), created
 * through the admin API with a key minted for each, and TestServer rewrites `/accounts/<name>` in the
 * paths it sends. What a server's environment would set per server cannot be set per TestServer here,
 * except the rate limit, which is an account quota; anything else is refused, so a suite that needs it
 * fails rather than runs against other settings.
 */

export interface ClusterEndpoints {
  readonly public: string;
  readonly admin: string;
  readonly adminToken: string;
  readonly apiKeys: string[];
  readonly kafka: string;
}

/** The chart's defaults, which deploy/cluster/pushbase-values.yaml keeps. */
export const CLUSTER_TOPIC = 'pushbase.dataset-events';
export const CLUSTER_GROUP = 'pushbase-projector';

export function clusterEndpoints(): ClusterEndpoints {
  const file = process.env.PUSHBASE_CLUSTER_ENDPOINTS ?? path.resolve(__dirname, '..', '..', '.cluster', 'endpoints.json');
  const error = process.env.PUSHBASE_CLUSTER_ERROR;
  if (error !== undefined && error !== '') throw new Error(`the cluster with pushbase did not come up in jest's global setup: ${error}`);
  return JSON.parse(readFileSync(file, 'utf8')) as ClusterEndpoints;
}

export const portOf = (url: string): number => Number(new URL(url).port);

/** The certificate the gateway serves (self-signed for localhost and 127.0.0.1), as PEM, to trust it. */
export function servedCertificate(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      const b64 = raw.toString('base64').replace(/(.{64})/g, '$1\n');
      resolve(`-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`);
    });
    socket.setTimeout(20_000, () => socket.destroy(new Error('timed out')));
    socket.on('error', reject);
  });
}

/** Environment a TestServer may give on the cluster, as account quotas. */
const AS_QUOTA: Record<string, string> = { PUSHBASE_RATE_LIMIT_PER_MINUTE: 'requests_per_minute' };

function quotasOf(env: Record<string, string>): Record<string, number> {
  const quotas: Record<string, number> = {};
  for (const [k, v] of Object.entries(env)) {
    const quota = AS_QUOTA[k];
    if (quota === undefined) throw new Error(`the cluster target cannot set ${k} for one server: the installation is shared (test/helpers/cluster-target.ts)`);
    quotas[quota] = Number(v);
  }
  return quotas;
}

function adminCall(e: ClusterEndpoints, method: string, urlPath: string, body: unknown): Promise<{ status: number; body: any }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: portOf(e.admin), method, path: urlPath, agent: false, headers: { authorization: `Bearer ${e.adminToken}`, 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (b: Buffer) => chunks.push(b));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = text;
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Fresh accounts for the suite's names, each with a minted key; returns name → account and name → key. */
export async function provisionAccounts(e: ClusterEndpoints, names: readonly string[], env: Record<string, string>): Promise<{ accounts: Record<string, string>; keys: Record<string, string> }> {
  const quotas = quotasOf(env);
  const accounts: Record<string, string> = {};
  const keys: Record<string, string> = {};
  for (const name of names) {
    const account = `${name}-${randomBytes(4).toString('hex')}`;
    const created = await adminCall(e, 'POST', '/admin/accounts', Object.keys(quotas).length === 0 ? { account } : { account, quotas });
    if (created.status !== 201) throw new Error(`creating account ${account} on the cluster: ${created.status} ${JSON.stringify(created.body)}`);
    const key = await adminCall(e, 'POST', `/admin/accounts/${account}/keys`, { label: 'e2e-cluster' });
    if (key.status !== 201 || typeof key.body?.key !== 'string') throw new Error(`minting a key of ${account} on the cluster: ${key.status} ${JSON.stringify(key.body)}`);
    accounts[name] = account;
    keys[name] = key.body.key as string;
  }
  return { accounts, keys };
}

/** `/accounts/<name>` → `/accounts/<its account>` for each of the suite's names; idempotent. */
export function translatePath(urlPath: string, accounts: Readonly<Record<string, string>>): string {
  return urlPath.replace(/\/accounts\/([A-Za-z0-9._-]+)(?=[/?]|$)/g, (whole, name: string) => {
    const account = accounts[name];
    return account === undefined ? whole : `/accounts/${account}`;
  });
}

import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { API_SERVICE_IP, NODE_IP, NODE_NAME } from './config';
import { check, need } from './proc';

/*
 * The cluster's certificates, made once with openssl (Node can sign nothing) and kept in .cluster/pki: one
 * CA, the API server's serving certificate, a client certificate per component, and the service-account
 * signing key. ECDSA P-256: quick to make, and every component accepts it. The kubelet signs its own serving
 * certificate; the API server reaches it only inside the namespace.
 */

export interface Identity {
  readonly name: string;
  /** Subject common name: the user name the API server sees. */
  readonly cn: string;
  /** Organisation: the groups. */
  readonly groups: readonly string[];
}

/** Who talks to the API server, and as whom (RBAC's built-in names; system:masters for the admin). */
export const CLIENTS: readonly Identity[] = [
  { name: 'admin', cn: 'pushbase-admin', groups: ['system:masters'] },
  { name: 'controller-manager', cn: 'system:kube-controller-manager', groups: [] },
  { name: 'scheduler', cn: 'system:kube-scheduler', groups: [] },
  { name: 'kubelet', cn: `system:node:${NODE_NAME}`, groups: ['system:nodes'] },
  { name: 'kube-proxy', cn: 'system:kube-proxy', groups: [] },
  // The API server's own client identity towards the kubelet (logs, exec, port-forward).
  { name: 'apiserver-kubelet-client', cn: 'kube-apiserver-kubelet-client', groups: ['system:masters'] },
];

export interface Pki {
  readonly dir: string;
  readonly ca: string;
  readonly caKey: string;
  readonly apiserver: { readonly cert: string; readonly key: string };
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
  client(name: string): { readonly cert: string; readonly key: string };
}

export function pkiIn(dir: string): Pki {
  return {
    dir,
    ca: path.join(dir, 'ca.crt'),
    caKey: path.join(dir, 'ca.key'),
    apiserver: { cert: path.join(dir, 'apiserver.crt'), key: path.join(dir, 'apiserver.key') },
    serviceAccountKey: path.join(dir, 'sa.key'),
    serviceAccountPub: path.join(dir, 'sa.pub'),
    client: (name) => ({ cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) }),
  };
}

const DAYS = '3650';

/** Makes whatever certificate is missing. A new CA (the folder was emptied) re-signs everything. */
export async function ensurePki(dir: string): Promise<Pki> {
  const pki = pkiIn(dir);
  const done = path.join(dir, '.complete');
  if (existsSync(done)) return pki;
  const openssl = need('openssl');
  // Made aside and renamed into place: a run killed half-way leaves no CA without its certificates.
  const work = `${dir}.tmp-${process.pid}`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true, mode: 0o700 });
  const w = pkiIn(work);
  const key = (file: string): Promise<string> => check(openssl, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file]);
  await key(w.caKey);
  await check(openssl, ['req', '-x509', '-new', '-key', w.caKey, '-days', DAYS, '-subj', '/CN=pushbase-cluster-ca', '-out', w.ca]);

  const sign = async (certPath: string, keyPath: string, subject: string, ext: string): Promise<void> => {
    await key(keyPath);
    const csr = `${certPath}.csr`;
    const extFile = `${certPath}.ext`;
    await check(openssl, ['req', '-new', '-key', keyPath, '-subj', subject, '-out', csr]);
    await writeFile(extFile, ext);
    await check(openssl, ['x509', '-req', '-in', csr, '-CA', w.ca, '-CAkey', w.caKey, '-CAcreateserial', '-days', DAYS, '-extfile', extFile, '-out', certPath]);
    await rm(csr);
    await rm(extFile);
  };
  const sans = [
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
    'DNS:localhost',
    `DNS:${NODE_NAME}`,
    `IP:${API_SERVICE_IP}`,
    `IP:${NODE_IP}`,
    'IP:127.0.0.1',
  ];
  await sign(w.apiserver.cert, w.apiserver.key, '/CN=kube-apiserver', `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${sans.join(',')}\n`);
  for (const c of CLIENTS) {
    const subject = `${c.groups.map((g) => `/O=${g}`).join('')}/CN=${c.cn}`;
    await sign(w.client(c.name).cert, w.client(c.name).key, subject, 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  }
  await key(w.serviceAccountKey);
  await check(openssl, ['pkey', '-in', w.serviceAccountKey, '-pubout', '-out', w.serviceAccountPub]);
  await writeFile(path.join(work, '.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(work, dir);
  return pki;
}

/** A kubeconfig with everything embedded, for one identity at one server address. */
export function kubeconfig(pki: Pki, identity: string, server: string): string {
  const b64 = (file: string): string => readFileSync(file).toString('base64');
  const c = pki.client(identity);
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: pushbase',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${b64(pki.ca)}`,
    'users:',
    `- name: ${identity}`,
    '  user:',
    `    client-certificate-data: ${b64(c.cert)}`,
    `    client-key-data: ${b64(c.key)}`,
    'contexts:',
    '- name: pushbase',
    '  context:',
    '    cluster: pushbase',
    `    user: ${identity}`,
    'current-context: pushbase',
    '',
  ].join('\n');
}

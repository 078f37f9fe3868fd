import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { DEPS_IP } from '../../deploy/cluster/config';
import { buildTag } from '../../deploy/cluster/pushbase';
import { endpoints, helm, helmOk, kubectl, kubectlOk, NAMESPACE, RELEASE, requireCluster } from './cluster';

/*
 * pushbase as `cluster:up` installed it (jest's global setup brought it up): helm install --wait with the
 * migrate hook, in a namespace where the API server enforces PSA `restricted`, Kafka, ClickHouse and Redis
 * behind Services with explicit endpoints, the chart's NetworkPolicies admitted, `helm test` passing, and
 * the host reaching the gateway at the loopback addresses of .cluster/endpoints.json.
 */

jest.setTimeout(300_000);

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const fn = u.protocol === 'https:' ? httpsRequest : httpRequest;
    // The gateway's self-signed certificate: what this checks is the address, not the PKI (the e2e target
    // pins the certificate).
    const req = fn(u, { method: 'GET', headers, rejectUnauthorized: false, agent: false, timeout: 20_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${url}: timed out`)));
    req.on('error', reject);
    req.end();
  });
}

const basic = (key: string): Record<string, string> => ({ authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}` });

interface Obj {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  status?: any;
}
const items = async (args: string[]): Promise<Obj[]> => (JSON.parse(await kubectlOk([...args, '-o', 'json'])) as { items: Obj[] }).items;

describe('pushbase installed with helm on the cluster', () => {
  beforeAll(requireCluster);

  it('answers on the host loopback addresses of .cluster/endpoints.json, with its keys and admin token', async () => {
    const e = endpoints();
    expect(e.public).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(e.admin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(e.adminToken.length).toBeGreaterThanOrEqual(32);
    expect(e.apiKeys.length).toBeGreaterThan(0);
    for (const entry of e.apiKeys) {
      const [key, account] = entry.split(':');
      expect(account).toMatch(/^[a-z0-9][a-z0-9_-]*$/);
      expect((await get(`${e.public}/`, basic(key!))).status).toBe(200);
    }
    expect((await get(`${e.public}/`)).status).toBe(401);
    expect((await get(`${e.public}/`, basic('pb_not-a-key'))).status).toBe(401);
    expect((await get(`${e.admin}/healthz`)).status).toBe(200);
    expect((await get(`${e.admin}/admin/accounts`, { authorization: `Bearer ${e.adminToken}` })).status).toBe(200);
    expect((await get(`${e.admin}/admin/accounts`, { authorization: 'Bearer wrong' })).status).toBe(401);
  });

  it('is a deployed release whose migrate hook Job succeeded and whose Deployments are all available', async () => {
    const status = JSON.parse(await helmOk(['status', RELEASE, '-o', 'json'])) as { info: { status: string } };
    expect(status.info.status).toBe('deployed');
    const [job] = await items(['-n', NAMESPACE, 'get', 'jobs', '-l', 'app.kubernetes.io/component=migrate']);
    expect(job?.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(job?.status?.succeeded).toBe(1);
    const deployments = await items(['-n', NAMESPACE, 'get', 'deployments', '-l', `app.kubernetes.io/instance=${RELEASE}`]);
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(['gateway', 'projector', 'records', 'schema'].map((c) => `${RELEASE}-${c}`));
    for (const d of deployments) expect({ name: d.metadata.name, available: d.status?.availableReplicas }).toEqual({ name: d.metadata.name, available: d.spec.replicas });
  });

  it('runs the image this test run built, even on a cluster that was already up with an older build', async () => {
    const id = process.env.PUSHBASE_CLUSTER_IMAGE_ID;
    expect(id).toMatch(/^(sha256:)?[0-9a-f]{12,}$/);
    const images = (await kubectlOk(['-n', NAMESPACE, 'get', 'pods', '-l', `app.kubernetes.io/instance=${RELEASE}`, '--field-selector=status.phase=Running', '-o', 'jsonpath={.items[*].spec.containers[*].image}'])).split(' ');
    expect(new Set(images)).toEqual(new Set([`localhost/pushbase:${buildTag(id as string)}`]));
  });

  it('runs in a namespace where the API server enforces the restricted Pod Security profile', async () => {
    const ns = JSON.parse(await kubectlOk(['get', 'namespace', NAMESPACE, '-o', 'json'])) as Obj;
    expect(ns.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    // A root pod is refused there by admission (a server-side dry run goes through it and stores nothing).
    const refused = await kubectl(['-n', NAMESPACE, 'run', 'root-probe', '--image=localhost/pushbase:dev', '--image-pull-policy=Never', '--restart=Never', '--dry-run=server', '--overrides={"spec":{"securityContext":{"runAsUser":0}}}', '--', 'true']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/violates PodSecurity "restricted/);
    // Every pod of the release was admitted under it and runs.
    const pods = await items(['-n', NAMESPACE, 'get', 'pods', '-l', `app.kubernetes.io/instance=${RELEASE}`, '--field-selector=status.phase=Running']);
    expect(pods.length).toBeGreaterThanOrEqual(4);
  });

  it('reaches Kafka, ClickHouse and Redis through selector-less Services with explicit endpoints', async () => {
    for (const name of ['kafka', 'clickhouse', 'redis']) {
      const svc = JSON.parse(await kubectlOk(['-n', NAMESPACE, 'get', 'service', name, '-o', 'json'])) as Obj;
      expect({ name, selector: svc.spec.selector }).toEqual({ name, selector: undefined });
      const slices = await items(['-n', NAMESPACE, 'get', 'endpointslices', '-l', `kubernetes.io/service-name=${name}`]);
      expect({ name, addresses: slices.flatMap((s: any) => s.endpoints.flatMap((p: any) => p.addresses)) }).toEqual({ name, addresses: [DEPS_IP] });
    }
  });

  it('has its NetworkPolicies admitted by the API server', async () => {
    const manifest = await helmOk(['get', 'manifest', RELEASE]);
    const rendered = [...manifest.matchAll(/kind: NetworkPolicy\nmetadata:\n {2}name: (\S+)/g)].map((m) => m[1]!).sort();
    expect(rendered.length).toBeGreaterThanOrEqual(4);
    const stored = (await items(['-n', NAMESPACE, 'get', 'networkpolicies'])).map((p) => p.metadata.name).sort();
    expect(stored).toEqual(rendered);
  });

  it('passes helm test: the chart pings the API with a key from its Secret', async () => {
    const r = await helm(['test', RELEASE, '--logs', '--timeout', '5m']);
    expect({ code: r.code, stderr: r.code === 0 ? '' : r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(/Phase:\s+Succeeded/);
    expect(r.stdout).toContain('GET / with the key: 200, without: 401');
  });
});

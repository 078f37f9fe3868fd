import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { down, healthy, importImage, kubectlFor, layout, status } from '../../deploy/cluster/cluster';
import { readClusterConfig, NODE_NAME } from '../../deploy/cluster/config';
import { buildImageArchive, busyboxImage } from '../../deploy/cluster/images';
import { hostSnapshot, type HostSnapshot } from './host';

/*
 * The cluster that test/cluster/global-setup.js brought up is a real one: the node is Ready, a pod runs
 * from an image built here and imported with ctr, a ClusterIP Service resolves through CoreDNS from another
 * pod and answers, `kubectl exec` and `logs` reach the kubelet, and a namespace enforcing the restricted Pod
 * Security profile refuses a privileged pod. Meanwhile and after `down`, the host is as it was.
 */

const run = promisify(execFile);
const config = readClusterConfig(process.env, path.join(__dirname, '..', '..'));
const { kubectl, kubeconfig } = kubectlFor(config);
const ns = `cluster-test-${randomBytes(3).toString('hex')}`;
const restrictedNs = `${ns}-restricted`;
const image = `pushbase.local/busybox:test-${randomBytes(3).toString('hex')}`;

async function k(...args: string[]): Promise<string> {
  try {
    return (await run(kubectl, ['--kubeconfig', kubeconfig, ...args], { maxBuffer: 16 << 20 })).stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')}: ${err.stderr ?? err.message}`);
  }
}

async function kApply(obj: unknown, ...extra: string[]): Promise<string> {
  const child = execFile(kubectl, ['--kubeconfig', kubeconfig, 'apply', '-f', '-', ...extra]);
  const out: string[] = [];
  const err: string[] = [];
  child.stdout!.on('data', (d: string) => out.push(d));
  child.stderr!.on('data', (d: string) => err.push(d));
  child.stdin!.end(JSON.stringify(obj));
  const code = await new Promise<number | null>((r) => child.on('close', r));
  if (code !== 0) throw new Error(err.join('') || `kubectl apply exited with ${code}`);
  return out.join('');
}

/** A pod that passes the restricted profile: non-root, no privilege escalation, no capabilities, seccomp. */
function pod(name: string, namespace: string, command: string, extra: Record<string, unknown> = {}): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: { app: name } },
    spec: {
      restartPolicy: 'Never',
      securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'main',
          image,
          imagePullPolicy: 'Never',
          command: ['/bin/busybox', 'sh', '-c', command],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          ...extra,
        },
      ],
    },
  };
}

function privilegedPod(namespace: string): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'privileged', namespace },
    spec: { containers: [{ name: 'main', image, imagePullPolicy: 'Never', command: ['/bin/busybox', 'sleep', '3600'], securityContext: { privileged: true } }] },
  };
}

const before = JSON.parse(readFileSync(process.env.PUSHBASE_CLUSTER_HOST_BEFORE ?? '/nonexistent: the global setup did not run', 'utf8')) as HostSnapshot;

/** Everything but the pod cgroups, which exist while pods run and are removed by `down`. */
function comparable(s: HostSnapshot): Omit<HostSnapshot, 'podCgroups'> {
  const { podCgroups: _ignored, ...rest } = s;
  return rest;
}

describe('the single-node cluster', () => {
  beforeAll(async () => {
    expect(await healthy(config)).toBe(true);
    const tar = path.join(process.env.PUSHBASE_CLUSTER_TEST_TMP!, 'busybox.tar');
    await buildImageArchive(busyboxImage(image), tar);
    await importImage(config, tar);
    await k('create', 'namespace', ns);
    await k('create', 'namespace', restrictedNs);
    await k('label', 'namespace', restrictedNs, 'pod-security.kubernetes.io/enforce=restricted');
  });

  it('has a Ready node running the built Kubernetes version', async () => {
    const nodes = JSON.parse(await k('get', 'nodes', '-o', 'json')) as { items: { metadata: { name: string }; status: { conditions: { type: string; status: string }[]; nodeInfo: { kubeletVersion: string } } }[] };
    expect(nodes.items.map((n) => n.metadata.name)).toEqual([NODE_NAME]);
    const node = nodes.items[0]!;
    expect(node.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(node.status.nodeInfo.kubeletVersion).toBe(JSON.parse(await k('version', '-o', 'json')).serverVersion.gitVersion as string);
  });

  it('leaves the host as it was while it runs', async () => {
    expect(comparable(await hostSnapshot())).toEqual(comparable(before));
  });

  it('runs a pod from a locally built image, with logs and exec through the kubelet', async () => {
    await kApply(pod('hello', ns, 'echo hello-from-pushbase-cluster; exec busybox sleep 3600'));
    await k('-n', ns, 'wait', '--for=condition=Ready', 'pod/hello', '--timeout=180s');
    await expect(k('-n', ns, 'logs', 'hello')).resolves.toContain('hello-from-pushbase-cluster');
    await expect(k('-n', ns, 'exec', 'hello', '--', '/bin/busybox', 'id', '-u')).resolves.toBe('65534\n');
  });

  it('resolves a ClusterIP Service through CoreDNS from another pod, which reaches it', async () => {
    await kApply(pod('web', ns, 'busybox mkdir -p /tmp/www && echo served-by-web > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www', { ports: [{ containerPort: 8080 }] }));
    await kApply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: ns }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] } });
    await k('-n', ns, 'wait', '--for=condition=Ready', 'pod/web', '--timeout=180s');
    const clusterIP = (await k('-n', ns, 'get', 'service', 'web', '-o', 'jsonpath={.spec.clusterIP}')).trim();
    expect(clusterIP).toMatch(/^10\.96\./);
    const fqdn = `web.${ns}.svc.cluster.local`;
    // nc, not wget: Debian's static busybox wget crashes where no glibc NSS library is around (the image).
    await kApply(pod('client', ns, `busybox nslookup ${fqdn} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 10 ${fqdn} 80`));
    await k('-n', ns, 'wait', '--for=jsonpath={.status.phase}=Succeeded', 'pod/client', '--timeout=180s').catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}\nclient logs:\n${await k('-n', ns, 'logs', 'client').catch(() => '')}`);
    });
    const logs = await k('-n', ns, 'logs', 'client');
    expect(logs).toContain(`Address: ${clusterIP}`);
    expect(logs).toContain('served-by-web');
  });

  it('enforces the restricted Pod Security profile on a labelled namespace', async () => {
    await expect(kApply(privilegedPod(restrictedNs))).rejects.toThrow(/violates PodSecurity "restricted:latest".*privileged/s);
    // The same pod passes the API server elsewhere: the label refused it, not a server-wide ban.
    await expect(kApply(privilegedPod(ns), '--dry-run=server')).resolves.toContain('created (server dry run)');
    // And a pod that meets the profile runs there.
    await kApply(pod('compliant', restrictedNs, 'echo compliant-ok'));
    await k('-n', restrictedNs, 'wait', '--for=jsonpath={.status.phase}=Succeeded', 'pod/compliant', '--timeout=180s');
  });

  it('stops with cluster:down, leaving no process, mount, link, rule or cgroup behind', async () => {
    const l = layout(config);
    const state = JSON.parse(readFileSync(l.state, 'utf8')) as { holder: { mntNs: string; netNs: string } };
    const st = await status(config);
    expect(st.up).toBe(true);
    expect((await hostSnapshot()).podCgroups.length).toBeGreaterThan(0);

    await expect(down(config, () => undefined)).resolves.toBe(true);

    const leftInNamespace = readdirSync('/proc')
      .filter((e) => /^\d+$/.test(e))
      .filter((pid) => {
        try {
          return [readlinkSync(`/proc/${pid}/ns/mnt`), readlinkSync(`/proc/${pid}/ns/net`)].some((x) => x === state.holder.mntNs || x === state.holder.netNs);
        } catch {
          return false;
        }
      });
    expect(leftInNamespace).toEqual([]);
    const after = await hostSnapshot();
    expect(after.podCgroups).toEqual([]);
    expect(comparable(after)).toEqual(comparable(before));
    // The host-side socat is gone too: nothing listens on the API port any more.
    expect((await status(config)).apiReady).toBe(false);
    await expect(new Promise((resolve) => {
      const s = connect({ host: '127.0.0.1', port: config.apiHostPort }, () => resolve('open'));
      s.on('error', () => resolve('closed'));
    })).resolves.toBe('closed');
  });
});

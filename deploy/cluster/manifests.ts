import { API_PORT, COREDNS_IMAGE, DNS_SERVICE_IP, NODE_IP, NODE_NAME, NODE_POD_CIDR, POD_CIDR, SERVICE_CIDR } from './config';

/*
 * The configuration files of the cluster's components, and the add-on objects (CoreDNS) applied once the
 * API server answers. JSON throughout: every component and kubectl read it as YAML's subset.
 */


/** containerd 1.6's CRI plugin: runc through cgroupfs, CNI from Debian's plugins, our sandbox image. */
export function containerdConfig(cniConfDir: string, pauseImage: string): string {
  return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${pauseImage}"
  # Without CAP_SYS_RESOURCE runc cannot lower a container's oom_score_adj below its own, and every pod
  # sandbox fails ("can't get final child's PID from pipe"); this clamps the value instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cniConfDir}"
`;
}

/** Debian's bridge + host-local + portmap plugins (containerd adds loopback itself). */
export function cniConfig(): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'pushbase',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: NODE_POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export function kubeletConfig(pki: { ca: string }, resolvConf: string): string {
  return JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: NODE_IP,
      healthzBindAddress: '127.0.0.1',
      authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: pki.ca } },
      // Only the API server (client certificate of our CA) reaches the kubelet, and only inside the namespace.
      authorization: { mode: 'AlwaysAllow' },
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
      cgroupDriver: 'cgroupfs',
      // This machine mounts cgroup v1 controllers (v2 only beside them); 1.34 still runs on them when told.
      failCgroupV1: false,
      failSwapOn: false,
      // The kubelet may not lower its own oom_score_adj here (no CAP_SYS_RESOURCE): keep it where it is.
      oomScoreAdj: 0,
      clusterDNS: [DNS_SERVICE_IP],
      clusterDomain: 'cluster.local',
      resolvConf,
      podCIDR: NODE_POD_CIDR,
      serializeImagePulls: false,
      // Images are imported, never pulled: keep them however full the disk is.
      imageGCHighThresholdPercent: 100,
      evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    },
    null,
    2,
  );
}

export function kubeProxyConfig(kubeconfigPath: string): string {
  return JSON.stringify(
    {
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      mode: 'iptables',
      clientConnection: { kubeconfig: kubeconfigPath },
      hostnameOverride: NODE_NAME,
      clusterCIDR: POD_CIDR,
      bindAddress: NODE_IP,
      healthzBindAddress: '127.0.0.1:10256',
      metricsBindAddress: '127.0.0.1:10249',
      oomScoreAdj: 0,
      // Zero leaves each conntrack setting as it is: nf_conntrack_max and the hash size are the whole
      // machine's, not the namespace's.
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s', udpTimeout: '0s', udpStreamTimeout: '0s' },
    },
    null,
    2,
  );
}

export interface ApiServerFiles {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  readonly kubeletClientCert: string;
  readonly kubeletClientKey: string;
  readonly saKey: string;
  readonly saPub: string;
}

export function apiServerArgs(f: ApiServerFiles): string[] {
  return [
    '--etcd-servers=http://127.0.0.1:2379',
    `--bind-address=${NODE_IP}`,
    `--advertise-address=${NODE_IP}`,
    `--secure-port=${API_PORT}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    `--tls-cert-file=${f.cert}`,
    `--tls-private-key-file=${f.key}`,
    `--client-ca-file=${f.ca}`,
    `--kubelet-client-certificate=${f.kubeletClientCert}`,
    `--kubelet-client-key=${f.kubeletClientKey}`,
    // The node's name resolves nowhere; its InternalIP is on the namespace's bridge.
    '--kubelet-preferred-address-types=InternalIP',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${f.saPub}`,
    `--service-account-signing-key-file=${f.saKey}`,
    '--authorization-mode=Node,RBAC',
    // The defaults (PodSecurity among them) plus the node restriction every real cluster has.
    '--enable-admission-plugins=NodeRestriction',
    // Privileged pods are allowed by the server, so a namespace's Pod Security label is what refuses them.
    '--allow-privileged=true',
    '--profiling=false',
  ];
}

/** What the controller manager and the scheduler share: one kubeconfig for everything, loopback, one replica. */
function controlPlaneClientArgs(kubeconfigPath: string): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--authentication-kubeconfig=${kubeconfigPath}`,
    `--authorization-kubeconfig=${kubeconfigPath}`,
    '--bind-address=127.0.0.1',
    '--leader-elect=false',
  ];
}

export function controllerManagerArgs(kubeconfigPath: string, f: { ca: string; caKey: string; saKey: string }): string[] {
  return [
    ...controlPlaneClientArgs(kubeconfigPath),
    `--root-ca-file=${f.ca}`,
    `--cluster-signing-cert-file=${f.ca}`,
    `--cluster-signing-key-file=${f.caKey}`,
    `--service-account-private-key-file=${f.saKey}`,
    '--use-service-account-credentials=true',
    '--allocate-node-cidrs=true',
    `--cluster-cidr=${POD_CIDR}`,
    '--node-cidr-mask-size=24',
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    '--profiling=false',
  ];
}

export function schedulerArgs(kubeconfigPath: string): string[] {
  return [...controlPlaneClientArgs(kubeconfigPath), '--profiling=false'];
}

export function etcdArgs(): string[] {
  return [
    '--name=pushbase',
    // On the namespace's tmpfs: every `cluster:up` starts from an empty cluster.
    '--data-dir=/var/lib/etcd',
    '--listen-client-urls=http://127.0.0.1:2379',
    '--advertise-client-urls=http://127.0.0.1:2379',
    '--listen-peer-urls=http://127.0.0.1:2380',
    '--initial-advertise-peer-urls=http://127.0.0.1:2380',
    '--initial-cluster=pushbase=http://127.0.0.1:2380',
    '--listen-metrics-urls=http://127.0.0.1:2381',
    // Memory-backed already; fsync buys nothing.
    '--unsafe-no-fsync',
  ];
}

const COREFILE = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loop
    reload
}
`;

/** CoreDNS as the cluster's DNS: a Deployment behind the kube-dns Service at DNS_SERVICE_IP, as kubeadm sets it up. */
export function coreDnsObjects(): unknown {
  const labels = { 'k8s-app': 'kube-dns' };
  const ns = 'kube-system';
  return {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'coredns', namespace: ns } },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'system:coredns' },
        rules: [
          { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'system:coredns' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
        subjects: [{ kind: 'ServiceAccount', name: 'coredns', namespace: ns }],
      },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'coredns', namespace: ns }, data: { Corefile: COREFILE } },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'coredns', namespace: ns, labels },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              serviceAccountName: 'coredns',
              priorityClassName: 'system-cluster-critical',
              dnsPolicy: 'Default',
              containers: [
                {
                  name: 'coredns',
                  image: COREDNS_IMAGE,
                  imagePullPolicy: 'Never',
                  args: ['-conf', '/etc/coredns/Corefile'],
                  ports: [
                    { name: 'dns', containerPort: 53, protocol: 'UDP' },
                    { name: 'dns-tcp', containerPort: 53, protocol: 'TCP' },
                  ],
                  resources: { requests: { cpu: '50m', memory: '40Mi' }, limits: { memory: '170Mi' } },
                  securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } },
                  volumeMounts: [{ name: 'config', mountPath: '/etc/coredns', readOnly: true }],
                  livenessProbe: { httpGet: { path: '/health', port: 8080 }, initialDelaySeconds: 5, periodSeconds: 10 },
                  readinessProbe: { httpGet: { path: '/ready', port: 8181 }, periodSeconds: 2 },
                },
              ],
              volumes: [{ name: 'config', configMap: { name: 'coredns' } }],
            },
          },
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'kube-dns', namespace: ns, labels },
        spec: {
          clusterIP: DNS_SERVICE_IP,
          selector: labels,
          ports: [
            { name: 'dns', port: 53, protocol: 'UDP' },
            { name: 'dns-tcp', port: 53, protocol: 'TCP' },
          ],
        },
      },
    ],
  };
}

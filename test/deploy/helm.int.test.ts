/*
 * The Helm chart (helm/pushbase) with a real helm, built from source by scripts/ensure-helm.js (jest's
 * global setup runs it; the binary is cached per machine): `helm lint --strict`, `helm template` with the
 * default values and with ci/production-values.yaml, every rendered object validated against the
 * Kubernetes API schemas (kubernetes-models, offline) and checked for what docs/helm.md promises of it, and bad
 * values refused at template time by values.schema.json or the chart's own checks.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseTrustedProxies } from '@pushbase/gateway';
import { loadGatewayConfig } from '../../services/gateway/src/config';
import { loadSchemaConfig } from '../../services/schema/src/config';
import { defaultRecordsWriteWorkers, loadRecordsConfig } from '../../services/records/src/config';
import { loadMigrateConfig, loadProjectorConfig } from '../../services/projector/src/config';
import { SERVICES } from '../../services/cli/src/distributed';
import { byKind, chart, component, envOf, helm, HELM_VERSION, isHook, matches, named, render, root, type K8sObject } from './chart';

/** Each object against the Kubernetes OpenAPI schemas kubernetes-models bundles (an ESM-only package, hence a child process). */
function schemaProblems(objects: K8sObject[]): { kind: string; name: string; error: string }[] {
  const script = `
    const objects = JSON.parse(await new Promise((resolve) => { let s = ''; process.stdin.on('data', (d) => (s += d)); process.stdin.on('end', () => resolve(s)); }));
    const problems = [];
    for (const o of objects) {
      let Model;
      try { Model = (await import('kubernetes-models/' + o.apiVersion + '/' + o.kind))[o.kind]; } catch (e) { problems.push({ kind: o.kind, name: o.metadata.name, error: 'no schema for ' + o.apiVersion + ' ' + o.kind }); continue; }
      try { new Model(o).validate(); } catch (e) { problems.push({ kind: o.kind, name: o.metadata.name, error: e.message }); }
    }
    process.stdout.write(JSON.stringify(problems));`;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, input: JSON.stringify(objects), encoding: 'utf8', timeout: 60_000 });
  if (res.status !== 0) throw new Error(`schema validation did not run: ${res.stderr}`);
  return JSON.parse(res.stdout);
}

/** Everything every rendering must satisfy, whatever the values. */
function checkCommon(objects: K8sObject[], release: string, secrets: Record<string, string>): void {
  const name = (c: string): string => `${release}-pushbase-${c}`;
  const deployments = byKind(objects, 'Deployment');
  const job = byKind(objects, 'Job');
  const pods: { owner: K8sObject; spec: any; labels: Record<string, string> }[] = [...deployments, ...job].map((o) => ({ owner: o, spec: o.spec.template.spec, labels: o.spec.template.metadata.labels }));

  // One Deployment per service of the distributed stack, running the same command as `npm run start:distributed`.
  expect(deployments.map((d) => component(d)).sort()).toEqual([...SERVICES].sort());
  for (const d of deployments) {
    const containers = d.spec.template.spec.containers;
    expect(containers).toHaveLength(1);
    expect({ service: component(d), args: containers[0].args }).toEqual({ service: component(d), args: [component(d)] });
    expect(matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels)).toBe(true);
  }

  // Hardened pods and containers, resources, read-only root with emptyDirs where they write.
  const serviceAccounts = byKind(objects, 'ServiceAccount');
  for (const { owner, spec } of pods) {
    const where = `${owner.kind}/${owner.metadata.name}`;
    expect({ where, pod: spec.securityContext }).toMatchObject({ where, pod: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } } });
    expect(spec.securityContext.runAsUser).not.toBe(0);
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(serviceAccounts.map((s) => s.metadata.name)).toContain(spec.serviceAccountName);
    for (const c of spec.containers) {
      expect({ where, container: c.securityContext }).toEqual({
        where,
        container: { runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, privileged: false, capabilities: { drop: ['ALL'] } },
      });
      for (const kind of ['requests', 'limits']) {
        expect({ where, kind, cpu: c.resources?.[kind]?.cpu !== undefined, memory: c.resources?.[kind]?.memory !== undefined }).toEqual({ where, kind, cpu: true, memory: true });
      }
      const volumes = new Map<string, any>(spec.volumes.map((v: any) => [v.name, v]));
      const tmp = c.volumeMounts.find((m: any) => m.mountPath === '/tmp');
      expect(volumes.get(tmp?.name)?.emptyDir).toBeDefined();
      for (const m of c.volumeMounts) {
        const v = volumes.get(m.name);
        // Writable mounts are emptyDirs; a Secret is mounted read-only.
        expect(v?.emptyDir !== undefined || (v?.secret !== undefined && m.readOnly === true)).toBe(true);
      }
      expect(c.image).toBe(spec.containers[0].image);
    }
  }

  // The gRPC services: 0.0.0.0, a drain of a few seconds, native gRPC probes on their port, a grace period
  // covering drain and shutdown; a ClusterIP Service in front; HPA and PDB.
  for (const svc of ['schema', 'records']) {
    const d = named(objects, 'Deployment', name(svc));
    const c = d.spec.template.spec.containers[0];
    const env = envOf(c, secrets);
    const port = c.ports.find((p: any) => p.name === 'grpc').containerPort;
    expect(env.PUSHBASE_GRPC_HOST).toBe('0.0.0.0');
    const drainMs = Number(env.PUSHBASE_GRPC_DRAIN_MS);
    expect(drainMs).toBeGreaterThanOrEqual(1000);
    expect(drainMs).toBeLessThanOrEqual(30_000);
    expect(d.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThanOrEqual(drainMs + Number(env.PUSHBASE_SHUTDOWN_TIMEOUT_MS) + 5000);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) expect({ svc, probe, grpc: c[probe]?.grpc }).toEqual({ svc, probe, grpc: { port } });
    // Readiness sees NOT_SERVING before the drain ends, so the pod leaves the Service while it still serves.
    expect(c.readinessProbe.periodSeconds * (c.readinessProbe.failureThreshold ?? 3) * 1000).toBeLessThan(drainMs);
    const config = svc === 'schema' ? loadSchemaConfig(env) : loadRecordsConfig(env);
    expect(config.grpc).toEqual({ host: '0.0.0.0', port, drainMs, token: expect.stringMatching(/^[!-~]{32,}$/) });
    const service = named(objects, 'Service', name(svc));
    expect(matches(service.spec.selector, d.spec.template.metadata.labels)).toBe(true);
    expect(service.spec.ports).toEqual([expect.objectContaining({ name: 'grpc', port, targetPort: 'grpc' })]);
  }

  // The records pod decides writes in threads sized to its CPU limit by the service's own rule.
  const records = named(objects, 'Deployment', name('records')).spec.template.spec.containers[0];
  const limit = String(records.resources.limits.cpu);
  const limitCores = limit.endsWith('m') ? Number(limit.slice(0, -1)) / 1000 : Number(limit);
  const workers = loadRecordsConfig(envOf(records, secrets)).writeWorkers;
  expect({ limit, workers }).toEqual({ limit, workers: defaultRecordsWriteWorkers(Math.floor(limitCores)) });

  // Metrics (docs/metrics.md): schema, records and the projector serve GET /metrics on a listener of their
  // own, on 0.0.0.0 at the port the container names `metrics`; the gateway on its admin port. Each pod
  // tells Prometheus's annotation-based discovery where.
  for (const svc of ['schema', 'records', 'projector']) {
    const d = named(objects, 'Deployment', name(svc));
    const c = d.spec.template.spec.containers[0];
    const env = envOf(c, secrets);
    const port = c.ports.find((p: any) => p.name === 'metrics')?.containerPort as number;
    expect({ svc, port }).toEqual({ svc, port: expect.any(Number) });
    const config = svc === 'schema' ? loadSchemaConfig(env) : svc === 'records' ? loadRecordsConfig(env) : loadProjectorConfig(env);
    expect(config.metrics).toEqual({ host: '0.0.0.0', port });
    expect(d.spec.template.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port), 'prometheus.io/path': '/metrics' });
  }
  const gatewayPod = named(objects, 'Deployment', name('gateway')).spec.template;
  const gatewayAdminPort = gatewayPod.spec.containers[0].ports.find((p: any) => p.name === 'admin').containerPort as number;
  expect(gatewayPod.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(gatewayAdminPort), 'prometheus.io/path': '/metrics' });

  // The gateway: HTTP probes on the admin listener's /healthz, reachable from the kubelet (0.0.0.0);
  // the gRPC services at their Services' names and ports; the admin token from the Secret.
  const gateway = named(objects, 'Deployment', name('gateway'));
  const gc = gateway.spec.template.spec.containers[0];
  const adminPort = gc.ports.find((p: any) => p.name === 'admin').containerPort;
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) expect({ probe, http: gc[probe]?.httpGet }).toEqual({ probe, http: { path: '/healthz', port: 'admin' } });
  // The projector: /readyz and /healthz on its metrics listener, which listens on 0.0.0.0 for the kubelet;
  // its stall time in milliseconds from projector.stallSeconds.
  const pc = named(objects, 'Deployment', name('projector')).spec.template.spec.containers[0];
  expect(pc.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
  expect(pc.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
  expect(pc.env).toEqual(expect.arrayContaining([{ name: 'PUSHBASE_METRICS_HOST', value: '0.0.0.0' }, { name: 'PUSHBASE_PROJECTOR_STALL_MS', value: '180000' }]));
  const gatewayService = named(objects, 'Service', name('gateway'));
  expect(matches(gatewayService.spec.selector, gateway.spec.template.metadata.labels)).toBe(true);
  // The public Service carries the public port only; the admin listener has a ClusterIP Service of its own.
  expect(gatewayService.spec.ports.map((p: any) => p.targetPort)).toEqual([expect.stringMatching(/^https?$/)]);
  const adminService = named(objects, 'Service', name('gateway-admin'));
  expect(adminService.spec.type).toBe('ClusterIP');
  expect(matches(adminService.spec.selector, gateway.spec.template.metadata.labels)).toBe(true);
  expect(adminService.spec.ports).toEqual([{ name: 'admin', port: adminPort, targetPort: 'admin', protocol: 'TCP' }]);
  for (const svc of ['schema', 'records']) {
    const service = named(objects, 'Service', name(svc));
    const variable = svc === 'schema' ? 'PUSHBASE_SCHEMA_ADDRESS' : 'PUSHBASE_RECORDS_ADDRESS';
    expect(gc.env.find((e: any) => e.name === variable)?.value).toBe(`${service.metadata.name}:${service.spec.ports[0].port}`);
  }
  const tokenRef = gc.env.find((e: any) => e.name === 'PUSHBASE_ADMIN_TOKEN')?.valueFrom?.secretKeyRef;
  expect(tokenRef).toEqual({ name: expect.any(String), key: expect.any(String) });
  const grace = gateway.spec.template.spec.terminationGracePeriodSeconds;
  const preStop = gc.lifecycle?.preStop?.sleep?.seconds;
  expect(preStop).toBeGreaterThanOrEqual(1);
  expect(grace * 1000).toBeGreaterThanOrEqual(preStop * 1000 + Number(gc.env.find((e: any) => e.name === 'PUSHBASE_SHUTDOWN_TIMEOUT_MS').value));
  const gatewayEnv = envOf(gc, { ...secrets, [`${tokenRef.name}/${tokenRef.key}`]: 'a-generated-admin-token-0123456789' });
  expect(gatewayEnv.PUSHBASE_ADMIN_HOST).toBe('0.0.0.0');
  const gatewayConfig = loadGatewayConfig(gatewayEnv);
  expect(gatewayConfig.adminPort).toBe(adminPort);
  expect(gatewayConfig.adminToken).toBe('a-generated-admin-token-0123456789');

  // The gRPC token: one key of one Secret, sent by the gateway and required by both services, which roll
  // with the gateways when the chart's Secret changes.
  const grpcTokenRef = gc.env.find((e: any) => e.name === 'PUSHBASE_GRPC_TOKEN')?.valueFrom?.secretKeyRef;
  expect(grpcTokenRef).toEqual({ name: tokenRef.name, key: expect.any(String) });
  expect(gatewayConfig.grpcToken).toMatch(/^[!-~]{32,}$/);
  for (const svc of ['schema', 'records']) {
    const pod = named(objects, 'Deployment', name(svc)).spec.template;
    const c = pod.spec.containers[0];
    expect({ svc, ref: c.env.find((e: any) => e.name === 'PUSHBASE_GRPC_TOKEN')?.valueFrom?.secretKeyRef }).toEqual({ svc, ref: grpcTokenRef });
    expect((svc === 'schema' ? loadSchemaConfig : loadRecordsConfig)(envOf(c, secrets)).grpc.token).toBe(gatewayConfig.grpcToken);
    expect(pod.metadata.annotations['checksum/auth']).toMatch(/^[0-9a-f]{64}$/);
  }

  // The projector: no more replicas than the topic's partitions (as migrate creates it), its config parses.
  const projector = named(objects, 'Deployment', name('projector'));
  const migrateJob = named(objects, 'Job', name('migrate'));
  const migrateEnv = envOf(migrateJob.spec.template.spec.containers[0], secrets);
  expect(projector.spec.replicas).toBeLessThanOrEqual(Number(migrateEnv.PUSHBASE_KAFKA_PARTITIONS));
  expect(loadProjectorConfig(envOf(projector.spec.template.spec.containers[0], secrets)).kafka.topic).toBe(loadMigrateConfig(migrateEnv).kafka.topic);

  // The migrate hook: before install and upgrade, `pushbase migrate`, never restarted in place; its
  // ServiceAccount is a hook made before it (the release's own objects do not exist yet).
  expect(migrateJob.metadata.annotations?.['helm.sh/hook']?.split(',').sort()).toEqual(['pre-install', 'pre-upgrade']);
  expect(migrateJob.spec.template.spec.containers[0].args).toEqual(['migrate']);
  expect(migrateJob.spec.template.spec.restartPolicy).toBe('Never');
  const migrateAccount = named(objects, 'ServiceAccount', migrateJob.spec.template.spec.serviceAccountName);
  expect(migrateAccount.metadata.annotations?.['helm.sh/hook']).toBe(migrateJob.metadata.annotations?.['helm.sh/hook']);
  expect(Number(migrateAccount.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(Number(migrateJob.metadata.annotations?.['helm.sh/hook-weight']));
  // The release's other objects are no hooks, but `helm test`'s pod: the image itself asking the gateway's
  // Service with a key from the chart's Secret, as hardened as the services' pods.
  expect(objects.filter(isHook).map((o) => o.metadata.name).sort()).toEqual([name('migrate'), name('migrate'), name('test')]);
  const testPod = named(objects, 'Pod', name('test'));
  expect(testPod.metadata.annotations?.['helm.sh/hook']).toBe('test');
  expect(testPod.spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  expect(testPod.spec.containers[0].securityContext).toEqual({ runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, privileged: false, capabilities: { drop: ['ALL'] } });
  expect(testPod.spec.containers[0].image).toBe(projector.spec.template.spec.containers[0].image);
  expect(testPod.spec.containers[0].env.find((e: any) => e.name === 'API_KEYS')?.valueFrom?.secretKeyRef?.name).toBe(grpcTokenRef.name);

  // HPA and PDB for the gateway and the stateless gRPC services, aimed at their Deployments.
  for (const hpa of byKind(objects, 'HorizontalPodAutoscaler')) {
    const target = named(objects, 'Deployment', hpa.spec.scaleTargetRef.name);
    expect(['gateway', 'schema', 'records']).toContain(component(target));
    expect(target.spec.replicas).toBeUndefined();
    expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
    expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } } }]);
  }
  const pdbs = byKind(objects, 'PodDisruptionBudget');
  expect(pdbs.map((p) => component(p)).sort()).toEqual(['gateway', 'records', 'schema']);
  for (const pdb of pdbs) {
    const target = named(objects, 'Deployment', name(component(pdb)!));
    expect(matches(pdb.spec.selector.matchLabels, target.spec.template.metadata.labels)).toBe(true);
    expect(pdb.spec.maxUnavailable).toBeGreaterThanOrEqual(1);
  }

  // NetworkPolicies: every pod is selected by one; only the gateway's pods reach the gRPC ports; the
  // projector takes only scrapes of its metrics port, the migrate Job no connection at all.
  const policies = byKind(objects, 'NetworkPolicy');
  for (const { owner, labels } of pods) expect({ pod: owner.metadata.name, policies: policies.filter((p) => matches(p.spec.podSelector.matchLabels, labels)).length }).toEqual({ pod: owner.metadata.name, policies: 1 });
  const podOf = (c: string): Record<string, string> => pods.find((p) => component(p.owner) === c)!.labels;
  for (const svc of ['schema', 'records']) {
    const policy = policies.find((p) => matches(p.spec.podSelector.matchLabels, podOf(svc)))!;
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const [rule, ...scrapes] = policy.spec.ingress;
    // Anything else it admits reaches the metrics port only.
    for (const scrape of scrapes) expect(scrape.ports).toEqual([{ port: 'metrics', protocol: 'TCP' }]);
    expect(rule.ports).toEqual([{ port: 'grpc', protocol: 'TCP' }]);
    expect(rule.from).toHaveLength(1);
    expect(Object.keys(rule.from[0])).toEqual(['podSelector']);
    // The peer selector picks the gateway's pods and no other component's.
    for (const other of [...SERVICES, 'migrate']) expect({ other, allowed: matches(rule.from[0].podSelector.matchLabels, podOf(other)) }).toEqual({ other, allowed: other === 'gateway' });
  }
  const projectorPolicy = policies.find((p) => matches(p.spec.podSelector.matchLabels, podOf('projector')))!;
  expect(projectorPolicy.spec.policyTypes).toEqual(['Ingress']);
  for (const scrape of projectorPolicy.spec.ingress ?? []) expect(scrape.ports).toEqual([{ port: 'metrics', protocol: 'TCP' }]);
  const migratePolicy = policies.find((p) => matches(p.spec.podSelector.matchLabels, podOf('migrate')))!;
  expect(migratePolicy.spec.policyTypes).toEqual(['Ingress']);
  expect(migratePolicy.spec.ingress ?? []).toEqual([]);
}

/** A rendered Secret's values as envOf reads them ('<Secret>/<key>' → value). */
const secretValues = (secret: K8sObject): Record<string, string> =>
  Object.fromEntries(Object.entries(secret.data ?? {}).map(([key, value]) => [`${secret.metadata.name}/${key}`, Buffer.from(value, 'base64').toString()]));

/** The scrapers metrics.scrapeFrom admits by default: Prometheus's usual namespace. */
const MONITORING = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };

describe('helm/pushbase', () => {
  it(`is rendered by helm ${HELM_VERSION}, built by scripts/ensure-helm.js`, () => {
    const res = helm(['version', '--short']);
    expect(res.status).toBe(0);
    expect(res.stdout.trim()).toBe(HELM_VERSION);
  });

  it('sets only variables docs/configuration.md documents', () => {
    const readme = readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8');
    const production = render('docs', ['-f', path.join(chart, 'ci', 'production-values.yaml')]);
    const variables = new Set<string>();
    for (const o of [...byKind(production, 'Deployment'), ...byKind(production, 'Job')]) for (const e of o.spec.template.spec.containers[0].env) variables.add(e.name as string);
    expect(variables.size).toBeGreaterThan(20);
    expect([...variables].filter((v) => !readme.includes(`\`${v}\``))).toEqual([]);
  });

  it('passes helm lint --strict with the default values and with the production values', () => {
    for (const args of [[], ['-f', path.join(chart, 'ci', 'production-values.yaml')]]) {
      const res = helm(['lint', '--strict', chart, ...args]);
      expect({ args, status: res.status, out: res.stdout + res.stderr }).toEqual({ args, status: 0, out: expect.stringContaining('1 chart(s) linted, 0 chart(s) failed') });
    }
  });

  describe('with the default values', () => {
    const objects = render('pb');

    it('renders objects the Kubernetes API schemas accept', () => {
      expect(objects.length).toBeGreaterThan(15);
      expect(schemaProblems(objects)).toEqual([]);
    });

    it('the validation can fail: an object with a wrong field type is reported', () => {
      const broken = structuredClone(named(objects, 'Deployment', 'pb-pushbase-gateway'));
      broken.spec.template.spec.containers[0].securityContext.runAsNonRoot = 'yes';
      expect(schemaProblems([broken])).toEqual([{ kind: 'Deployment', name: 'pb-pushbase-gateway', error: expect.stringContaining('runAsNonRoot must be boolean') }]);
    });

    it('carries probes, resources, hardened security contexts, HPAs, PDBs, NetworkPolicies and the migrate hook', () => {
      checkCommon(objects, 'pb', secretValues(named(objects, 'Secret', 'pb-pushbase-auth')));
    });

    it('creates the Secret the gateway reads its admin token and a first API key from, and the gRPC token of gateway, schema and records, all generated', () => {
      const secret = named(objects, 'Secret', 'pb-pushbase-auth');
      const token = Buffer.from(secret.data!['admin-token']!, 'base64').toString();
      expect(token).toMatch(/^[A-Za-z0-9]{40}$/);
      const ref = named(objects, 'Deployment', 'pb-pushbase-gateway').spec.template.spec.containers[0].env.find((e: any) => e.name === 'PUSHBASE_ADMIN_TOKEN').valueFrom.secretKeyRef;
      expect(ref).toEqual({ name: 'pb-pushbase-auth', key: 'admin-token' });
      expect(Buffer.from(secret.data!['grpc-token']!, 'base64').toString()).toMatch(/^[A-Za-z0-9]{48}$/);
      // No keys given: one for "default", in the Secret rather than in a gateway's log.
      expect(Buffer.from(secret.data!['api-keys']!, 'base64').toString()).toMatch(/^pb_[A-Za-z0-9]{43}:default$/);
      for (const svc of ['gateway', 'schema', 'records']) {
        const env = named(objects, 'Deployment', `pb-pushbase-${svc}`).spec.template.spec.containers[0].env;
        expect({ svc, ref: env.find((e: any) => e.name === 'PUSHBASE_GRPC_TOKEN')?.valueFrom?.secretKeyRef }).toEqual({ svc, ref: { name: 'pb-pushbase-auth', key: 'grpc-token' } });
      }
    });

    it('without an ingress: the gateway serves HTTPS itself, its public port open to any client, its admin port only to the scrapers', () => {
      expect(byKind(objects, 'Ingress')).toEqual([]);
      const c = named(objects, 'Deployment', 'pb-pushbase-gateway').spec.template.spec.containers[0];
      expect(c.env.map((e: any) => e.name)).not.toContain('PUSHBASE_BEHIND_TLS_PROXY');
      const policy = named(objects, 'NetworkPolicy', 'pb-pushbase-gateway');
      expect(policy.spec.ingress).toEqual([{ ports: [{ port: 'https', protocol: 'TCP' }] }, { ports: [{ port: 'admin', protocol: 'TCP' }], from: [MONITORING] }]);
    });

    it.each(['LoadBalancer', 'NodePort'])('with gateway.service.type %s, exposes the public port only; the admin Service stays ClusterIP', (type) => {
      const exposed = render('pb', ['--set', `gateway.service.type=${type}`]);
      expect(schemaProblems(exposed.filter((o) => o.kind === 'Service'))).toEqual([]);
      const services = byKind(exposed, 'Service').filter((o) => component(o) === 'gateway');
      expect(services.map((o) => [o.metadata.name, o.spec.type, o.spec.ports.map((p: any) => p.name)]).sort()).toEqual([
        ['pb-pushbase-gateway', type, ['https']],
        ['pb-pushbase-gateway-admin', 'ClusterIP', ['admin']],
      ]);
    });

    it('admits scrapes of every metrics port from the monitoring namespace only, and none at all with metrics.scrapeFrom empty', () => {
      for (const svc of ['schema', 'records', 'projector']) {
        const policy = named(objects, 'NetworkPolicy', `pb-pushbase-${svc}`);
        expect(policy.spec.ingress.filter((r: any) => r.ports[0].port === 'metrics')).toEqual([{ from: [MONITORING], ports: [{ port: 'metrics', protocol: 'TCP' }] }]);
      }
      const closed = render('pb', ['--set-json', 'metrics.scrapeFrom=[]', '--set', 'metrics.podAnnotations=false']);
      expect(named(closed, 'NetworkPolicy', 'pb-pushbase-projector').spec.ingress ?? []).toEqual([]);
      expect(named(closed, 'NetworkPolicy', 'pb-pushbase-schema').spec.ingress).toHaveLength(1);
      expect(named(closed, 'NetworkPolicy', 'pb-pushbase-gateway').spec.ingress).toEqual([{ ports: [{ port: 'https', protocol: 'TCP' }] }]);
      expect(named(closed, 'Deployment', 'pb-pushbase-projector').spec.template.metadata.annotations ?? {}).toEqual({});
    });

    it('points at Kafka, ClickHouse and Redis by the service names of the commonly used charts', () => {
      const env = envOf(named(objects, 'Deployment', 'pb-pushbase-projector').spec.template.spec.containers[0], {});
      expect(env).toMatchObject({ PUSHBASE_KAFKA_BROKERS: 'kafka:9092', PUSHBASE_CLICKHOUSE_URL: 'http://clickhouse:8123', PUSHBASE_REDIS_URL: 'redis://redis-master:6379' });
    });
  });

  describe('with ci/production-values.yaml (ingress, replicas, an existing Secret)', () => {
    const objects = render('prod', ['-f', path.join(chart, 'ci', 'production-values.yaml')]);
    // What the operator's Secrets would hold.
    const secrets = {
      'pushbase-auth/admin-token': 'an-admin-token-of-the-operator-0123',
      'pushbase-auth/grpc-token': 'a-grpc-token-of-the-operator-0123456789',
      'pushbase-auth/api-keys': `${'k'.repeat(24)}:acme`,
      'pushbase-datastores/clickhouse-url': 'http://u:p@clickhouse.data:8123',
      'pushbase-datastores/redis-url': 'redis://:p@redis-master.data:6379',
    };

    it('renders objects the Kubernetes API schemas accept', () => {
      expect(schemaProblems(objects)).toEqual([]);
    });

    it('carries probes, resources, hardened security contexts, HPAs, PDBs, NetworkPolicies and the migrate hook', () => {
      checkCommon(objects, 'prod', secrets);
    });

    it('reads the admin token, the bootstrap keys and the URLs with credentials from existing Secrets, and creates none', () => {
      expect(byKind(objects, 'Secret')).toEqual([]);
      const env = named(objects, 'Deployment', 'prod-pushbase-gateway').spec.template.spec.containers[0].env;
      const ref = (n: string): unknown => env.find((e: any) => e.name === n)?.valueFrom?.secretKeyRef;
      expect(ref('PUSHBASE_ADMIN_TOKEN')).toEqual({ name: 'pushbase-auth', key: 'admin-token' });
      expect(ref('PUSHBASE_GRPC_TOKEN')).toEqual({ name: 'pushbase-auth', key: 'grpc-token' });
      expect(ref('PUSHBASE_API_KEYS')).toEqual({ name: 'pushbase-auth', key: 'api-keys', optional: true });
      expect(ref('PUSHBASE_CLICKHOUSE_URL')).toEqual({ name: 'pushbase-datastores', key: 'clickhouse-url' });
      expect(ref('PUSHBASE_REDIS_URL')).toEqual({ name: 'pushbase-datastores', key: 'redis-url' });
    });

    it('routes the host through the ingress with TLS, and the gateway trusts only its proxies X-Forwarded-Proto', () => {
      const ingress = named(objects, 'Ingress', 'prod-pushbase-gateway');
      expect(ingress.spec.tls).toEqual([{ hosts: ['push.example.com'], secretName: 'push-example-com-tls' }]);
      expect(ingress.spec.rules).toEqual([{ host: 'push.example.com', http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'prod-pushbase-gateway', port: { name: 'http' } } } }] } }]);
      const service = named(objects, 'Service', 'prod-pushbase-gateway');
      expect(service.spec.ports.map((p: any) => p.name)).toContain('http');
      const gateway = named(objects, 'Deployment', 'prod-pushbase-gateway');
      const env = envOf(gateway.spec.template.spec.containers[0], secrets);
      expect(env.PUSHBASE_BEHIND_TLS_PROXY).toBe('true');
      expect(parseTrustedProxies(env.PUSHBASE_TRUSTED_PROXIES!).entries).toEqual(['10.244.0.0/16']);
      const config = loadGatewayConfig(env);
      expect(config.behindTlsProxy).toBe(true);
      expect(config.port).toBe(8080);
      // Only the ingress controller's namespace reaches the public port; the dashboards reach the admin port.
      const policy = named(objects, 'NetworkPolicy', 'prod-pushbase-gateway');
      expect(policy.spec.ingress).toEqual([
        { ports: [{ port: 'http', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
        { ports: [{ port: 'admin', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'dashboards' } } }] },
        { ports: [{ port: 'admin', protocol: 'TCP' }], from: [MONITORING] },
      ]);
    });

    it('pulls the image by digest and runs the replicas asked for', () => {
      for (const d of byKind(objects, 'Deployment')) expect(d.spec.template.spec.containers[0].image).toBe('registry.example.com/pushbase/pushbase:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef');
      expect(named(objects, 'Deployment', 'prod-pushbase-schema').spec.replicas).toBe(3);
      expect(named(objects, 'Deployment', 'prod-pushbase-projector').spec.replicas).toBe(4);
      expect(byKind(objects, 'HorizontalPodAutoscaler').map((h) => component(h)).sort()).toEqual(['gateway', 'records']);
      expect(named(objects, 'Deployment', 'prod-pushbase-gateway').spec.template.spec.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
    });
  });

  describe('refuses bad values at template time', () => {
    const cases: [string, string[], RegExp][] = [
      ['a broker list that is no host:port list', ['kafka.brokers=kafka'], /\/kafka\/brokers.*does not match pattern/],
      ['a Redis URL of another scheme', ['redis.url=http://redis:6379'], /\/redis\/url.*does not match pattern/],
      ['a misspelt value', ['gateway.replica=3'], /\/gateway.*additional properties 'replica' not allowed/],
      ['the ingress without a host and a TLS Secret', ['ingress.enabled=true'], /\/ingress\/host.*minLength/s],
      ['a short admin token', ['auth.adminToken=short'], /\/auth\/adminToken.*does not match pattern/],
      ['a gRPC token under 32 characters', [`auth.grpcToken=${'x'.repeat(31)}`], /\/auth\/grpcToken.*does not match pattern/],
      ['the root user', ['podSecurity.runAsUser=0'], /\/podSecurity\/runAsUser.*minimum/],
      ['a service without resource limits', ['schema.resources.limits=null'], /\/schema\/resources.*limits/],
      ['trusting every peer', ['gateway.trustedProxies=0.0.0.0/0'], /\/gateway\/trustedProxies/],
      ['more projectors than partitions', ['projector.replicas=7', 'kafka.partitions=6'], /projector\.replicas \(7\) may not exceed kafka\.partitions \(6\)/],
    ];
    it.each(cases)('%s', (_what, sets, message) => {
      const res = helm(['template', 'bad', chart, ...sets.flatMap((s) => ['--set', s])]);
      expect(res.status).not.toBe(0);
      expect(res.stderr).toMatch(message);
    });
  });
});

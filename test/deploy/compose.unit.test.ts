/*
 * deploy/compose.yaml, the whole stack on a laptop with Docker: it parses (merge keys resolved, as Compose
 * resolves them), runs every service of `npm run start:distributed` from the one image with the CLI
 * command of that service, migrates first, and uses the servers' images the test suite runs as containers.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { SERVICES } from '../../services/cli/src/distributed';
import { CLICKHOUSE_IMAGE, KAFKA_IMAGE, REDIS_IMAGE } from '../../deploy/local/containers';
import { loadGatewayConfig } from '../../services/gateway/src/config';
import { loadSchemaConfig } from '../../services/schema/src/config';
import { loadRecordsConfig } from '../../services/records/src/config';
import { loadMigrateConfig, loadProjectorConfig } from '../../services/projector/src/config';

const root = path.resolve(__dirname, '..', '..');

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
  healthcheck?: { test: string[] };
}

const compose = parse(readFileSync(path.join(root, 'deploy', 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
const cliCommands = new Set([...readFileSync(path.join(root, 'services', 'cli', 'src', 'main.ts'), 'utf8').matchAll(/\.command\('([a-z-]+)'/g)].map((m) => m[1]!));

describe('deploy/compose.yaml', () => {
  const services = compose.services;

  it('names the three servers, migrate and the four services, and nothing else', () => {
    expect(Object.keys(services).sort()).toEqual(['clickhouse', 'kafka', 'migrate', 'redis', ...SERVICES].sort());
  });

  it('runs the servers from the images the test suite runs as containers', () => {
    expect(services.kafka!.image).toBe(KAFKA_IMAGE);
    expect(services.clickhouse!.image).toBe(CLICKHOUSE_IMAGE);
    expect(services.redis!.image).toBe(REDIS_IMAGE);
    // Kafka in KRaft mode: one node, broker and controller at once, advertised under its service name.
    const kafka = services.kafka!.environment!;
    expect(kafka.KAFKA_PROCESS_ROLES).toBe('broker,controller');
    expect(kafka.KAFKA_ADVERTISED_LISTENERS).toBe('PLAINTEXT://kafka:9092');
    for (const server of ['kafka', 'clickhouse', 'redis']) expect(services[server]!.healthcheck?.test.length).toBeGreaterThan(0);
  });

  it('builds every pushbase service from deploy/Dockerfile and runs the CLI command of its name', () => {
    for (const name of ['migrate', ...SERVICES]) {
      const s = services[name]!;
      expect({ name, build: s.build }).toEqual({ name, build: { context: '..', dockerfile: 'deploy/Dockerfile' } });
      expect({ name, command: s.command }).toEqual({ name, command: [name] });
      expect(cliCommands).toContain(name);
    }
  });

  it('migrates once the servers are healthy, and starts the services only after it succeeded', () => {
    expect(services.migrate!.depends_on).toEqual({ kafka: { condition: 'service_healthy' }, clickhouse: { condition: 'service_healthy' } });
    for (const name of SERVICES) expect(services[name]!.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
  });

  it('wires the services as the chart does: Kafka, ClickHouse and Redis by service name, gRPC on 0.0.0.0, the gateway at the gRPC services', () => {
    for (const name of ['migrate', ...SERVICES]) {
      const env = services[name]!.environment!;
      expect(env.PUSHBASE_KAFKA_BROKERS).toBe('kafka:9092');
      expect(env.PUSHBASE_CLICKHOUSE_URL).toBe('http://clickhouse:8123');
      expect(env.PUSHBASE_REDIS_URL).toBe('redis://redis:6379');
      expect(env.PUSHBASE_GRPC_HOST).toBe('0.0.0.0');
    }
    const gateway = services.gateway!.environment!;
    expect(gateway.PUSHBASE_SCHEMA_ADDRESS).toBe(`schema:${services.schema!.environment!.PUSHBASE_SCHEMA_GRPC_PORT}`);
    expect(gateway.PUSHBASE_RECORDS_ADDRESS).toBe(`records:${services.records!.environment!.PUSHBASE_RECORDS_GRPC_PORT}`);
    // The public port for everyone, the admin listener on the host's loopback only.
    expect(services.gateway!.ports).toEqual([`${gateway.PUSHBASE_PORT}:${gateway.PUSHBASE_PORT}`, `127.0.0.1:${gateway.PUSHBASE_ADMIN_PORT}:${gateway.PUSHBASE_ADMIN_PORT}`]);
    expect(services.gateway!.healthcheck?.test.join(' ')).toContain(`127.0.0.1:${gateway.PUSHBASE_ADMIN_PORT}/healthz`);
  });

  it('takes the services’ gRPC token from the shell or deploy/.env, and refuses to start without it', () => {
    for (const name of ['schema', 'records', 'gateway']) expect({ name, token: services[name]!.environment!.PUSHBASE_GRPC_TOKEN }).toEqual({ name, token: expect.stringMatching(/^\$\{PUSHBASE_GRPC_TOKEN:\?/) });
  });

  it("gives each service an environment its own configuration accepts", () => {
    // Compose fills ${VAR:?…} in from the shell or deploy/.env: here, a value an operator would have put there.
    const shell: Record<string, string> = { PUSHBASE_GRPC_TOKEN: 'a-token-the-operator-generated-0123456789' };
    const env = (name: string): NodeJS.ProcessEnv =>
      Object.fromEntries(Object.entries(services[name]!.environment!).map(([k, v]) => [k, v.replace(/\$\{(\w+):\?[^}]*\}/g, (_, variable: string) => shell[variable]!)]));
    expect(loadMigrateConfig(env('migrate')).kafka).toMatchObject({ partitions: 6, replicationFactor: 1 });
    expect(loadProjectorConfig(env('projector')).clickhouse.url).toBe('http://clickhouse:8123');
    expect(loadSchemaConfig(env('schema')).grpc).toEqual({ host: '0.0.0.0', port: 50051, drainMs: 2000, token: shell.PUSHBASE_GRPC_TOKEN });
    expect(loadRecordsConfig(env('records')).grpc).toEqual({ host: '0.0.0.0', port: 50052, drainMs: 2000, token: shell.PUSHBASE_GRPC_TOKEN });
    const gateway = loadGatewayConfig({ ...env('gateway'), PUSHBASE_DATA_DIR: '/var/lib/pushbase' });
    expect(gateway.grpcToken).toBe(shell.PUSHBASE_GRPC_TOKEN);
    expect({ port: gateway.port, adminPort: gateway.adminPort, adminHost: gateway.adminHost }).toEqual({ port: 8443, adminPort: 8444, adminHost: '0.0.0.0' });
  });
});

/*
 * docs/configuration.md and the code agree: every PUSHBASE_* (and OTEL_*) variable a config schema reads,
 * or any other code reads from the environment, is documented there, and every PUSHBASE_* variable
 * documented there is one of those (OTEL_* ones the OpenTelemetry SDK reads itself may be named too). The schemas' keys are found by running each loader on an environment that records
 * what is asked of it, so a key added to a schema needs no list kept here.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { loadClickHouseConfig } from '@pushbase/clickhouse';
import { loadConfig } from '@pushbase/embedded';
import { loadGatewayConfig } from '@pushbase/gateway';
import { loadMigrateConfig, loadProjectorConfig } from '@pushbase/projector';
import { loadRecordsConfig } from '@pushbase/records';
import { loadSchemaConfig } from '@pushbase/schema';
import { readClusterConfig } from '../../deploy/cluster/config';
import { readServicesConfig } from '../../deploy/local/config';

const root = path.resolve(__dirname, '..', '..');
const VARIABLE = /^(PUSHBASE|OTEL)_[A-Z0-9_]*[A-Z0-9]$/;

/** The variables a loader asks for: it parses an empty environment that records every key read. */
function keysRead(load: (env: NodeJS.ProcessEnv) => unknown): Set<string> {
  const read = new Set<string>();
  const note = (key: string | symbol): void => {
    if (typeof key === 'string' && VARIABLE.test(key)) read.add(key);
  };
  const env: NodeJS.ProcessEnv = new Proxy({}, {
    get: (_target, key) => (note(key), undefined),
    has: (_target, key) => (note(key), false),
    getOwnPropertyDescriptor: (_target, key) => (note(key), undefined),
  });
  try {
    load(env);
  } catch {
    // Required variables are missing from the empty environment; every key was read before the refusal.
  }
  return read;
}

/** Every loader of the environment (`pushbase replay` reads the projector's schema, with its flags). */
const loaders: Record<string, (env: NodeJS.ProcessEnv) => unknown> = {
  embedded: loadConfig,
  gateway: loadGatewayConfig,
  projector: loadProjectorConfig,
  migrate: loadMigrateConfig,
  records: loadRecordsConfig,
  schema: loadSchemaConfig,
  clickhouse: loadClickHouseConfig,
  'local servers': (env) => readServicesConfig(env, root),
  cluster: (env) => readClusterConfig(env, root),
};

/** Code outside the schemas that reads (or, in the test setup, sets) a variable: `env.X`, `env['X']`, `env, 'X'`. */
function envAccesses(): Set<string> {
  const files: string[] = [path.join(root, 'test', 'global-setup.js'), path.join(root, 'test', 'global-teardown.js')];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name === 'test') continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|js)$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)) files.push(full);
    }
  };
  for (const dir of ['services', 'deploy', 'scripts', 'bench']) walk(path.join(root, dir));
  const out = new Set<string>();
  for (const file of files) {
    const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|(^|[^:])\/\/.*$/gm, '$1');
    for (const m of code.matchAll(/\benv(?:\.|\[\s*['"`]|,\s*['"`])((?:PUSHBASE|OTEL)_[A-Z0-9_]*[A-Z0-9])\b/g)) out.add(m[1] as string);
  }
  return out;
}

const fromSchemas = new Set(Object.values(loaders).flatMap((load) => [...keysRead(load)]));
const known = new Set([...fromSchemas, ...envAccesses()]);
const page = readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8');
const documented = new Set([...page.matchAll(/`((?:PUSHBASE|OTEL)_[A-Z0-9_]*[A-Z0-9])`/g)].map((m) => m[1] as string));

test('the loaders are seen reading their schemas', () => {
  expect(Object.entries(loaders).filter(([, load]) => keysRead(load).size === 0).map(([name]) => name)).toEqual([]);
  expect([...keysRead(loadSchemaConfig)]).toEqual(expect.arrayContaining(['PUSHBASE_SCHEMA_LOCK_TTL_MS', 'PUSHBASE_REDIS_PREFIX', 'PUSHBASE_LOG_LEVEL']));
  expect([...keysRead(loadProjectorConfig)]).toEqual(expect.arrayContaining(['PUSHBASE_PROJECTOR_MAX_ROWS', 'PUSHBASE_CLICKHOUSE_URL']));
  expect(fromSchemas.size).toBeGreaterThan(60);
});

test('every variable the code reads is documented in docs/configuration.md', () => {
  expect([...known].filter((v) => !documented.has(v)).sort()).toEqual([]);
});

test('every PUSHBASE_* variable docs/configuration.md documents is one the code reads', () => {
  expect([...documented].filter((v) => v.startsWith('PUSHBASE_') && !known.has(v)).sort()).toEqual([]);
});

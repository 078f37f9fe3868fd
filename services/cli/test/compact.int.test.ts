import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EVENT_SCHEMA_VERSION, type DatasetDefinition, type DatasetEvent } from '@pushbase/domain';
import { EmbeddedStore } from '@pushbase/embedded';

/*
 * `pushbase compact` on a stopped server's data directory keeps the Idempotency-Keys the configured
 * retention keeps (PUSHBASE_IDEMPOTENCY_TTL_HOURS), not the default 24 hours: a key it dropped early would
 * let a retry of that write be applied twice.
 */

const ROOT = path.resolve(__dirname, '../../..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
const MAIN = path.join(ROOT, 'services/cli/src/main.ts');

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-cli-compact-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('`pushbase compact` keeps a key younger than PUSHBASE_IDEMPOTENCY_TTL_HOURS (older than the default 24 h)', async () => {
  const week = 168 * 3_600_000;
  const definition = { fields: { v: { type: 'number', name: 'V', optional: false } }, unique_by: [] } as unknown as DatasetDefinition;
  const event = (key: string, at: number): DatasetEvent => ({ schema_version: EVENT_SCHEMA_VERSION, account: 'acme', dataset: key, incarnation: 'i1', at, type: 'DatasetDefined', definition, idempotency: { key, fingerprint: 'F' } });
  const open = async () => (await EmbeddedStore.open({ dir, segmentBytes: 200, compactAfterBytes: Number.MAX_SAFE_INTEGER, idempotencyTtlMs: week, log: () => undefined })).store;
  const writer = await open();
  await writer.eventLog.append([event('eight-days', Date.now() - 192 * 3_600_000)]); // past the week
  await writer.eventLog.append([event('two-days', Date.now() - 48 * 3_600_000)]); // inside it
  const { idempotency: _none, ...unkeyed } = event('tail', Date.now());
  await writer.eventLog.append([unkeyed]);
  await writer.close();

  const run = spawnSync(TSX, [MAIN, 'compact'], { cwd: ROOT, env: { ...process.env, PUSHBASE_DATA_DIR: dir, PUSHBASE_IDEMPOTENCY_TTL_HOURS: '168' }, encoding: 'utf8', timeout: 60_000 });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  expect(run.stdout).toMatch(/"msg":"compaction finished"/);

  const store = await open();
  try {
    expect(store.stats().snapshotPosition).toBeGreaterThan(0); // the keys now come from the snapshot
    expect(await store.ledger.applied('acme', 'two-days')).toBeDefined();
    expect(await store.ledger.applied('acme', 'eight-days')).toBeUndefined();
  } finally {
    await store.close();
  }
}, 90_000);

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SideFileError } from '@pushbase/data-dir';
import { readLegacyKeys, retireLegacyKeys } from '../src/legacy-keys';

/* An older data directory's api-keys.json: imported once, moved aside durably, never silently replaced. */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-legacy-keys-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('api-keys.json of an older data directory', () => {
  it('is absent in a new data directory', async () => {
    await expect(readLegacyKeys(dir)).resolves.toBeUndefined();
  });

  it('is read as hashes and accounts, and moved aside durably once imported', async () => {
    const file = path.join(dir, 'api-keys.json');
    const text = JSON.stringify([{ hash: 'a'.repeat(64), account: 'default', created_at: '2025-01-01T00:00:00.000Z' }]);
    await writeFile(file, text);
    await expect(readLegacyKeys(dir)).resolves.toEqual({ file, keys: [{ hash: 'a'.repeat(64), account: 'default', created_at: '2025-01-01T00:00:00.000Z' }] });
    const moved = await retireLegacyKeys(file);
    expect(moved).toBe(path.join(dir, 'api-keys.json.imported'));
    expect(await readFile(moved, 'utf8')).toBe(text);
    await expect(readLegacyKeys(dir)).resolves.toBeUndefined();
  });

  it.each([
    ['empty', '', /is empty/],
    ['cut short', '[\n  {\n    "hash": "ab', /is not valid JSON/],
    ['not a list', '{"hash":"x"}', /does not hold a JSON array/],
    ['a bad entry', '[{"hash":"not-hex","account":"default"}]', /entry 0 /],
    ['a bad account name', `[{"hash":"${'b'.repeat(64)}","account":"two words"}]`, /entry 0 /],
  ])('stops the start when it is %s, naming it, and leaves it alone', async (_what, text, problem) => {
    const file = path.join(dir, 'api-keys.json');
    await writeFile(file, text);
    await expect(readLegacyKeys(dir)).rejects.toThrow(SideFileError);
    await expect(readLegacyKeys(dir)).rejects.toThrow(problem);
    await expect(readLegacyKeys(dir)).rejects.toThrow(file);
    expect(await readFile(file, 'utf8')).toBe(text);
  });
});

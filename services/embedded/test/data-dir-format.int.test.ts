import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { hashApiKey } from '@pushbase/contracts';
import { LIMITS } from '@pushbase/domain';
import { openAccounts } from '../src/accounts';
import { checkDataDirFormat, DATA_DIR_FORMAT, DataDirFormatError, markDataDirFormat } from '../src/data-dir-format';

/*
 * The data directory's FORMAT file and the guard against releases from before it (data-dir-format.ts), and
 * what a release from before it may leave behind when the guard stops it: an api-keys.json with a key it
 * generated and logged, which must not become a working key here.
 */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-format-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('FORMAT', () => {
  it('is absent in a directory written before it, which opens as it is', async () => {
    await expect(checkDataDirFormat(dir)).resolves.toBeUndefined();
  });

  it('is written with the guards beside both logs, and marking again changes nothing', async () => {
    await markDataDirFormat(dir);
    expect(await readFile(path.join(dir, 'FORMAT'), 'utf8')).toBe(`${DATA_DIR_FORMAT}\n`);
    for (const guard of [path.join(dir, 'events.log'), path.join(dir, 'accounts', 'events.log')]) expect(statSync(guard).isDirectory()).toBe(true);
    await expect(checkDataDirFormat(dir)).resolves.toBe(DATA_DIR_FORMAT);
    const mtime = statSync(path.join(dir, 'FORMAT')).mtimeMs;
    await markDataDirFormat(dir);
    expect(statSync(path.join(dir, 'FORMAT')).mtimeMs).toBe(mtime);
  });

  it.each([
    ['a later format', `${DATA_DIR_FORMAT + 1}\n`, /is in format 2 .*newer than this pushbase reads \(format 1\).*nothing was changed/],
    ['no number', 'two\n', /does not hold a format number/],
    ['nothing', '', /does not hold a format number/],
  ])('refuses %s, naming the file', async (_what, text, problem) => {
    await writeFile(path.join(dir, 'FORMAT'), text);
    await expect(checkDataDirFormat(dir)).rejects.toThrow(DataDirFormatError);
    await expect(checkDataDirFormat(dir)).rejects.toThrow(problem);
    await expect(checkDataDirFormat(dir)).rejects.toThrow(path.join(dir, 'FORMAT'));
  });
});

describe('api-keys.json', () => {
  const legacy = async (secret: string): Promise<void> => {
    await writeFile(path.join(dir, 'api-keys.json'), JSON.stringify([{ hash: hashApiKey(secret), account: 'default' }]));
  };
  const accounts = async (lines: string[]): Promise<Awaited<ReturnType<typeof openAccounts>>> =>
    openAccounts({ dataDir: dir, apiKeys: `${'k'.repeat(24)}:acme`, defaults: { datasets: LIMITS.datasetsPerAccount, requests_per_minute: 60 }, log: (msg) => lines.push(msg), warn: () => undefined });

  it('of a directory from before FORMAT is imported', async () => {
    await legacy('pb_imported-before-the-upgrade');
    const opened = await accounts([]);
    expect(await opened.keys.resolve('pb_imported-before-the-upgrade')).toMatchObject({ account: 'default' });
    await opened.log.close();
  });

  it('found once FORMAT exists (left by an older release the guard stopped, with a key it logged) is not imported', async () => {
    await markDataDirFormat(dir);
    await legacy('pb_logged-by-an-older-release');
    const lines: string[] = [];
    const opened = await accounts(lines);
    expect(await opened.keys.resolve('pb_logged-by-an-older-release')).toBeUndefined();
    expect(lines.some((l) => /api-keys\.json.* not imported/.test(l))).toBe(true);
    expect(existsSync(path.join(dir, 'api-keys.json'))).toBe(true);
    await opened.log.close();
  });
});

import { rename } from 'node:fs/promises';
import path from 'node:path';
import { readIfExists, SideFileError, syncDirectory } from '@pushbase/data-dir';
import { ACCOUNT_NAME } from '@pushbase/domain';

/* `api-keys.json` of older data directories, read once to import its keys into the account log. */

export const API_KEYS_FILE = 'api-keys.json';

export interface StoredKey {
  readonly hash: string;
  readonly account: string;
  readonly created_at?: string;
}

const KEYS_REMEDY =
  'restore it from a backup, or move it away (the keys stored in it stop working; create new ones with `pushbase keys create`)';

/** Reads `api-keys.json`; throws SideFileError naming it when it is there but not a list of stored keys. */
function parseStoredKeys(file: string, text: string): StoredKey[] {
  if (text.trim() === '') throw new SideFileError(file, 'is empty', KEYS_REMEDY);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new SideFileError(file, `is not valid JSON (${(err as Error).message})`, KEYS_REMEDY);
  }
  if (!Array.isArray(parsed)) throw new SideFileError(file, 'does not hold a JSON array of keys', KEYS_REMEDY);
  parsed.forEach((k: unknown, i) => {
    const entry = k as Partial<StoredKey> | null;
    if (entry === null || typeof entry !== 'object' || typeof entry.hash !== 'string' || !/^[0-9a-f]{64}$/.test(entry.hash) || typeof entry.account !== 'string' || !ACCOUNT_NAME.test(entry.account)) {
      throw new SideFileError(file, `has an entry ${i} that is not {"hash": <sha-256 hex>, "account": <name>}`, KEYS_REMEDY);
    }
  });
  return parsed as StoredKey[];
}

/**
 * The keys of an older data directory's `api-keys.json` (SHA-256 hashes and accounts), to be imported into
 * the account log once; undefined when there is no such file. Since accounts and keys are events, nothing
 * writes this file any more.
 */
export async function readLegacyKeys(dataDir: string): Promise<{ file: string; keys: StoredKey[] } | undefined> {
  const file = path.resolve(dataDir, API_KEYS_FILE);
  const text = await readIfExists(file);
  return text === undefined ? undefined : { file, keys: parseStoredKeys(file, text) };
}

/** Where an imported `api-keys.json` is moved: kept (not deleted) for whoever wants to check the import. */
export const IMPORTED_KEYS_FILE = `${API_KEYS_FILE}.imported`;

/** Moves an imported `api-keys.json` aside, durably, so it is never imported again. */
export async function retireLegacyKeys(file: string): Promise<string> {
  const target = path.join(path.dirname(file), IMPORTED_KEYS_FILE);
  await rename(file, target);
  await syncDirectory(path.dirname(file));
  return target;
}

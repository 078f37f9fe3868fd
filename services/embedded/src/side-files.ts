import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { hashApiKey, type MemoryKeyStore, newApiKey } from '@pushbase/gateway';
import { readIfExists, SideFileError, writeFileAtomic } from './files';

/*
 * The data directory's small side files: `admin.token` and `api-keys.json` (the TLS files are in tls.ts).
 * Each is generated once, on a first start, and then only ever read. Only a missing file means "first
 * start": a file that exists but cannot be used (empty or cut short by a power loss, edited by hand) stops
 * the start with its name, because generating a new one would silently invalidate what was already handed
 * out — the API key shown once at the first start, the admin token in someone's scripts.
 */

export const ADMIN_TOKEN_FILE = 'admin.token';
export const API_KEYS_FILE = 'api-keys.json';

export type SideFileLogger = (msg: string, fields?: Record<string, unknown>) => void;

/** The admin token stored in the data directory, generated into it on a first start. */
export async function loadOrCreateAdminToken(dataDir: string, log: SideFileLogger): Promise<string> {
  const file = path.resolve(dataDir, ADMIN_TOKEN_FILE);
  const stored = await readIfExists(file);
  if (stored !== undefined) {
    const token = stored.trim();
    if (token === '' || /\s/.test(token)) {
      throw new SideFileError(
        file,
        token === '' ? 'is empty' : 'holds more than one word',
        'restore it from a backup, set PUSHBASE_ADMIN_TOKEN, or delete the file to have a new token generated (the old one stops working)',
      );
    }
    return token;
  }
  const token = randomBytes(24).toString('base64url');
  await writeFileAtomic(file, `${token}\n`, 0o600);
  log('generated admin token', { file });
  return token;
}

export interface StoredKey {
  readonly hash: string;
  readonly account: string;
  readonly created_at: string;
}

const KEYS_REMEDY =
  'restore it from a backup, or delete it to have a new key generated for the account "default" (every key stored in it stops working)';

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
    if (entry === null || typeof entry !== 'object' || typeof entry.hash !== 'string' || !/^[0-9a-f]{64}$/.test(entry.hash) || typeof entry.account !== 'string' || entry.account === '') {
      throw new SideFileError(file, `has an entry ${i} that is not {"hash": <sha-256 hex>, "account": <name>}`, KEYS_REMEDY);
    }
  });
  return parsed as StoredKey[];
}

/**
 * Keys kept in `<dataDir>/api-keys.json`, as SHA-256 hashes only. On a first start with no key at all, one
 * key for the account `default` is generated and shown once, so `npm start` is usable straight away.
 */
export async function loadStoredKeys(dataDir: string, keys: MemoryKeyStore, log: SideFileLogger): Promise<void> {
  const file = path.resolve(dataDir, API_KEYS_FILE);
  const text = await readIfExists(file);
  const stored = text === undefined ? [] : parseStoredKeys(file, text);
  for (const k of stored) keys.add(k.hash, k.account);
  if (keys.size > 0) return;
  const key = newApiKey();
  const entry: StoredKey = { hash: hashApiKey(key), account: 'default', created_at: new Date().toISOString() };
  await writeFileAtomic(file, `${JSON.stringify([entry], null, 2)}\n`, 0o600);
  keys.add(entry.hash, entry.account);
  log('generated an API key for account "default"; it is shown only this once, only its hash is stored', { api_key: key, keys_file: file });
}

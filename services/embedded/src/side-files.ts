import { randomBytes } from 'node:crypto';
import { rename } from 'node:fs/promises';
import path from 'node:path';
import { ACCOUNT_NAME } from '@pushbase/domain';
import { readIfExists, SideFileError, writeFileAtomic } from './files';
import { syncDirectory } from './frames';

/*
 * The data directory's small side files: `admin.token`, and `api-keys.json` of older data directories,
 * read once to import its keys into the account log (the TLS files are in tls.ts). The token is generated
 * once, on a first start, and then only ever read. Only a missing file means "first
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

/** Where a first start's API key goes when there is no terminal to show it on; the operator deletes it. */
export const INITIAL_API_KEY_FILE = 'initial-api-key';

/** Where a generated key can be shown: process.stdout, or a test's stand-in. */
export interface Terminal {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * Shows the API key a first start generated, never in the log: log collectors keep what they are given. On
 * a terminal it is printed there; otherwise (a service manager, a container, a pipe) it is written to
 * `<dataDir>/initial-api-key`, readable by the owner only, and the log says where.
 */
export async function showGeneratedKey(dataDir: string, account: string, key: string, log: SideFileLogger, terminal: Terminal = process.stdout): Promise<void> {
  const what = `generated an API key for account "${account}"; only its hash is stored`;
  if (terminal.isTTY === true) {
    terminal.write(`\nThe API key of account "${account}", shown only this once (pushbase keeps only its hash):\n\n  ${key}\n\n`);
    log(`${what}; it was printed on the terminal, not in the log`);
    return;
  }
  const file = path.resolve(dataDir, INITIAL_API_KEY_FILE);
  await writeFileAtomic(file, `${key}\n`, 0o600);
  log(`${what}; it is in the file named here (readable by this user only): read it, then delete the file`, { file });
}

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

import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { readIfExists, SideFileError, writeFileAtomic } from './files';

/*
 * The data directory's small side files: `admin.token` and a first start's `initial-api-key` (the TLS files
 * are in tls.ts). The token is generated once, on a first start, and then only ever read. Only a missing
 * file means "first start": a file that exists but cannot be used (empty, cut short by a power loss, edited
 * by hand) stops the start with its name, because a new one would silently invalidate what was already
 * handed out — the API key shown once at the first start, the admin token in someone's scripts.
 */

export const ADMIN_TOKEN_FILE = 'admin.token';

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


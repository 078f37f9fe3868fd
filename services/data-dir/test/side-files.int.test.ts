import { existsSync, fstatSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SideFileError, writeFileAtomic } from '../src/files';
import { loadOrCreateAdminToken, showGeneratedKey } from '../src/side-files';
import { loadOrCreateTls } from '../src/tls';

/*
 * The data directory's side files (admin.token, initial-api-key, tls/key.pem, tls/cert.pem) are written
 * durably (file fsync'd before the rename, directory fsync'd after it), and one that exists but cannot be
 * used stops the start with its name and is left as it is: never silently replaced by a new key, token or
 * certificate, which would invalidate the one already handed out.
 */

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'pushbase-side-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const quiet = (): void => undefined;

describe('writeFileAtomic', () => {
  it('fsyncs the new file before renaming it into place, and its directory after', async () => {
    const file = path.join(dir, 'api-keys.json');
    const steps: string[] = [];
    await writeFileAtomic(file, '[]\n', 0o600, {
      fsync: (fd) => {
        const st = fstatSync(fd);
        const what = st.isDirectory() ? (st.ino === statSync(dir).ino ? 'fsync dir' : 'fsync other dir') : 'fsync file';
        // The file's data must be complete when it is fsync'd.
        if (!st.isDirectory()) expect(st.size).toBe(3);
        steps.push(what);
        return Promise.resolve();
      },
      rename: async (from, to) => {
        steps.push(`rename ${path.basename(from)} → ${path.basename(to)}`);
        const { rename } = await import('node:fs/promises');
        await rename(from, to);
      },
    });
    expect(steps).toEqual(['fsync file', 'rename api-keys.json.tmp → api-keys.json', 'fsync dir']);
    expect(await readFile(file, 'utf8')).toBe('[]\n');
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});

describe('the API key of a first start', () => {
  const key = `pb_${'k'.repeat(43)}`;
  const logged = (): { lines: unknown[]; log: (msg: string, fields?: Record<string, unknown>) => void } => {
    const lines: unknown[] = [];
    return { lines, log: (msg, fields) => lines.push({ msg, ...fields }) };
  };

  it('goes to a file only the owner can read when there is no terminal, and the log names the file, not the key', async () => {
    const { lines, log } = logged();
    const printed: string[] = [];
    await showGeneratedKey(dir, 'default', key, log, { write: (t) => printed.push(t) });
    const file = path.join(dir, 'initial-api-key');
    expect(await readFile(file, 'utf8')).toBe(`${key}\n`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(printed).toEqual([]);
    expect(lines).toEqual([expect.objectContaining({ file, msg: expect.stringContaining('generated an API key for account "default"') })]);
    expect(JSON.stringify(lines)).not.toContain(key);
  });

  it('is printed on a terminal, and then neither logged nor written to a file', async () => {
    const { lines, log } = logged();
    const printed: string[] = [];
    await showGeneratedKey(dir, 'default', key, log, { isTTY: true, write: (t) => printed.push(t) });
    expect(printed.join('')).toContain(key);
    expect(existsSync(path.join(dir, 'initial-api-key'))).toBe(false);
    expect(lines).toHaveLength(1);
    expect(JSON.stringify(lines)).not.toContain(key);
  });

  it('is readable by the owner only even over a leftover temporary file of another mode', async () => {
    await writeFile(path.join(dir, 'initial-api-key.tmp'), 'left by a crash', { mode: 0o644 });
    await showGeneratedKey(dir, 'default', key, () => undefined, { write: () => undefined });
    expect(statSync(path.join(dir, 'initial-api-key')).mode & 0o777).toBe(0o600);
  });
});

describe('admin.token', () => {
  it('is generated once and then read back', async () => {
    const token = await loadOrCreateAdminToken(dir, quiet);
    expect(token).toMatch(/^[\w-]{32}$/);
    expect(await loadOrCreateAdminToken(dir, quiet)).toBe(token);
  });

  it.each([
    ['empty', ''],
    ['blank', ' \n'],
    ['two words', 'abc def\n'],
  ])('stops the start when it is %s, naming it, and leaves it alone', async (_what, text) => {
    const file = path.join(dir, 'admin.token');
    await writeFile(file, text);
    await expect(loadOrCreateAdminToken(dir, quiet)).rejects.toThrow(SideFileError);
    await expect(loadOrCreateAdminToken(dir, quiet)).rejects.toThrow(new RegExp(`^${file.replace(/[.]/g, '\\.')} .*Refusing to start`));
    expect(await readFile(file, 'utf8')).toBe(text);
  });
});

describe('the generated TLS key and certificate', () => {
  const tlsFile = (name: string): string => path.join(dir, 'tls', name);

  it('are generated once and then reused', async () => {
    const first = await loadOrCreateTls(dir, undefined);
    expect(first.generated).toBe(true);
    const second = await loadOrCreateTls(dir, undefined);
    expect(second).toMatchObject({ generated: false, cert: first.cert, key: first.key });
  });

  it('are generated again when only the key exists (a first start cut short before the certificate)', async () => {
    const first = await loadOrCreateTls(dir, undefined);
    await rm(tlsFile('cert.pem'));
    const again = await loadOrCreateTls(dir, undefined);
    expect(again.generated).toBe(true);
    expect(again.key).not.toBe(first.key);
  });

  async function damaged(name: 'cert.pem' | 'key.pem', damage: (text: string) => Promise<string | undefined>): Promise<{ file: string; before: string | undefined }> {
    await loadOrCreateTls(dir, undefined);
    const file = tlsFile(name);
    const before = await damage(await readFile(file, 'utf8'));
    if (before === undefined) await rm(file);
    else await writeFile(file, before);
    return { file, before };
  }

  it.each<[string, 'cert.pem' | 'key.pem', (text: string) => Promise<string | undefined>, RegExp]>([
    ['an empty certificate', 'cert.pem', () => Promise.resolve(''), /does not hold a usable PEM certificate \(it is empty\)/],
    ['an empty key', 'key.pem', () => Promise.resolve(''), /does not hold a usable PEM private key \(it is empty\)/],
    ['a key with bad PEM', 'key.pem', (t) => Promise.resolve(t.replace(/[A-Za-z]{8}/, '!!!!!!!!')), /does not hold a usable PEM private key/],
    ['a certificate cut short', 'cert.pem', (t) => Promise.resolve(t.slice(0, t.length / 2)), /does not hold a usable PEM certificate/],
    [
      'a certificate of another key',
      'cert.pem',
      async () => {
        const other = await mkdtemp(path.join(tmpdir(), 'pushbase-side-other-'));
        try {
          return (await loadOrCreateTls(other, undefined)).cert;
        } finally {
          await rm(other, { recursive: true, force: true });
        }
      },
      /is not the certificate of the key in/,
    ],
    ['a certificate whose key is missing', 'key.pem', () => Promise.resolve(undefined), /is missing while .*cert\.pem exists/],
  ])('stop the start on %s, naming the file, and are left alone', async (_what, name, damage, problem) => {
    const { file, before } = await damaged(name, damage);
    const certBefore = await readFile(tlsFile('cert.pem'), 'utf8');
    await expect(loadOrCreateTls(dir, undefined)).rejects.toThrow(SideFileError);
    await expect(loadOrCreateTls(dir, undefined)).rejects.toThrow(problem);
    await expect(loadOrCreateTls(dir, undefined)).rejects.toThrow(file);
    expect(await readFile(tlsFile('cert.pem'), 'utf8')).toBe(certBefore);
    if (before !== undefined) expect(await readFile(file, 'utf8')).toBe(before);
  });

  it('given by the operator, are checked the same way', async () => {
    const own = await loadOrCreateTls(dir, undefined);
    const certFile = path.join(dir, 'operator-cert.pem');
    const keyFile = path.join(dir, 'operator-key.pem');
    await writeFile(certFile, own.cert);
    await writeFile(keyFile, '');
    await expect(loadOrCreateTls(dir, { certFile, keyFile })).rejects.toThrow(new RegExp(`${keyFile.replace(/[.]/g, '\\.')} does not hold a usable PEM private key`));
    await writeFile(keyFile, own.key);
    expect((await loadOrCreateTls(dir, { certFile, keyFile })).cert).toBe(own.cert);
  });
});

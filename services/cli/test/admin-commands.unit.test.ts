import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { adminTarget, formatAccounts, formatCreatedKey, formatKeys, parseQuotaOption, table } from '../src/admin-commands';

/*
 * How `pushbase accounts|keys` find the admin listener and its token, and what they print for people (the
 * round trip against a live server is in test/embedded/accounts.e2e.test.ts).
 */

describe('the admin target', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pushbase-cli-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('takes flags over the environment', async () => {
    const env = { PUSHBASE_ADMIN_URL: 'http://env:1', PUSHBASE_ADMIN_TOKEN: 'env-token' };
    await expect(adminTarget({ adminUrl: 'https://flag:2/', token: 'flag-token' }, env)).resolves.toEqual({ url: 'https://flag:2', token: 'flag-token' });
    await expect(adminTarget({}, env)).resolves.toEqual({ url: 'http://env:1', token: 'env-token' });
  });

  it('defaults to the embedded server\'s own listener, reached on loopback when it listens on every address', async () => {
    const token = { PUSHBASE_ADMIN_TOKEN: 't' };
    await expect(adminTarget({}, token)).resolves.toMatchObject({ url: 'http://127.0.0.1:8444' });
    await expect(adminTarget({}, { ...token, PUSHBASE_ADMIN_PORT: '9000', PUSHBASE_ADMIN_HOST: '0.0.0.0' })).resolves.toMatchObject({ url: 'http://127.0.0.1:9000' });
    await expect(adminTarget({}, { ...token, PUSHBASE_ADMIN_HOST: '::1' })).resolves.toMatchObject({ url: 'http://[::1]:8444' });
    await expect(adminTarget({}, { ...token, PUSHBASE_ADMIN_URL: ' ' })).resolves.toMatchObject({ url: 'http://127.0.0.1:8444' });
  });

  it('reads the token the embedded server generated into the data directory, else says where to find one', async () => {
    await writeFile(path.join(dir, 'admin.token'), 'from-the-file\n');
    await expect(adminTarget({}, { PUSHBASE_DATA_DIR: dir })).resolves.toMatchObject({ token: 'from-the-file' });
    await expect(adminTarget({}, { PUSHBASE_DATA_DIR: path.join(dir, 'nothing') })).rejects.toThrow(/no admin token: pass --token, set PUSHBASE_ADMIN_TOKEN/);
  });
});

describe('the output for people', () => {
  it('aligns columns', () => {
    expect(table(['A', 'LONGER'], [['xyz', '1'], ['w', '22']])).toBe('A    LONGER\nxyz  1\nw    22');
  });

  it('marks the quotas that are the server\'s default', () => {
    const accounts = [
      { account: 'acme', created_at: '2026-01-01T00:00:00.000Z', quotas: { datasets: 5, requests_per_minute: null }, effective_quotas: { datasets: 5, requests_per_minute: 60 }, key_count: 2 },
    ];
    expect(formatAccounts(accounts)).toBe('ACCOUNT  DATASETS  REQUESTS/MIN  KEYS  CREATED\nacme     5         60 (default)  2     2026-01-01T00:00:00.000Z');
    expect(formatAccounts([])).toBe('no accounts');
  });

  it('shows a created key once with the warning, and lists keys without one', () => {
    const key = { key_id: 'kid_1', account: 'acme', scope: 'read', label: null, created_at: '2026-01-01T00:00:00.000Z' };
    expect(formatCreatedKey({ ...key, key: 'pb_secret' })).toBe('key_id   kid_1\naccount  acme\nscope    read\nkey      pb_secret\n\nThe key is shown only this once; pushbase keeps only its hash.');
    expect(formatKeys([key])).toBe('KEY_ID  SCOPE  CREATED                   LABEL\nkid_1   read   2026-01-01T00:00:00.000Z');
    expect(formatKeys([])).toBe('no keys');
  });

  it('takes whole numbers or "default" as quotas', () => {
    expect(parseQuotaOption('12')).toBe(12);
    expect(parseQuotaOption('default')).toBe('default');
    expect(() => parseQuotaOption('1.5')).toThrow(/whole number or "default"/);
  });
});

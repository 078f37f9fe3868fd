import { apiKeyFromAuthorization, hashApiKey, MemoryKeyStore, newApiKey, parseBootstrapKeys } from '../src';

const basic = (s: string): string => `Basic ${Buffer.from(s).toString('base64')}`;

describe('Basic auth with the API key as user name', () => {
  it('reads the key from "<key>:"', () => {
    expect(apiKeyFromAuthorization(basic('abc123:'))).toBe('abc123');
  });
  it('ignores the password part and accepts a bare key without colon', () => {
    expect(apiKeyFromAuthorization(basic('abc123:whatever'))).toBe('abc123');
    expect(apiKeyFromAuthorization(basic('abc123'))).toBe('abc123');
  });
  it('is case-insensitive in the scheme name', () => {
    expect(apiKeyFromAuthorization(`basic ${Buffer.from('k:').toString('base64')}`)).toBe('k');
  });
  it.each([undefined, '', 'Bearer abc', 'Basic', 'Basic !!!', basic(':'), basic(':password')])('refuses %p', (header) => {
    expect(apiKeyFromAuthorization(header)).toBeUndefined();
  });
});

describe('key store', () => {
  it('resolves a key by its hash only', async () => {
    const keys = new MemoryKeyStore();
    const key = newApiKey();
    keys.add(hashApiKey(key), 'acme');
    await expect(keys.resolve(key)).resolves.toEqual({ account: 'acme', key_id: `cfg_${hashApiKey(key).slice(0, 16)}`, scope: 'write', quotas: { datasets: 100, requests_per_minute: 60 } });
    await expect(keys.resolve(`${key}x`)).resolves.toBeUndefined();
    expect(keys.revoke(hashApiKey(key))).toBe(true);
    await expect(keys.resolve(key)).resolves.toBeUndefined();
  });
  it('gives a key its scope and its account\'s quotas in force at each lookup', async () => {
    let perMinute = 5;
    const keys = new MemoryKeyStore((account) => ({ datasets: account.length, requests_per_minute: perMinute }));
    const key = newApiKey();
    keys.add(hashApiKey(key), 'acme', 'read');
    await expect(keys.resolve(key)).resolves.toMatchObject({ account: 'acme', scope: 'read', quotas: { datasets: 4, requests_per_minute: 5 } });
    perMinute = 7;
    await expect(keys.resolve(key)).resolves.toMatchObject({ quotas: { requests_per_minute: 7 } });
  });
  it('generates distinct high-entropy keys', () => {
    const a = newApiKey();
    expect(a).toMatch(/^pb_[A-Za-z0-9_-]{43}$/);
    expect(newApiKey()).not.toBe(a);
  });
});

describe('PUSHBASE_API_KEYS', () => {
  const k1 = 'key-one-0123456789abcdef';
  const k2 = 'key-two-0123456789abcdef';
  it('parses key:account pairs', () => {
    expect(parseBootstrapKeys(`${k1}:acme, ${k2}:globex,`)).toEqual([
      { key: k1, account: 'acme' },
      { key: k2, account: 'globex' },
    ]);
  });
  it('allows colons inside the key (the account is after the last one)', () => {
    expect(parseBootstrapKeys(`a:${k1}:acme`)).toEqual([{ key: `a:${k1}`, account: 'acme' }]);
  });
  it.each(['nokey', ':acme', `${k1}:`, `${k1}:bad account`, 'k-0123456789abcdef:acme'])('refuses %p without echoing the key', (spec) => {
    expect(() => parseBootstrapKeys(spec)).toThrow(/PUSHBASE_API_KEYS/);
    expect(() => parseBootstrapKeys(spec)).not.toThrow(/key-one|0123456789abcdef/);
  });
  it('refuses a key shorter than 20 characters: it could be guessed', () => {
    expect(() => parseBootstrapKeys(`${k1}:acme,${'k'.repeat(19)}:globex`)).toThrow('PUSHBASE_API_KEYS: the key of account "globex" has 19 characters; a configured key needs at least 20');
    expect(parseBootstrapKeys(`${'k'.repeat(20)}:globex`)).toEqual([{ key: 'k'.repeat(20), account: 'globex' }]);
  });
});

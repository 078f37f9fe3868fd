import { availableParallelism } from 'node:os';
import { defaultWriteWorkers, loadConfig } from '../src/config';

describe('embedded configuration', () => {
  it('has sensible defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ port: 8443, host: '0.0.0.0', adminPort: 8444, adminHost: '127.0.0.1', dataDir: './.data', rateLimitPerMinute: 60, authFailuresPerMinute: 100 });
    expect(c.tls).toBeUndefined();
    expect(Object.isFrozen(c)).toBe(true);
  });
  it('keeps Idempotency-Keys 24 hours unless PUSHBASE_IDEMPOTENCY_TTL_HOURS says otherwise: 1 to 168 hours, fractions allowed', () => {
    expect(loadConfig({}).idempotencyTtlMs).toBe(24 * 3_600_000);
    expect(loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '1' }).idempotencyTtlMs).toBe(3_600_000);
    expect(loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '1.5' }).idempotencyTtlMs).toBe(5_400_000);
    expect(loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '168' }).idempotencyTtlMs).toBe(168 * 3_600_000);
    for (const bad of ['0', '-1', 'x', '0.5', String(2 / 3600), '168.5', '8760']) {
      expect(() => loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: bad })).toThrow(/PUSHBASE_IDEMPOTENCY_TTL_HOURS/);
    }
    expect(() => loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '0.5' })).toThrow(/at least 1/);
    expect(() => loadConfig({ PUSHBASE_IDEMPOTENCY_TTL_HOURS: '200' })).toThrow(/at most 168/);
  });
  it('runs one write worker more than the cores, at most 4, none on one core, and none on request', () => {
    expect(loadConfig({}).writeWorkers).toBe(defaultWriteWorkers(availableParallelism()));
    expect([1, 2, 3, 4, 64].map(defaultWriteWorkers)).toEqual([0, 3, 4, 4, 4]);
    expect(loadConfig({ PUSHBASE_WRITE_WORKERS: '0' }).writeWorkers).toBe(0);
    expect(() => loadConfig({ PUSHBASE_WRITE_WORKERS: '-1' })).toThrow(/PUSHBASE_WRITE_WORKERS/);
  });
  it('coerces numbers and treats empty values as unset', () => {
    expect(loadConfig({ PUSHBASE_PORT: '0', PUSHBASE_ADMIN_PORT: '' })).toMatchObject({ port: 0, adminPort: 8444 });
  });
  it('lists every problem at once', () => {
    expect(() => loadConfig({ PUSHBASE_PORT: 'x', PUSHBASE_ADMIN_TOKEN: 'short' })).toThrow(/PUSHBASE_PORT[\s\S]*PUSHBASE_ADMIN_TOKEN/);
  });
  it('sizes the event log segments and the compaction threshold, defaulting to 64 MiB and 256 MiB', () => {
    expect(loadConfig({})).toMatchObject({ segmentBytes: 64 * 1024 * 1024, compactAfterBytes: 256 * 1024 * 1024 });
    expect(loadConfig({ PUSHBASE_SEGMENT_BYTES: '4096', PUSHBASE_COMPACT_AFTER_BYTES: '10000' })).toMatchObject({ segmentBytes: 4096, compactAfterBytes: 10000 });
    expect(() => loadConfig({ PUSHBASE_SEGMENT_BYTES: '0' })).toThrow(/PUSHBASE_SEGMENT_BYTES/);
    expect(() => loadConfig({ PUSHBASE_COMPACT_AFTER_BYTES: '-1' })).toThrow(/PUSHBASE_COMPACT_AFTER_BYTES/);
  });
  it('refuses a configured API key shorter than 20 characters, naming its account and never the key', () => {
    const problem = (spec: string): string => {
      try {
        loadConfig({ PUSHBASE_API_KEYS: spec });
        return '';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(problem(`${'k'.repeat(20)}:acme`)).toBe('');
    const message = problem(`${'k'.repeat(24)}:acme,short-key-123:globex`);
    expect(message).toMatch(/PUSHBASE_API_KEYS: the key of account "globex" has 13 characters; a configured key needs at least 20/);
    expect(message).not.toContain('short-key-123');
  });
  it('needs both TLS files or neither', () => {
    expect(() => loadConfig({ PUSHBASE_TLS_CERT: '/c.pem' })).toThrow(/PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY/);
    expect(loadConfig({ PUSHBASE_TLS_CERT: '/c.pem', PUSHBASE_TLS_KEY: '/k.pem' }).tls).toEqual({ certFile: '/c.pem', keyFile: '/k.pem' });
  });
  it('trusts forwarded headers from loopback only by default, and from the configured proxies otherwise', () => {
    const byDefault = loadConfig({}).trustedProxies;
    expect(byDefault.entries).toEqual(['loopback']);
    expect(['127.0.0.1', '::1', '::ffff:127.0.0.1'].map((a) => byDefault.trust(a, 0))).toEqual([true, true, true]);
    expect(byDefault.trust('10.0.0.5', 0)).toBe(false);
    const configured = loadConfig({ PUSHBASE_TRUSTED_PROXIES: ' 10.0.0.0/8, 2001:db8::1 ,192.0.2.7' }).trustedProxies;
    expect(configured.entries).toEqual(['10.0.0.0/8', '2001:db8::1', '192.0.2.7']);
    expect(['10.1.2.3', '2001:db8::1', '192.0.2.7', '192.0.2.8', '127.0.0.1'].map((a) => configured.trust(a, 0))).toEqual([true, true, true, false, false]);
    expect(loadConfig({ PUSHBASE_TRUSTED_PROXIES: '' }).trustedProxies.entries).toEqual(['loopback']);
  });
  it.each([
    ['10.0.0.0/33', '"10.0.0.0/33" is not'],
    ['proxy.internal', '"proxy.internal" is not'],
    ['10.0.0.1,,nonsense', '"nonsense" is not'],
    [' , ', 'at least one'],
    ['0.0.0.0/0', '"0.0.0.0/0" would trust every peer'],
    ['10.0.0.0/8, ::/0', '"::/0" would trust every peer'],
  ])('refuses PUSHBASE_TRUSTED_PROXIES=%p, saying what is wrong', (spec, problem) => {
    expect(() => loadConfig({ PUSHBASE_TRUSTED_PROXIES: spec })).toThrow(`PUSHBASE_TRUSTED_PROXIES: `);
    expect(() => loadConfig({ PUSHBASE_TRUSTED_PROXIES: spec })).toThrow(problem);
  });
});

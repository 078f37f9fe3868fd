import { loadConfig } from '../src/config';

describe('embedded configuration', () => {
  it('has sensible defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ port: 8443, host: '0.0.0.0', adminPort: 8444, adminHost: '127.0.0.1', dataDir: './.data', rateLimitPerMinute: 60, authFailuresPerMinute: 100 });
    expect(c.tls).toBeUndefined();
    expect(Object.isFrozen(c)).toBe(true);
  });
  it('coerces numbers and treats empty values as unset', () => {
    expect(loadConfig({ PUSHBASE_PORT: '0', PUSHBASE_ADMIN_PORT: '' })).toMatchObject({ port: 0, adminPort: 8444 });
  });
  it('lists every problem at once', () => {
    expect(() => loadConfig({ PUSHBASE_PORT: 'x', PUSHBASE_ADMIN_TOKEN: 'short' })).toThrow(/PUSHBASE_PORT[\s\S]*PUSHBASE_ADMIN_TOKEN/);
  });
  it('needs both TLS files or neither', () => {
    expect(() => loadConfig({ PUSHBASE_TLS_CERT: '/c.pem' })).toThrow(/PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY/);
    expect(loadConfig({ PUSHBASE_TLS_CERT: '/c.pem', PUSHBASE_TLS_KEY: '/k.pem' }).tls).toEqual({ certFile: '/c.pem', keyFile: '/k.pem' });
  });
});

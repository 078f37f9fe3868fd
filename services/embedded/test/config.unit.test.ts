import { availableParallelism } from 'node:os';
import { loadConfig } from '../src/config';

describe('embedded configuration', () => {
  it('has sensible defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ port: 8443, host: '0.0.0.0', adminPort: 8444, adminHost: '127.0.0.1', dataDir: './.data', rateLimitPerMinute: 60, authFailuresPerMinute: 100 });
    expect(c.tls).toBeUndefined();
    expect(Object.isFrozen(c)).toBe(true);
  });
  it('runs one write worker per spare core, at most 4, and none on request', () => {
    expect(loadConfig({}).writeWorkers).toBe(Math.max(0, Math.min(4, availableParallelism() - 1)));
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
  it('needs both TLS files or neither', () => {
    expect(() => loadConfig({ PUSHBASE_TLS_CERT: '/c.pem' })).toThrow(/PUSHBASE_TLS_CERT and PUSHBASE_TLS_KEY/);
    expect(loadConfig({ PUSHBASE_TLS_CERT: '/c.pem', PUSHBASE_TLS_KEY: '/k.pem' }).tls).toEqual({ certFile: '/c.pem', keyFile: '/k.pem' });
  });
});

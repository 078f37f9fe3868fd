/*
 * DECISIONS.md → Transport: behind a TLS-terminating ingress the gateway may listen on plain HTTP only when
 * told to trust the proxy, and then refuses requests whose X-Forwarded-Proto is not https.
 */
import { TestServer } from '../helpers/server';

describe('behind a TLS-terminating proxy (PUSHBASE_BEHIND_TLS_PROXY=true)', () => {
  const s = new TestServer({ env: { PUSHBASE_BEHIND_TLS_PROXY: 'true' } });
  beforeAll(async () => {
    await s.start();
  });
  afterAll(async () => {
    await s.stop();
  });

  it('serves plain HTTP only for requests the proxy forwarded as https', async () => {
    expect(s.plainHttp).toBe(true);
    const ok = await s.request('GET', '/', { key: s.keys.acme!, headers: { 'x-forwarded-proto': 'https' } });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({});
  });

  it.each([undefined, 'http', 'https, http'])('refuses X-Forwarded-Proto %p with a JSON 400 (the last entry is the proxy\'s)', async (proto) => {
    const res = await s.request('GET', '/', { key: s.keys.acme!, headers: proto === undefined ? {} : { 'x-forwarded-proto': proto } });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({ error: { message: 'Only HTTPS requests are accepted' } });
  });

  it('takes the client address for the failed-auth guard from X-Forwarded-For', async () => {
    const guarded = await new TestServer({ env: { PUSHBASE_BEHIND_TLS_PROXY: 'true', PUSHBASE_AUTH_FAILURES_PER_MINUTE: '2' } }).start();
    try {
      const from = (ip: string, key: string) => guarded.request('GET', '/', { key, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': ip } });
      expect((await from('203.0.113.7', 'wrong')).status).toBe(401);
      expect((await from('203.0.113.7', 'wrong')).status).toBe(401);
      expect((await from('203.0.113.7', 'wrong')).status).toBe(429);
      expect((await from('203.0.113.7', guarded.keys.acme!)).status).toBe(200); // valid keys are not locked out
      expect((await from('198.51.100.1', 'wrong')).status).toBe(401); // another address has its own budget
      // A client cannot dodge the guard by prepending addresses: the proxy's own (last) entry counts.
      expect((await from('198.51.100.9, 203.0.113.7', 'wrong')).status).toBe(429);
    } finally {
      await guarded.stop();
    }
  });
});

describe('without it', () => {
  it('serves HTTPS only', async () => {
    const s = await new TestServer().start();
    try {
      expect(s.plainHttp).toBe(false);
      expect((await s.request('GET', '/', { key: s.keys.acme! })).status).toBe(200);
    } finally {
      await s.stop();
    }
  });
});

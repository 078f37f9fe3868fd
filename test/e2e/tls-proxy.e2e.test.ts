/*
 * docs/api.md → Basics (HTTPS only): behind a TLS-terminating ingress the gateway may listen on plain HTTP only when
 * told to trust the proxy, and then refuses requests whose X-Forwarded-Proto is not https. Forwarded
 * headers count only from the trusted proxies (PUSHBASE_TRUSTED_PROXIES, loopback by default); these
 * tests run from loopback, with lists that include and exclude it (PUSHBASE_TRUSTED_PROXIES: docs/configuration.md).
 */
import { validateResponse } from '../helpers/openapi';
import { TestServer, type Response } from '../helpers/server';

/** A 403 from a peer that is not a trusted proxy, in the documented shape. */
function expectNotFromProxy(res: Response, method: string, template: string): void {
  expect({ status: res.status, body: res.body }).toEqual({
    status: 403,
    body: { error: expect.objectContaining({ message: 'This port serves only requests forwarded by the TLS proxy; send requests over HTTPS through it' }) },
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(validateResponse(method, template, res.status, res.headers, res.body)).toEqual([]);
}

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
    expect(res.body).toMatchObject({ error: { message: 'Only HTTPS requests are accepted', code: 'https_required' } });
    expect(validateResponse('GET', '/', res.status, res.headers, res.body)).toEqual([]);
    // And before routing: an unknown route answers it the same, as the document's unrouted responses say.
    const unrouted = await s.request('GET', '/no-such-route', { key: s.keys.acme!, headers: proto === undefined ? {} : { 'x-forwarded-proto': proto } });
    expect(unrouted.status).toBe(400);
    expect(validateResponse('GET', '/no-such-route', unrouted.status, unrouted.headers, unrouted.body)).toEqual([]);
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

describe('forwarded headers from a peer that is not a trusted proxy', () => {
  // Loopback is left out: the test, on 127.0.0.1, is a client that reaches the plain-HTTP port directly.
  const s = new TestServer({ env: { PUSHBASE_BEHIND_TLS_PROXY: 'true', PUSHBASE_TRUSTED_PROXIES: '10.0.0.0/8, fd00::/8', PUSHBASE_AUTH_FAILURES_PER_MINUTE: '2' } });
  beforeAll(async () => {
    await s.start();
  });
  afterAll(async () => {
    await s.stop();
  });

  it('are not believed: a request claiming X-Forwarded-Proto https is refused with a JSON 403, valid key or not', async () => {
    expectNotFromProxy(await s.request('GET', '/', { key: s.keys.acme!, headers: { 'x-forwarded-proto': 'https' } }), 'GET', '/');
    expectNotFromProxy(await s.request('GET', '/', { key: s.keys.acme! }), 'GET', '/');
    const body = { fields: { n: { type: 'number', name: 'N' } } };
    const create = await s.request('PUT', '/datasets/direct', { key: s.keys.acme!, body, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '10.0.0.1' } });
    expectNotFromProxy(create, 'PUT', '/datasets/{id}');
    expect((await s.admin('/admin/accounts/acme/datasets')).body).toEqual({ datasets: [] });
    const listening = s.output.map((l) => (l.includes('"msg":"listening"') ? JSON.parse(l) : undefined)).find((m) => m !== undefined);
    expect(listening.trusted_proxies).toEqual(['10.0.0.0/8', 'fd00::/8']);
  });

  it('cannot rotate X-Forwarded-For past the failed-auth guard: such requests never reach authentication', async () => {
    for (let i = 0; i < 6; i++) {
      const res = await s.request('GET', '/', { key: `guess-${i}`, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': `198.51.100.${i}` } });
      expectNotFromProxy(res, 'GET', '/');
    }
  });
});

describe('a client address through several trusted hops', () => {
  it('is the first untrusted address from the right of X-Forwarded-For; entries left of it are ignored', async () => {
    // 127.0.0.1 is the proxy the test stands in for; 203.0.113.0/24 a CDN in front of it, trusted too.
    const guarded = await new TestServer({
      env: { PUSHBASE_BEHIND_TLS_PROXY: 'true', PUSHBASE_TRUSTED_PROXIES: '127.0.0.1, 203.0.113.0/24', PUSHBASE_AUTH_FAILURES_PER_MINUTE: '2' },
    }).start();
    try {
      const from = (xff: string, key = 'wrong') => guarded.request('GET', '/', { key, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': xff } });
      expect((await from('192.0.2.1, 198.51.100.9, 203.0.113.7')).status).toBe(401);
      expect((await from('192.0.2.2, 198.51.100.9, 203.0.113.8')).status).toBe(401);
      // Same client (198.51.100.9) behind another CDN node, with another forged entry: still the same budget.
      expect((await from('192.0.2.3, 198.51.100.9, 203.0.113.9')).status).toBe(429);
      expect((await from('198.51.100.9')).status).toBe(429);
      // When every hop is trusted, the furthest one counts as the client: the CDN node, with its own budget.
      expect((await from('203.0.113.7')).status).toBe(401);
      expect((await from('198.51.100.9, 203.0.113.7', guarded.keys.acme)).status).toBe(200);
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

import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { hashApiKey } from '@pushbase/gateway';
import { adminRequest, BUNDLE, ROOT, TestServer, type Response } from '../helpers/server';

/*
 * Accounts and keys in embedded mode (docs/operations.md → Accounts and API keys), over real processes: made through the admin
 * listener and the CLI, used on the public API, revoked, limited by quotas, deleted with their datasets,
 * and all of it surviving kill -9 because it is events in the data directory's account log — where no key
 * appears in the clear, only its SHA-256.
 */

jest.setTimeout(180_000);

const run = promisify(execFile);
const DEFINITION = { fields: { n: { type: 'number', name: 'N' } } };

const adminCall = (server: TestServer, method: string, route: string, body?: unknown): Promise<Response> => adminRequest(server, method, route, body);

/** Every file of the data directory, whole, as one string (latin1 keeps every byte). */
function dataDirBytes(dir: string): string {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) out.push(readFileSync(full, 'latin1'));
    }
  };
  walk(dir);
  return out.join('\n');
}

describe('accounts and keys, embedded', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill9().catch(() => undefined);
  });
  const start = async (server: TestServer): Promise<TestServer> => {
    servers.push(server);
    return server.start();
  };

  it('creates, uses, revokes and deletes, and keeps it all across kill -9', async () => {
    const s = await start(new TestServer({ keys: {} }));
    const account = `acct-${Date.now().toString(36)}`;
    expect(await adminCall(s, 'POST', '/admin/accounts', { account })).toMatchObject({ status: 201, body: { account, key_count: 0 } });
    const made = await adminCall(s, 'POST', `/admin/accounts/${account}/keys`, { label: 'e2e' });
    expect(made.status).toBe(201);
    expect(made.headers['cache-control']).toBe('no-store');
    const key = made.body.key as string;
    const keyId = made.body.key_id as string;
    const second = (await adminCall(s, 'POST', `/admin/accounts/${account}/keys`, {})).body as { key: string; key_id: string };

    expect((await s.request('PUT', '/datasets/sales', { key, body: DEFINITION })).status).toBe(201);
    expect((await s.request('POST', '/datasets/sales/data', { key, body: { data: [{ n: 1 }, { n: 2 }] } })).status).toBe(200);
    expect(await s.records(account, 'sales')).toEqual([{ n: 1 }, { n: 2 }]);

    const listed = await adminCall(s, 'GET', `/admin/accounts/${account}/keys`);
    expect(listed.body.keys.map((k: { key_id: string }) => k.key_id).sort()).toEqual([keyId, second.key_id].sort());
    expect(listed.body.keys.find((k: { key_id: string }) => k.key_id === keyId)).toEqual({ key_id: keyId, account, scope: 'write', label: 'e2e', created_at: expect.any(String) });
    expect(JSON.stringify(listed.body)).not.toContain(key);
    expect(JSON.stringify(listed.body)).not.toContain(hashApiKey(key));

    // Revoked: refused from the very next request.
    expect((await adminCall(s, 'DELETE', `/admin/accounts/${account}/keys/${keyId}`)).status).toBe(204);
    expect((await s.request('GET', '/', { key })).status).toBe(401);
    expect((await s.request('GET', '/', { key: second.key })).status).toBe(200);

    await s.kill9();
    const t = await start(new TestServer({ dataDir: s.dataDir, keys: {} }));
    expect((await t.request('GET', '/', { key })).status).toBe(401);
    expect((await t.request('POST', '/datasets/sales/data', { key: second.key, body: { data: [{ n: 3 }] } })).status).toBe(200);
    expect((await adminCall(t, 'GET', `/admin/accounts/${account}`)).body).toMatchObject({ account, key_count: 1 });
    expect((await adminCall(t, 'GET', `/admin/accounts/${account}/keys`)).body.keys).toEqual([expect.objectContaining({ key_id: second.key_id })]);

    // No key in the clear anywhere in the data directory; their hashes are in the account log.
    const bytes = dataDirBytes(t.dataDir);
    for (const k of [key, second.key]) {
      expect(bytes).not.toContain(k);
      expect(bytes).toContain(hashApiKey(k));
    }

    // Deleting the account deletes its datasets (as events: the read side follows) and refuses its keys.
    expect((await t.request('PUT', '/datasets/other', { key: second.key, body: DEFINITION })).status).toBe(201);
    expect(await adminCall(t, 'DELETE', `/admin/accounts/${account}`)).toMatchObject({ status: 200, body: { datasets_deleted: 2 } });
    expect((await t.request('GET', '/', { key: second.key })).status).toBe(401);
    expect((await t.admin(`/admin/accounts/${account}/datasets`)).body).toEqual({ datasets: [] });
    expect((await t.admin(`/admin/accounts/${account}/datasets/sales/records`)).status).toBe(404);
    expect((await adminCall(t, 'GET', `/admin/accounts/${account}`)).status).toBe(404);

    await t.kill9();
    const u = await start(new TestServer({ dataDir: s.dataDir, keys: {} }));
    expect((await u.request('GET', '/', { key: second.key })).status).toBe(401);
    expect((await u.admin(`/admin/accounts/${account}/datasets`)).body).toEqual({ datasets: [] });
    expect((await adminCall(u, 'GET', '/admin/accounts')).body.accounts.map((a: { account: string }) => a.account)).not.toContain(account);
    expect(await u.stop()).toBe(0);
  });

  it('applies an account\'s quotas and refuses writes to a read key', async () => {
    const s = await start(new TestServer({ keys: {}, env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: '1000' } }));
    expect((await adminCall(s, 'POST', '/admin/accounts', { account: 'few', quotas: { datasets: 2 } })).status).toBe(201);
    const key = (await adminCall(s, 'POST', '/admin/accounts/few/keys', {})).body.key as string;
    expect((await s.request('PUT', '/datasets/a', { key, body: DEFINITION })).status).toBe(201);
    expect((await s.request('PUT', '/datasets/b', { key, body: DEFINITION })).status).toBe(201);
    const third = await s.request('PUT', '/datasets/c', { key, body: DEFINITION });
    expect(third.status).toBe(400);
    expect(third.body.error.message).toContain('limit of 2 datasets');

    expect((await adminCall(s, 'POST', '/admin/accounts', { account: 'slow', quotas: { requests_per_minute: 3 } })).status).toBe(201);
    const slow = (await adminCall(s, 'POST', '/admin/accounts/slow/keys', {})).body.key as string;
    for (let i = 0; i < 3; i++) expect((await s.request('GET', '/', { key: slow })).status).toBe(200);
    const fourth = await s.request('GET', '/', { key: slow });
    expect(fourth.status).toBe(429);
    expect(fourth.headers['ratelimit-limit']).toBe('3');
    // The other account's default (the operator's 1000) is untouched.
    expect((await s.request('GET', '/', { key })).headers['ratelimit-limit']).toBe('1000');

    const reader = (await adminCall(s, 'POST', '/admin/accounts/few/keys', { scope: 'read' })).body.key as string;
    expect((await s.request('GET', '/', { key: reader })).status).toBe(200);
    for (const [method, route, body] of [
      ['PUT', '/datasets/a', DEFINITION],
      ['POST', '/datasets/a/data', { data: [{ n: 1 }] }],
      ['PUT', '/datasets/a/data', { data: [] }],
      ['DELETE', '/datasets/a', undefined],
    ] as const) {
      const res = await s.request(method, route, { key: reader, body });
      expect([method, route, res.status, res.body?.error?.code]).toEqual([method, route, 403, 'read_only_key']);
    }
    expect(await s.records('few', 'a')).toEqual([]);

    // A quota raised applies at once, and survives a restart.
    expect((await adminCall(s, 'PATCH', '/admin/accounts/few', { quotas: { datasets: 3 } })).body.effective_quotas).toEqual({ datasets: 3, requests_per_minute: 1000 });
    expect(await s.stop()).toBe(0);
    const t = await start(new TestServer({ dataDir: s.dataDir, keys: {}, env: { PUSHBASE_RATE_LIMIT_PER_MINUTE: '1000' } }));
    expect((await t.request('PUT', '/datasets/c', { key, body: DEFINITION })).status).toBe(201);
    expect((await t.request('PUT', '/datasets/d', { key, body: DEFINITION })).body.error.message).toContain('limit of 3 datasets');
    expect(await t.stop()).toBe(0);
  });

  it('refuses to delete an account PUSHBASE_API_KEYS names, whose configured key no deletion can revoke', async () => {
    const s = await start(new TestServer());
    const refused = await adminCall(s, 'DELETE', '/admin/accounts/acme');
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('account_has_configured_key');
    // An account of the log only is deleted as ever.
    expect((await adminCall(s, 'POST', '/admin/accounts', { account: 'transient' })).status).toBe(201);
    expect((await adminCall(s, 'DELETE', '/admin/accounts/transient')).status).toBe(200);
  });

  it('generates the default account and key on a first start, once, as events, into a file of the owner rather than the log', async () => {
    const s = await start(new TestServer({ keys: {} }));
    const parsed = (line: string): any => {
      try {
        return JSON.parse(line);
      } catch {
        return undefined;
      }
    };
    // TestServer passes PUSHBASE_API_KEYS="" for keys {}: a real first start. Its stdout is a pipe, not a
    // terminal, so the key goes to a file that only the owner can read, and the log says where.
    const file = path.join(s.dataDir, 'initial-api-key');
    const generated = s.output.map(parsed).find((l) => /generated an API key for account "default"/.test(l?.msg ?? ''));
    expect(generated).toMatchObject({ file });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const key = readFileSync(file, 'utf8').trim();
    expect(key).toMatch(/^pb_[\w-]{43}$/);
    expect(s.output.join('\n')).not.toContain(key);
    expect((await s.request('GET', '/', { key })).status).toBe(200);
    expect((await adminCall(s, 'GET', '/admin/accounts/default/keys')).body.keys).toEqual([expect.objectContaining({ label: 'generated at first start', scope: 'write' })]);
    expect(await s.stop()).toBe(0);
    const t = await start(new TestServer({ dataDir: s.dataDir, keys: {} }));
    expect(t.output.join('\n')).not.toContain('generated an API key');
    expect((await t.request('GET', '/', { key })).status).toBe(200);
    expect(statSync(path.join(s.dataDir, 'accounts', 'log')).isDirectory()).toBe(true);
    expect(await t.stop()).toBe(0);
  });

  it('round-trips through the CLI, with the token from the data directory', async () => {
    // No configured admin token: the server generates admin.token, which the CLI reads from PUSHBASE_DATA_DIR.
    const s = await start(new TestServer({ env: { PUSHBASE_ADMIN_TOKEN: '' } }));
    const env = { ...process.env, PUSHBASE_DATA_DIR: s.dataDir, PUSHBASE_ADMIN_URL: `http://127.0.0.1:${s.adminPort}`, PUSHBASE_ADMIN_TOKEN: '' };
    const cli = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
      try {
        const { stdout, stderr } = await run(process.execPath, [BUNDLE, ...args], { cwd: ROOT, env });
        return { code: 0, stdout, stderr };
      } catch (e) {
        const err = e as { code: number; stdout: string; stderr: string };
        return { code: err.code, stdout: err.stdout, stderr: err.stderr };
      }
    };

    const created = await cli('accounts', 'create', 'cli-acme', '--requests-per-minute', '30');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(created.stdout).toMatch(/^account +cli-acme$/m);
    expect(created.stdout).toMatch(/^requests_per_minute +30$/m);
    expect(created.stdout).toMatch(/^datasets +100 \(default\)$/m);

    const key = JSON.parse((await cli('keys', 'create', 'cli-acme', '--label', 'from the cli', '--json')).stdout) as { key: string; key_id: string; label: string };
    expect(key.label).toBe('from the cli');
    expect((await s.request('PUT', '/datasets/via-cli', { key: key.key, body: DEFINITION })).status).toBe(201);

    const listed = await cli('keys', 'list', 'cli-acme');
    expect(listed.stdout).toMatch(new RegExp(`^${key.key_id} +write +\\S+ +from the cli$`, 'm'));
    expect(listed.stdout).not.toContain(key.key);
    expect((await cli('accounts', 'list')).stdout).toMatch(/^cli-acme +100 \(default\) +30 +1 /m);
    expect((await cli('accounts', 'quotas', 'cli-acme', '--requests-per-minute', 'default', '--datasets', '1', '--json')).stdout).toContain('"requests_per_minute": null');
    expect(JSON.parse((await cli('accounts', 'show', 'cli-acme', '--json')).stdout)).toMatchObject({ quotas: { datasets: 1, requests_per_minute: null } });

    expect(await cli('keys', 'revoke', 'cli-acme', key.key_id)).toMatchObject({ code: 0, stdout: `revoked key ${key.key_id} of account cli-acme\n` });
    expect((await s.request('GET', '/', { key: key.key })).status).toBe(401);

    // Errors: on stderr, exit 1.
    expect(await cli('keys', 'revoke', 'cli-acme', key.key_id)).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(/^pushbase keys revoke: 404 Key ".*" not found/) });
    expect(await cli('accounts', 'create', 'cli-acme')).toMatchObject({ code: 1, stderr: expect.stringContaining('409 Account "cli-acme" already exists') });
    expect(await cli('accounts', 'delete', 'cli-acme')).toMatchObject({ code: 1, stderr: expect.stringContaining('pass --yes') });
    expect(await cli('accounts', 'list', '--token', 'wrong-token-0123456789')).toMatchObject({ code: 1, stderr: expect.stringContaining('401') });

    expect(await cli('accounts', 'delete', 'cli-acme', '--yes')).toMatchObject({ code: 0, stdout: 'deleted account cli-acme and 1 dataset(s)\n' });
    expect((await cli('accounts', 'show', 'cli-acme')).code).toBe(1);
    expect(await s.stop()).toBe(0);
  });
});

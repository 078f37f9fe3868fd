import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';

/*
 * `pushbase accounts …` and `pushbase keys …`: thin clients of the admin listener's /admin/accounts routes,
 * the same in both modes (the embedded server and a distributed gateway answer them alike). Output is for
 * people by default and JSON (the routes' answers as they are) with --json; errors go to stderr, exit 1.
 */

export interface AdminTarget {
  readonly url: string;
  readonly token: string;
}

interface AdminFlags {
  readonly adminUrl?: string;
  readonly token?: string;
  readonly json?: boolean;
}

/** An answer of the admin listener that is not a success, with its JSON error message. */
export class AdminCallError extends Error {
  override readonly name = 'AdminCallError';
}

/**
 * Where the admin listener is and its token: --admin-url, else PUSHBASE_ADMIN_URL, else the embedded server's
 * own listener (PUSHBASE_ADMIN_HOST:PUSHBASE_ADMIN_PORT, 127.0.0.1:8444 by default); --token, else
 * PUSHBASE_ADMIN_TOKEN, else the token the embedded server generated into PUSHBASE_DATA_DIR/admin.token.
 */
export async function adminTarget(flags: AdminFlags, env: NodeJS.ProcessEnv = process.env): Promise<AdminTarget> {
  const blank = (v: string | undefined): string | undefined => (v === undefined || v.trim() === '' ? undefined : v.trim());
  const host = blank(env.PUSHBASE_ADMIN_HOST) ?? '127.0.0.1';
  const listenHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = blank(flags.adminUrl) ?? blank(env.PUSHBASE_ADMIN_URL) ?? `http://${listenHost.includes(':') ? `[${listenHost}]` : listenHost}:${blank(env.PUSHBASE_ADMIN_PORT) ?? '8444'}`;
  let token = blank(flags.token) ?? blank(env.PUSHBASE_ADMIN_TOKEN);
  if (token === undefined) {
    const file = path.resolve(blank(env.PUSHBASE_DATA_DIR) ?? './.data', 'admin.token');
    try {
      token = (await readFile(file, 'utf8')).trim();
    } catch {
      throw new AdminCallError(`no admin token: pass --token, set PUSHBASE_ADMIN_TOKEN, or run where ${file} exists (PUSHBASE_DATA_DIR)`);
    }
  }
  return { url: url.replace(/\/+$/, ''), token };
}

/** One call to the admin listener; resolves to the parsed JSON answer (undefined for 204). */
export async function adminCall(target: AdminTarget, method: string, route: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${target.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${target.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
  } catch (e) {
    const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : e instanceof Error ? e.message : String(e);
    throw new AdminCallError(`cannot reach the admin listener at ${target.url} (${cause}); set --admin-url or PUSHBASE_ADMIN_URL`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const message = (parsed as { error?: { message?: unknown } } | undefined)?.error?.message;
    throw new AdminCallError(`${res.status} ${typeof message === 'string' ? message : text.slice(0, 200) || res.statusText}`);
  }
  return parsed;
}

interface QuotasJson {
  readonly datasets: number | null;
  readonly requests_per_minute: number | null;
}
interface AccountJson {
  readonly account: string;
  readonly created_at: string;
  readonly quotas: QuotasJson;
  readonly effective_quotas: { readonly datasets: number; readonly requests_per_minute: number };
  readonly key_count: number;
}
interface KeyJson {
  readonly key_id: string;
  readonly account: string;
  readonly scope: string;
  readonly label: string | null;
  readonly created_at: string;
  readonly key?: string;
}

/** Columns padded to their widest cell; the last one is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const quota = (set: number | null, inForce: number): string => (set === null ? `${inForce} (default)` : String(inForce));

export const formatAccount = (a: AccountJson): string =>
  [
    `account              ${a.account}`,
    `created_at           ${a.created_at}`,
    `datasets             ${quota(a.quotas.datasets, a.effective_quotas.datasets)}`,
    `requests_per_minute  ${quota(a.quotas.requests_per_minute, a.effective_quotas.requests_per_minute)}`,
    `keys                 ${a.key_count}`,
  ].join('\n');

export const formatAccounts = (accounts: readonly AccountJson[]): string =>
  accounts.length === 0
    ? 'no accounts'
    : table(
        ['ACCOUNT', 'DATASETS', 'REQUESTS/MIN', 'KEYS', 'CREATED'],
        accounts.map((a) => [a.account, quota(a.quotas.datasets, a.effective_quotas.datasets), quota(a.quotas.requests_per_minute, a.effective_quotas.requests_per_minute), String(a.key_count), a.created_at]),
      );

export const formatKeys = (keys: readonly KeyJson[]): string =>
  keys.length === 0 ? 'no keys' : table(['KEY_ID', 'SCOPE', 'CREATED', 'LABEL'], keys.map((k) => [k.key_id, k.scope, k.created_at, k.label ?? '']));

export const formatCreatedKey = (k: KeyJson): string =>
  [`key_id   ${k.key_id}`, `account  ${k.account}`, `scope    ${k.scope}`, ...(k.label === null ? [] : [`label    ${k.label}`]), `key      ${k.key ?? ''}`, '', 'The key is shown only this once; pushbase keeps only its hash.'].join('\n');

/**
 * A quota option's value: a whole number, or `default` for the server's default (kept as the word: commander
 * turns an option parser's null into an empty string).
 */
export function parseQuotaOption(value: string): number | 'default' {
  if (value === 'default') return 'default';
  if (!/^[0-9]+$/.test(value)) throw new InvalidArgumentError(`a quota is a whole number or "default" (got "${value}")`);
  return Number(value);
}

type QuotaFlags = AdminFlags & { datasets?: number | 'default'; requestsPerMinute?: number | 'default' };
const quotaValue = (v: number | 'default'): number | null => (v === 'default' ? null : v);
const quotasOf = (o: QuotaFlags): Partial<QuotasJson> => ({
  ...(o.datasets === undefined ? {} : { datasets: quotaValue(o.datasets) }),
  ...(o.requestsPerMinute === undefined ? {} : { requests_per_minute: quotaValue(o.requestsPerMinute) }),
});

/** Runs one admin command: prints its answer (JSON or for people), or the error on stderr and exit 1. */
function run<O extends AdminFlags>(name: string, work: (target: AdminTarget, options: O, args: readonly string[]) => Promise<{ json: unknown; human: string }>) {
  return async (...args: unknown[]): Promise<void> => {
    // commander passes the positional arguments, then the options, then the command.
    const command = args.at(-1) as Command;
    const options = command.opts<O>();
    try {
      const target = await adminTarget(options);
      const out = await work(target, options, args.slice(0, -2) as string[]);
      process.stdout.write(`${options.json === true ? JSON.stringify(out.json, null, 2) : out.human}\n`);
    } catch (e) {
      process.stderr.write(`pushbase ${name}: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    }
  };
}

const withTarget = (cmd: Command): Command =>
  cmd
    .option('--admin-url <url>', 'the admin listener (default: PUSHBASE_ADMIN_URL, else http://PUSHBASE_ADMIN_HOST:PUSHBASE_ADMIN_PORT, 127.0.0.1:8444)')
    .option('--token <token>', 'the admin token (default: PUSHBASE_ADMIN_TOKEN, else PUSHBASE_DATA_DIR/admin.token)')
    .option('--json', 'print the answer as JSON');

const enc = encodeURIComponent;

/** Adds `pushbase accounts …` and `pushbase keys …` to the program. */
export function addAdminCommands(program: Command): void {
  const accounts = program.command('accounts').description('create, list, show, set quotas of and delete accounts (through the admin listener)');
  withTarget(accounts.command('create <account>').description('create an account; quotas default to the API\'s limits'))
    .option('--datasets <n>', 'datasets the account may hold (or "default")', parseQuotaOption)
    .option('--requests-per-minute <n>', 'requests per minute per key (or "default")', parseQuotaOption)
    .action(
      run<QuotaFlags>('accounts create', async (target, o, args) => {
        const [account = ''] = args;
        const view = (await adminCall(target, 'POST', '/admin/accounts', { account, quotas: quotasOf(o) })) as AccountJson;
        return { json: view, human: formatAccount(view) };
      }),
    );
  withTarget(accounts.command('list').description('list the accounts with their quotas in force'))
    .action(
      run('accounts list', async (target) => {
        const answer = (await adminCall(target, 'GET', '/admin/accounts')) as { accounts: AccountJson[] };
        return { json: answer, human: formatAccounts(answer.accounts) };
      }),
    );
  withTarget(accounts.command('show <account>').description('show one account'))
    .action(
      run('accounts show', async (target, _o, args) => {
        const view = (await adminCall(target, 'GET', `/admin/accounts/${enc(args[0] ?? '')}`)) as AccountJson;
        return { json: view, human: formatAccount(view) };
      }),
    );
  withTarget(accounts.command('quotas <account>').description('set an account\'s quotas ("default" puts one back to the server\'s default); the others stay'))
    .option('--datasets <n>', 'datasets the account may hold (or "default")', parseQuotaOption)
    .option('--requests-per-minute <n>', 'requests per minute per key (or "default")', parseQuotaOption)
    .action(
      run<QuotaFlags>('accounts quotas', async (target, o, args) => {
        const view = (await adminCall(target, 'PATCH', `/admin/accounts/${enc(args[0] ?? '')}`, { quotas: quotasOf(o) })) as AccountJson;
        return { json: view, human: formatAccount(view) };
      }),
    );
  withTarget(accounts.command('delete <account>').description('delete an account, all its datasets and all its keys'))
    .option('--yes', 'confirm: the datasets cannot be restored')
    .action(
      run<AdminFlags & { yes?: boolean }>('accounts delete', async (target, o, args) => {
        const [account = ''] = args;
        if (o.yes !== true) throw new AdminCallError(`this deletes account "${account}" with all its datasets and keys; pass --yes to confirm`);
        const answer = (await adminCall(target, 'DELETE', `/admin/accounts/${enc(account)}`)) as { datasets_deleted: number };
        return { json: answer, human: `deleted account ${account} and ${answer.datasets_deleted} dataset(s)` };
      }),
    );

  const keys = program.command('keys').description('create, list and revoke API keys of an account (through the admin listener)');
  withTarget(keys.command('create <account>').description('create a key for the account; it is printed this once'))
    .option('--scope <scope>', 'write (the whole API) or read (the read side only)', 'write')
    .option('--label <label>', 'a note to recognise the key by in lists')
    .action(
      run<AdminFlags & { scope: string; label?: string }>('keys create', async (target, o, args) => {
        const created = (await adminCall(target, 'POST', `/admin/accounts/${enc(args[0] ?? '')}/keys`, { scope: o.scope, ...(o.label === undefined ? {} : { label: o.label }) })) as KeyJson;
        return { json: created, human: formatCreatedKey(created) };
      }),
    );
  withTarget(keys.command('list <account>').description('list the account\'s keys (never a key itself: ids, scopes, labels)'))
    .action(
      run('keys list', async (target, _o, args) => {
        const answer = (await adminCall(target, 'GET', `/admin/accounts/${enc(args[0] ?? '')}/keys`)) as { keys: KeyJson[] };
        return { json: answer, human: formatKeys(answer.keys) };
      }),
    );
  withTarget(keys.command('revoke <account> <key_id>').description('revoke a key; requests with it are refused from the next one'))
    .action(
      run('keys revoke', async (target, _o, args) => {
        const [account = '', keyId = ''] = args;
        await adminCall(target, 'DELETE', `/admin/accounts/${enc(account)}/keys/${enc(keyId)}`);
        return { json: { revoked: keyId, account }, human: `revoked key ${keyId} of account ${account}` };
      }),
    );
}

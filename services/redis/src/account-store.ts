import type { StreamPosition } from '@pushbase/contracts';
import { ACCOUNT_EVENT_TYPES, type AccountEvent, type AccountInfo, type AccountQuotas, type AccountsState, type KeyInfo, type KeyScope } from '@pushbase/domain';
import type { ChainableCommander, Redis, Result } from 'ioredis';
import { redisError, where } from './connection';
import { checkPrefix, DEFAULT_PREFIX } from './keys';
import { markerField, raiseMarkers, RedisStateGuard, stateKey } from './state';

/*
 * Accounts and keys in Redis: the fold of the accounts topic, which the topic can always restore. Each event
 * is applied in one script and only above the account's last applied offset, so re-applying changes nothing
 * and a late, older event cannot undo a revocation; each apply raises the topic's marker (state.ts). The key
 * layout and why it is sound: docs/architecture.md → The Redis account store.
 */

/** Where the account store's keys live under a prefix: replay builds a fresh one and promotes it. */
export const accountsNamespace = (prefix: string): string => `${checkPrefix(prefix)}accounts:`;

// KEYS[1] live set, KEYS[2] account hash, KEYS[3] the account's keys, KEYS[4] its position, KEYS[5] the state.
// ARGV[1] namespace, ARGV[2] type, ARGV[3] account, ARGV[4] offset, ARGV[5] at, ARGV[6] the partition's
// marker field, ARGV[7] the least it must be at ('' for none), ARGV[8..] the payload:
//   AccountCreated / AccountQuotasSet: ARGV[8] quotas JSON
//   KeyCreated: ARGV[8] key_id, ARGV[9] hash, ARGV[10] scope, ARGV[11] the key's listing JSON
//   KeyRevoked: ARGV[8] key_id
// The key-by-hash keys are named inside the script (their hash is found in the account's keys on a
// revocation or deletion): fine on one Redis, as the rest of the store assumes (see generations.ts).
// Returns 1 when applied (even as a no-op of the fold), 0 when skipped as already applied.
const APPLY = `
local ns, kind, account, offset, at = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local marker = tonumber(redis.call('HGET', KEYS[5], ARGV[6]) or '0')
if ARGV[7] ~= '' and marker < tonumber(ARGV[7]) then
  redis.call('HSETNX', KEYS[5], 'regressed', 'an account apply found ' .. ARGV[6] .. ' at ' .. marker .. ', below ' .. ARGV[7])
end
if offset + 1 > marker then redis.call('HSET', KEYS[5], ARGV[6], offset + 1) end
local pos = redis.call('GET', KEYS[4])
if pos and tonumber(pos) >= offset then return 0 end
redis.call('SET', KEYS[4], ARGV[4])
local exists = redis.call('SISMEMBER', KEYS[1], account) == 1
if kind == 'AccountCreated' then
  if exists then return 1 end
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('SADD', KEYS[1], account)
  redis.call('HSET', KEYS[2], 'created_at', at, 'quotas', ARGV[8])
elseif kind == 'AccountQuotasSet' then
  if exists then redis.call('HSET', KEYS[2], 'quotas', ARGV[8]) end
elseif kind == 'AccountDeleted' then
  if not exists then return 1 end
  for _, v in ipairs(redis.call('HVALS', KEYS[3])) do redis.call('DEL', ns .. 'key:' .. cjson.decode(v).hash) end
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('SREM', KEYS[1], account)
elseif kind == 'KeyCreated' then
  local byHash = ns .. 'key:' .. ARGV[9]
  if not exists or redis.call('HEXISTS', KEYS[3], ARGV[8]) == 1 or redis.call('EXISTS', byHash) == 1 then return 1 end
  redis.call('HSET', KEYS[3], ARGV[8], ARGV[11])
  redis.call('HSET', byHash, 'account', account, 'key_id', ARGV[8], 'scope', ARGV[10])
elseif kind == 'KeyRevoked' then
  local v = redis.call('HGET', KEYS[3], ARGV[8])
  if not exists or not v then return 1 end
  redis.call('DEL', ns .. 'key:' .. cjson.decode(v).hash)
  redis.call('HDEL', KEYS[3], ARGV[8])
end
return 1
`;

// KEYS[1] live set, KEYS[2] account hash, KEYS[3] its keys. One account, read at one moment.
const READ_ACCOUNT = `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return false end
return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
`;

// KEYS[1] the key-by-hash key. The key's account and scope, and that account's quotas, at one moment.
const RESOLVE = `
local k = redis.call('HMGET', KEYS[1], 'account', 'key_id', 'scope')
if not k[1] then return false end
k[4] = redis.call('HGET', ARGV[1] .. 'account:' .. k[1], 'quotas')
return k
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseAccountApply(live: string, account: string, keys: string, position: string, state: string, ...args: (string | number)[]): Result<number, Context>;
    pushbaseAccountRead(live: string, account: string, keys: string, name: string): Result<[string[], string[]] | null, Context>;
    pushbaseAccountResolve(byHash: string, namespace: string): Result<[string, string, string, string | null] | null, Context>;
  }
}

/** A resolved key: whose it is, what it may do, and its account's quotas as set (null = the server's default). */
export interface ResolvedKey {
  readonly account: string;
  readonly key_id: string;
  readonly scope: KeyScope;
  readonly quotas: AccountQuotas;
}

const ACCOUNT_TYPES = new Set<string>(ACCOUNT_EVENT_TYPES);

/** True for an account event (as opposed to a dataset event: both travel through the schema service). */
export const isAccountEvent = (e: { readonly type: string }): e is AccountEvent => ACCOUNT_TYPES.has(e.type);

const pairs = (flat: readonly string[]): Map<string, string> => {
  const m = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) m.set(flat[i] as string, flat[i + 1] as string);
  return m;
};

const parseQuotas = (json: string | null | undefined): AccountQuotas => {
  const q = JSON.parse(json ?? '{}') as Partial<AccountQuotas>;
  return { datasets: q.datasets ?? null, requests_per_minute: q.requests_per_minute ?? null };
};

interface StoredKey {
  readonly hash: string;
  readonly scope: KeyScope;
  readonly label: string | null;
  readonly created_at: number;
}

export interface RedisStoreOptions {
  readonly prefix?: string;
  /** How often reads look at the state for lost data (RedisStateGuard). Default 1000 ms. */
  readonly stateCheckMs?: number;
}

export class RedisAccountStore {
  private readonly ns: string;
  private readonly prefix: string;
  private readonly state: string;
  private readonly guard: RedisStateGuard;
  /** Per marker field, the highest this object raised: the least the state must show. */
  private readonly raised = new Map<string, number>();

  constructor(
    private readonly redis: Redis,
    options: RedisStoreOptions = {},
  ) {
    this.ns = accountsNamespace(options.prefix ?? DEFAULT_PREFIX);
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.state = stateKey(options.prefix ?? DEFAULT_PREFIX);
    this.guard = new RedisStateGuard(redis, options.prefix ?? DEFAULT_PREFIX, options.stateCheckMs);
    redis.defineCommand('pushbaseAccountApply', { numberOfKeys: 5, lua: APPLY });
    redis.defineCommand('pushbaseAccountRead', { numberOfKeys: 3, lua: READ_ACCOUNT });
    redis.defineCommand('pushbaseAccountResolve', { numberOfKeys: 1, lua: RESOLVE });
  }

  private keysOf(account: string): [string, string, string, string] {
    return [`${this.ns}live`, `${this.ns}account:${account}`, `${this.ns}keys:${account}`, `${this.ns}position:${account}`];
  }

  /**
   * Applies the events in order, each atomically and only if its offset is above its account's last
   * applied one (see the top), in one round trip. Resolves with how many were applied (not skipped).
   */
  async apply(events: readonly { readonly event: AccountEvent; readonly position: StreamPosition }[]): Promise<number> {
    if (events.length === 0) return 0;
    const pipeline: ChainableCommander = this.redis.pipeline();
    // Remembered only once applied: a raise that may not have happened must not be expected later.
    const raised = new Map(this.raised);
    for (const { event: e, position } of events) {
      const payload: (string | number)[] = [];
      switch (e.type) {
        case 'AccountCreated':
        case 'AccountQuotasSet':
          payload.push(JSON.stringify({ datasets: e.quotas.datasets, requests_per_minute: e.quotas.requests_per_minute }));
          break;
        case 'KeyCreated':
          payload.push(e.key_id, e.hash, e.scope, JSON.stringify({ hash: e.hash, scope: e.scope, label: e.label, created_at: e.at } satisfies StoredKey));
          break;
        case 'KeyRevoked':
          payload.push(e.key_id);
          break;
        case 'AccountDeleted':
          break;
      }
      const field = markerField('a', position.partition);
      pipeline.pushbaseAccountApply(...this.keysOf(e.account), this.state, this.ns, e.type, e.account, position.offset, e.at, field, this.raised.get(field) ?? '', ...payload);
      raised.set(field, Math.max(raised.get(field) ?? 0, position.offset + 1));
    }
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipeline.exec();
    } catch (e) {
      throw redisError(where(this.redis), `applying ${events.length} account events`, e);
    }
    const failed = results?.find(([err]) => err !== null);
    if (failed) throw redisError(where(this.redis), `applying ${events.length} account events`, failed[0]);
    for (const [field, next] of raised) this.raised.set(field, next);
    return (results ?? []).filter(([, applied]) => applied === 1).length;
  }

  /**
   * Checks the markers this object raised are still there (a follower that applies nothing for a while
   * would not notice otherwise); true when Redis is known to have lost state.
   */
  recheck(): Promise<boolean> {
    return raiseMarkers(this.redis, this.prefix, 'an account store', [...this.raised].map(([field, next]) => ({ field, next, least: next })));
  }

  /** The live account, with its keys; undefined when it does not exist. */
  async get(account: string): Promise<AccountInfo | undefined> {
    await this.guard.check();
    const [live, hash, keys] = this.keysOf(account);
    let reply: [string[], string[]] | null;
    try {
      reply = await this.redis.pushbaseAccountRead(live, hash, keys, account);
    } catch (e) {
      throw redisError(where(this.redis), 'reading an account', e);
    }
    if (reply === null) return undefined;
    const fields = pairs(reply[0]);
    const keyMap = new Map<string, KeyInfo>();
    for (const [key_id, json] of pairs(reply[1])) {
      const k = JSON.parse(json) as StoredKey;
      keyMap.set(key_id, { key_id, account, hash: k.hash, scope: k.scope, label: k.label, created_at: k.created_at });
    }
    return { account, created_at: Number(fields.get('created_at')), quotas: parseQuotas(fields.get('quotas')), keys: keyMap };
  }

  /** The account's quotas as set; undefined when the account does not exist. */
  async quotas(account: string): Promise<AccountQuotas | undefined> {
    await this.guard.check();
    let json: string | null;
    try {
      json = await this.redis.hget(`${this.ns}account:${account}`, 'quotas');
    } catch (e) {
      throw redisError(where(this.redis), "an account's quotas", e);
    }
    return json === null ? undefined : parseQuotas(json);
  }

  /** The live accounts' names, sorted. */
  async list(): Promise<string[]> {
    await this.guard.check();
    try {
      return (await this.redis.smembers(`${this.ns}live`)).sort();
    } catch (e) {
      throw redisError(where(this.redis), 'listing accounts', e);
    }
  }

  /**
   * The state the domain's decisions read (decideCreateAccount, decideCreateKey…) for one account: the
   * account itself, and whether a key hash is taken anywhere (`hashes`, looked up here).
   */
  async stateFor(account: string, hashes: readonly string[] = []): Promise<AccountsState> {
    const [info, taken] = await Promise.all([this.get(account), Promise.all(hashes.map((h) => this.resolveHash(h)))]);
    const accounts = new Map<string, AccountInfo>(info === undefined ? [] : [[account, info]]);
    const keysByHash = new Map<string, KeyInfo>();
    for (const k of info?.keys.values() ?? []) keysByHash.set(k.hash, k);
    hashes.forEach((h, i) => {
      const t = taken[i];
      if (t !== undefined && !keysByHash.has(h)) keysByHash.set(h, { key_id: t.key_id, account: t.account, hash: h, scope: t.scope, label: null, created_at: 0 });
    });
    return { accounts, keysByHash };
  }

  /** Who a key hash (SHA-256 hex of the key) belongs to, with the account's quotas; undefined when no live key has it. */
  async resolveHash(hash: string): Promise<ResolvedKey | undefined> {
    await this.guard.check();
    let reply: [string, string, string, string | null] | null;
    try {
      reply = await this.redis.pushbaseAccountResolve(`${this.ns}key:${hash}`, this.ns);
    } catch (e) {
      throw redisError(where(this.redis), 'an API key', e);
    }
    if (reply === null) return undefined;
    const [account, key_id, scope, quotas] = reply;
    return { account, key_id, scope: scope as KeyScope, quotas: parseQuotas(quotas) };
  }

  /** The offset of the account's last applied event; undefined before any. */
  async position(account: string): Promise<number | undefined> {
    const v = await this.redis.get(this.keysOf(account)[3]);
    return v === null ? undefined : Number(v);
  }
}

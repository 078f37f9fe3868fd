import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis, Result } from 'ioredis';
import { checkPrefix } from './keys';

/*
 * A hold on every schema change of a deployment (datasets, accounts and keys), for `pushbase replay`'s swap:
 * no account lease is taken while it is set (account-lock.ts), so once the leases taken before it are gone,
 * the topics hold every change the live stores show. `<prefix>schema-hold` holds the holder's token with an
 * expiry it keeps extending, so a replay that died lets changes go on within HOLD_TTL_MS. Why:
 * docs/architecture.md → Replay.
 */

const HOLD_TTL_MS = 30_000;

/** Every lease key under `prefix` starts with this (the account follows). */
export const schemaLockNamespace = (prefix: string): string => `${checkPrefix(prefix)}schema-lock:`;

export const schemaHoldKey = (prefix: string): string => `${checkPrefix(prefix)}schema-hold`;

// KEYS[1] the hold, ARGV[1] the token, ARGV[2] the TTL in ms (empty: delete). 1 when still ours.
const KEEP_OR_RELEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseSchemaHoldKeep(hold: string, token: string, ttlMs: string): Result<number, Context>;
  }
}

export interface SchemaHold {
  /**
   * Extends the hold to a full TTL, rejecting if it is no longer this one (it expired: changes may have
   * been made since). Called right before the swap, which then has the TTL to finish.
   */
  confirm(): Promise<void>;
  /** Lets schema changes go on (only if the hold is still this one). */
  release(): Promise<void>;
}

/**
 * Sets the hold and waits until no account lease is held (a lease taken before the hold lasts at most its
 * TTL, extended while its holder appends). Rejects, releasing the hold, when another hold is set or when
 * leases remain after `waitMs`.
 */
export async function holdSchemaChanges(redis: Redis, prefix: string, options: { readonly waitMs?: number } = {}): Promise<SchemaHold> {
  redis.defineCommand('pushbaseSchemaHoldKeep', { numberOfKeys: 1, lua: KEEP_OR_RELEASE });
  const key = schemaHoldKey(prefix);
  const token = randomBytes(16).toString('hex');
  if ((await redis.set(key, token, 'PX', HOLD_TTL_MS, 'NX')) !== 'OK') throw new Error(`${key} is set: another \`pushbase replay\` is swapping on this prefix`);
  const keeper = setInterval(() => void redis.pushbaseSchemaHoldKeep(key, token, String(HOLD_TTL_MS)).catch(() => undefined), HOLD_TTL_MS / 3);
  const release = async (): Promise<void> => {
    clearInterval(keeper);
    await redis.pushbaseSchemaHoldKeep(key, token, '');
  };
  const confirm = async (): Promise<void> => {
    if ((await redis.pushbaseSchemaHoldKeep(key, token, String(HOLD_TTL_MS))) !== 1) throw new Error(`${key} expired while held: schema changes may have been made meanwhile`);
  };
  try {
    const match = `${schemaLockNamespace(prefix).replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;
    const deadline = Date.now() + (options.waitMs ?? 300_000);
    for (;;) {
      let cursor = '0';
      let held = 0;
      do {
        const [next, batch] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        held += batch.length;
        cursor = next;
      } while (cursor !== '0' && held === 0);
      if (held === 0) return { confirm, release };
      if (Date.now() > deadline) throw new Error(`schema changes were still under way after ${options.waitMs ?? 300_000} ms of holding new ones`);
      await sleep(50);
    }
  } catch (e) {
    await release().catch(() => undefined);
    throw e;
  }
}

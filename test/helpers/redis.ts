import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/*
 * Tests against the real Redis that jest's global setup made answer (PUSHBASE_REDIS_URL). Each test uses a
 * random key prefix and removes only its own keys (SCAN + UNLINK on the prefix), so tests can share one
 * server with each other and with other users of it; never FLUSHALL.
 */

export const redisUrl = (): string => process.env.PUSHBASE_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A connection that fails at once, with the URL in the message, when Redis does not answer: never a skip. */
export async function connectTestRedis(): Promise<Redis> {
  const url = redisUrl();
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 5000, maxRetriesPerRequest: 2 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw new Error(`Redis at ${url} does not answer (${(err as Error).message}); start it with \`npm run services:up\``);
  }
  return redis;
}

export const randomPrefix = (): string => `pushbase-test-${randomBytes(6).toString('hex')}:`;

/** Every key under `prefix`. The prefix is ours (letters, digits, "-" and ":"), so it holds no glob characters. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  if (!/^[A-Za-z0-9:_-]+$/.test(prefix)) throw new Error(`not a test prefix: ${prefix}`);
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

export async function deleteUnder(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(redis, prefix);
  if (keys.length > 0) await redis.unlink(...keys);
}

/** Everything stored under `prefix`, key names included, as text: to check what a store keeps. */
export async function dumpUnder(redis: Redis, prefix: string): Promise<string> {
  const out: Record<string, unknown> = {};
  for (const key of await keysUnder(redis, prefix)) {
    const type = await redis.type(key);
    if (type === 'hash') out[key] = await redis.hgetall(key);
    else if (type === 'set') out[key] = await redis.smembers(key);
    else if (type === 'zset') out[key] = await redis.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'list') out[key] = await redis.lrange(key, 0, -1);
    else out[key] = await redis.get(key);
  }
  return JSON.stringify(out);
}

export interface TestRedis {
  /** The suite's connection, made in beforeAll. */
  readonly redis: Redis;
  /** A random key prefix whose keys are deleted after the suite. */
  prefix(): string;
}

/**
 * A suite's Redis: in beforeAll, connects (failing, never skipping, when Redis does not answer); in afterAll,
 * deletes the keys under every prefix it handed out and disconnects. Call it at the top of a test file.
 */
export function useTestRedis(): TestRedis {
  let redis: Redis | undefined;
  const prefixes: string[] = [];
  beforeAll(async () => {
    redis = await connectTestRedis();
  });
  afterAll(async () => {
    if (redis === undefined) return;
    for (const p of prefixes) await deleteUnder(redis, p);
    redis.disconnect();
  });
  return {
    get redis(): Redis {
      if (redis === undefined) throw new Error('useTestRedis: the connection is made in beforeAll');
      return redis;
    },
    prefix() {
      const prefix = randomPrefix();
      prefixes.push(prefix);
      return prefix;
    },
  };
}

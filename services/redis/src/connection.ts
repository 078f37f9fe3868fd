import { redactUrl } from '@pushbase/telemetry';
import { DomainError } from '@pushbase/domain';
import { Redis, ReplyError } from 'ioredis';

/*
 * How the distributed services connect to Redis, and what a failure means to them. One connection per
 * store user (no module-level client). A command that cannot reach Redis fails after a few reconnection
 * attempts instead of queueing for ever, and comes back as a DomainError of code `unavailable`, which the
 * projector retries with backoff; an error Redis itself answered (ReplyError: a wrong type, a script
 * error) is a bug and stays a plain Error.
 */

export interface RedisConnectOptions {
  /**
   * For a client that answers requests (the gateway): a command fails at once while Redis is not connected
   * instead of waiting in ioredis's offline queue through reconnection attempts, and a command Redis does
   * not answer within `commandTimeoutMs` fails too, so a request gets its 503 in milliseconds, not seconds.
   * The client keeps reconnecting in the background and serves again as soon as Redis is back.
   */
  readonly failFast?: boolean;
  readonly commandTimeoutMs?: number;
}

export function connectRedis(url: string, options: RedisConnectOptions = {}): Redis {
  const failFast = options.failFast === true ? { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: options.commandTimeoutMs ?? 3000 } : {};
  return new Redis(url, { maxRetriesPerRequest: 3, connectTimeout: 5000, lazyConnect: true, ...failFast });
}

/** Wraps a failure of `what` so the caller can tell "retry later" from "this is a bug". */
export function redisError(configuredUrl: string, what: string, e: unknown): Error {
  if (e instanceof DomainError) return e;
  const url = redactUrl(configuredUrl);
  if (e instanceof ReplyError) return new Error(`Redis at ${url} refused ${what}: ${(e as Error).message}`, { cause: e });
  return new DomainError('unavailable', `Redis at ${url} cannot be reached for ${what}: ${e instanceof Error ? e.message : String(e)}`);
}

/** Connects now (a lazy client connects on its first command): fails at once, naming the URL. */
export async function openRedis(url: string, options: RedisConnectOptions = {}): Promise<Redis> {
  const redis = connectRedis(url, options);
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    redis.disconnect();
    throw redisError(url, 'connecting', e);
  }
  return redis;
}

/**
 * Closes a client: after its pending replies (QUIT), or at once when Redis does not answer; at once too
 * when `atOnce` (a failed start: nothing is pending).
 */
export async function closeRedis(redis: Redis, atOnce = false): Promise<void> {
  if (!atOnce) await redis.quit().then(() => undefined, () => redis.disconnect());
  else redis.disconnect();
}

/** host:port of a client, for messages (its URL may hold a password). */
export const where = (redis: Redis): string => `${redis.options.host ?? '?'}:${redis.options.port ?? '?'}`;

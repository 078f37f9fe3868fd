import { DomainError } from '@pushbase/domain';
import { Redis, ReplyError } from 'ioredis';

/*
 * How the distributed services connect to Redis, and what a failure means to them. One connection per
 * store user (no module-level client). A command that cannot reach Redis fails after a few reconnection
 * attempts instead of queueing for ever, and comes back as a DomainError of code `unavailable`, which the
 * projector retries with backoff; an error Redis itself answered (ReplyError: a wrong type, a script
 * error) is a bug and stays a plain Error.
 */

export function connectRedis(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 3, connectTimeout: 5000, lazyConnect: true });
}

/** Wraps a failure of `what` so the caller can tell "retry later" from "this is a bug". */
export function redisError(url: string, what: string, e: unknown): Error {
  if (e instanceof DomainError) return e;
  if (e instanceof ReplyError) return new Error(`Redis at ${url} refused ${what}: ${(e as Error).message}`, { cause: e });
  return new DomainError('unavailable', `Redis at ${url} cannot be reached for ${what}: ${e instanceof Error ? e.message : String(e)}`);
}

/** Connects now (a lazy client connects on its first command): fails at once, naming the URL. */
export async function openRedis(url: string): Promise<Redis> {
  const redis = connectRedis(url);
  try {
    await redis.connect();
    await redis.ping();
  } catch (e) {
    redis.disconnect();
    throw redisError(url, 'connecting', e);
  }
  return redis;
}

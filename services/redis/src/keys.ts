/*
 * Every key an adapter writes starts with its prefix (`pushbase:` by default), so several deployments or
 * test runs can share one Redis and each can find and remove exactly its own keys.
 */

export const DEFAULT_PREFIX = 'pushbase:';

/** A prefix must end the namespace clearly; `:` is the Redis convention. */
export function checkPrefix(prefix: string): string {
  if (prefix === '' || !prefix.endsWith(':')) throw new Error(`Redis key prefix must be non-empty and end with ":", got ${JSON.stringify(prefix)}`);
  return prefix;
}

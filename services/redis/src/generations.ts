import type { Redis } from 'ioredis';
import { accountsNamespace } from './account-store';
import { schemaNamespace } from './schema-store';
import { markerField, markRegressed, raiseMarkers, readState, stateKey } from './state';

/*
 * Whole generations of the schema store, for `pushbase replay`: it rebuilds the store under a fresh prefix,
 * compares it with the live one, and promotes it by renaming keys inside one MULTI/EXEC, so a reader keeps
 * its fixed key names and sees the old generation or the new one, never a mix. Why not a prefix pointer or
 * SWAPDB, and the price: docs/architecture.md → Replay.
 */

/** A pattern matching exactly the keys that start with `literal` (glob characters escaped). */
const startsWith = (literal: string): string => `${literal.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;

/** Every key of the schema store under `prefix`. */
export const schemaKeys = (redis: Redis, prefix: string): Promise<string[]> => namespaceKeys(redis, schemaNamespace(prefix));

/** Every key whose name starts with `namespace`. */
async function namespaceKeys(redis: Redis, namespace: string): Promise<string[]> {
  const match = startsWith(namespace);
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    for (const k of batch) keys.push(k);
    cursor = next;
  } while (cursor !== '0');
  // SCAN may return a key twice while the keyspace grows.
  return [...new Set(keys)].sort();
}

/**
 * The schema store under `prefix` as plain data: key (without the prefix) → its value as canonical text
 * (a hash's fields sorted, a set's members sorted), so two generations compare as maps of strings.
 */
export async function readSchemaGeneration(redis: Redis, prefix: string): Promise<Map<string, string>> {
  const namespace = schemaNamespace(prefix);
  const keys = await schemaKeys(redis, prefix);
  const out = new Map<string, string>();
  for (let i = 0; i < keys.length; i += 1000) {
    const chunk = keys.slice(i, i + 1000);
    const pipeline = redis.pipeline();
    // The layout of schema-store.ts: `dataset:` keys are hashes, `live:` and `dead:` keys sets.
    for (const k of chunk) {
      if (k.slice(namespace.length).startsWith('dataset:')) pipeline.hgetall(k);
      else pipeline.smembers(k);
    }
    const results = (await pipeline.exec()) ?? [];
    chunk.forEach((k, j) => {
      const [err, value] = results[j] ?? [new Error('no reply'), null];
      if (err !== null) throw err;
      const canonical = Array.isArray(value)
        ? JSON.stringify([...(value as string[])].sort())
        : JSON.stringify(Object.entries(value as Record<string, string>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
      out.set(k.slice(namespace.length), canonical);
    });
  }
  return out;
}

export interface SchemaPromotion {
  /** Keys of the fresh generation that now carry the live names. */
  readonly promoted: number;
  /** Keys of the former live generation, renamed under `retired` or deleted. */
  readonly retired: number;
}

/**
 * Makes the generation under `fresh` the live one (under `live`) in one transaction, its state
 * (`<prefix>state`, state.ts) with it. The former live keys move under `retired` when given, else they are
 * deleted. The caller makes sure nothing writes to either generation meanwhile (the live projector is
 * stopped and schema changes are held during replay's swap).
 */
export function promoteSchemaGeneration(redis: Redis, prefixes: { readonly fresh: string; readonly live: string; readonly retired?: string }): Promise<SchemaPromotion> {
  return promoteGeneration(redis, schemaNamespace, prefixes, stateKey);
}

/**
 * Writes the state of the generation being built under `fresh` (state.ts): a generation newer than the
 * live one's, and the markers at the ends the rebuild reached (`d`: the dataset topic, `a`: the accounts
 * topic), so the projector group continuing there finds the state at least as far.
 */
export async function writeGenerationState(
  redis: Redis,
  prefixes: { readonly fresh: string; readonly live: string },
  ends: { readonly d: ReadonlyMap<number, number>; readonly a: ReadonlyMap<number, number> },
): Promise<number> {
  const live = Number((await redis.hget(stateKey(prefixes.live), 'generation')) ?? 0);
  const generation = Math.max(Date.now(), live + 1);
  await redis.hset(stateKey(prefixes.fresh), 'generation', String(generation));
  const markers = (['d', 'a'] as const).flatMap((topic) => [...ends[topic]].map(([partition, next]) => ({ field: markerField(topic, partition), next })));
  await raiseMarkers(redis, prefixes.fresh, 'replay', markers);
  return generation;
}

/** promoteSchemaGeneration for the account store (`<prefix>accounts:`, account-store.ts): replay swaps it the same way. */
export function promoteAccountsGeneration(redis: Redis, prefixes: { readonly fresh: string; readonly live: string; readonly retired?: string }): Promise<SchemaPromotion> {
  return promoteGeneration(redis, accountsNamespace, prefixes);
}

async function promoteGeneration(
  redis: Redis,
  namespaceOf: (prefix: string) => string,
  prefixes: { readonly fresh: string; readonly live: string; readonly retired?: string },
  keyOf?: (prefix: string) => string,
): Promise<SchemaPromotion> {
  const freshNs = namespaceOf(prefixes.fresh);
  const liveNs = namespaceOf(prefixes.live);
  const retiredNs = prefixes.retired === undefined ? undefined : namespaceOf(prefixes.retired);
  const [freshKeys, liveKeys] = await Promise.all([namespaceKeys(redis, freshNs), namespaceKeys(redis, liveNs)]);
  // A fresh prefix under the live one (`pushbase:replay-…:`) is not matched by the live namespace
  // (`pushbase:schema:`), but guard against a caller choosing prefixes that overlap.
  const overlap = freshKeys.filter((k) => k.startsWith(liveNs));
  if (overlap.length > 0) throw new Error(`The fresh keys (${freshNs}) overlap the live ones (${liveNs})`);
  const multi = redis.multi();
  for (const k of liveKeys) {
    if (retiredNs === undefined) multi.unlink(k);
    else multi.rename(k, retiredNs + k.slice(liveNs.length));
  }
  for (const k of freshKeys) multi.rename(k, liveNs + k.slice(freshNs.length));
  // A single key beside the namespace: it replaces the live one (RENAME overwrites), which is retired first.
  if (keyOf !== undefined && (await redis.exists(keyOf(prefixes.fresh))) === 1) {
    if (prefixes.retired !== undefined && (await redis.exists(keyOf(prefixes.live))) === 1) multi.rename(keyOf(prefixes.live), keyOf(prefixes.retired));
    multi.rename(keyOf(prefixes.fresh), keyOf(prefixes.live));
  }
  const results = await multi.exec();
  if (results === null) throw new Error(`The promotion of ${freshNs} to ${liveNs} was aborted`);
  const failed = results.find(([err]) => err !== null);
  if (failed) throw failed[0] as Error;
  return { promoted: freshKeys.length, retired: liveKeys.length };
}

/** Removes the generation under `prefix` (a failed or verified-only rebuild, or a retired generation), its state too. */
export async function dropSchemaGeneration(redis: Redis, prefix: string): Promise<number> {
  return (await dropNamespace(redis, schemaNamespace(prefix))) + (await redis.unlink(stateKey(prefix)));
}

/** Removes the account store under `prefix`. */
export const dropAccountsGeneration = (redis: Redis, prefix: string): Promise<number> => dropNamespace(redis, accountsNamespace(prefix));

async function dropNamespace(redis: Redis, namespace: string): Promise<number> {
  const keys = await namespaceKeys(redis, namespace);
  for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000));
  return keys.length;
}

/**
 * The account store under `prefix` as plain data, as readSchemaGeneration: key (without the namespace) →
 * its value as canonical text, so a rebuilt generation compares with the live one (`replay --verify`).
 */
export async function readAccountsGeneration(redis: Redis, prefix: string): Promise<Map<string, string>> {
  const namespace = accountsNamespace(prefix);
  const keys = await namespaceKeys(redis, namespace);
  const out = new Map<string, string>();
  for (let i = 0; i < keys.length; i += 1000) {
    const chunk = keys.slice(i, i + 1000);
    const pipeline = redis.pipeline();
    // The layout of account-store.ts: `live` is a set, `position:` keys strings, the rest hashes.
    for (const k of chunk) {
      const name = k.slice(namespace.length);
      if (name === 'live') pipeline.smembers(k);
      else if (name.startsWith('position:')) pipeline.get(k);
      else pipeline.hgetall(k);
    }
    const results = (await pipeline.exec()) ?? [];
    chunk.forEach((k, j) => {
      const [err, value] = results[j] ?? [new Error('no reply'), null];
      if (err !== null) throw err;
      const canonical =
        typeof value === 'string'
          ? JSON.stringify(value)
          : Array.isArray(value)
            ? JSON.stringify([...(value as string[])].sort())
            : JSON.stringify(Object.entries(value as Record<string, string>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
      out.set(k.slice(namespace.length), canonical);
    });
  }
  return out;
}

/**
 * The projector's check at start (state.ts): the schema store must have applied at least what its group
 * committed, since the projector raises the markers before each commit. A state without a generation is a
 * new deployment's, or one written before the state existed (an upgrade), unless Redis holds nothing at all
 * while the group has projected events (it was emptied). An upgraded one is `adopted`: projectors of the
 * older version may still commit beside the new ones without raising markers, so its markers are not held
 * against the group's offsets until a replay makes a generation of its own (the processes' own checks
 * apply from the start). Resolves with why Redis lost state, when it did (recorded as `regressed`).
 */
export async function checkProjectedState(redis: Redis, prefix: string, committed: ReadonlyMap<number, number>): Promise<string | undefined> {
  const fields = await readState(redis, prefix);
  if (fields.regressed !== undefined) return fields.regressed;
  const projected = [...committed].filter(([, next]) => next > 0);
  let why: string | undefined;
  if (fields.generation === undefined) {
    const emptied = Object.keys(fields).length === 0 && projected.length > 0 && (await isEmpty(redis, schemaNamespace(prefix))) && (await isEmpty(redis, accountsNamespace(prefix)));
    if (!emptied) {
      if (projected.length > 0) await redis.hsetnx(stateKey(prefix), 'adopted', 'the state was first written over stores of an earlier version');
      await redis.hsetnx(stateKey(prefix), 'generation', String(Date.now()));
      await raiseMarkers(redis, prefix, 'the projector', projected.map(([partition, next]) => ({ field: markerField('d', partition), next })));
      return undefined;
    }
    why = 'the projector found Redis empty while its group had projected events';
  } else if (fields.adopted === undefined) {
    const behind = projected.find(([partition, next]) => Number(fields[markerField('d', partition)] ?? 0) < next);
    if (behind !== undefined) why = `the projector found ${markerField('d', behind[0])} at ${fields[markerField('d', behind[0])] ?? 0}, below its group's committed offset ${behind[1]}`;
  }
  if (why !== undefined) await markRegressed(redis, prefix, why);
  return why;
}

async function isEmpty(redis: Redis, namespace: string): Promise<boolean> {
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', startsWith(namespace), 'COUNT', 1000);
    if (batch.length > 0) return false;
    cursor = next;
  } while (cursor !== '0');
  return true;
}

import type { SchemaStore, SchemaStoreWriter } from '@pushbase/contracts';
import type { DatasetEvent, DatasetSummary } from '@pushbase/domain';
import type { ChainableCommander, Redis, Result } from 'ioredis';
import { redisError } from './connection';
import type { RedisStoreOptions } from './account-store';
import { checkPrefix, DEFAULT_PREFIX } from './keys';
import { RedisStateGuard } from './state';
import { recordAppliedKeys } from './idempotency';
import { decodeSchemaIntent, pendingFor, schemaIntentNamespace, type SchemaIntent } from './schema-intent';

/*
 * The live datasets' definitions and the per-account count, kept in Redis by the projector (and rebuilt by
 * replay) from the event log, for the schema and record services to decide from. Each event is applied in
 * one script, idempotent per incarnation, so redelivering any suffix changes nothing; dead incarnations are
 * remembered to tell a late event from a new one; every read first passes the state's guard (state.ts). The
 * key layout and reasoning: docs/architecture.md → The Redis schema store.
 */

// KEYS[1] the dataset hash, KEYS[2] the account's live set, KEYS[3] the dataset's dead incarnations.
// ARGV[1] event type, ARGV[2] dataset id, ARGV[3] incarnation, ARGV[4] at, ARGV[5] definition JSON.
const APPLY = `
local kind, id, inc, at = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local live = redis.call('HGET', KEYS[1], 'incarnation')
if kind == 'DatasetDefined' then
  if live == inc or redis.call('SISMEMBER', KEYS[3], inc) == 1 then return 0 end
  if live then redis.call('SADD', KEYS[3], live) end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'incarnation', inc, 'definition', ARGV[5], 'created_at', at, 'updated_at', at)
  redis.call('SADD', KEYS[2], id)
  return 1
end
if kind == 'DatasetDeleted' then
  redis.call('SADD', KEYS[3], inc)
  if live ~= inc then return 0 end
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], id)
  return 1
end
if live ~= inc then return 0 end
if tonumber(at) > tonumber(redis.call('HGET', KEYS[1], 'updated_at')) then
  redis.call('HSET', KEYS[1], 'updated_at', at)
  return 1
end
return 0
`;

const HEAD_FIELDS = ['incarnation', 'created_at', 'updated_at'] as const;

function headOf([incarnation, created, updated]: readonly (string | null | undefined)[]): DatasetHead | undefined {
  if (incarnation === null || incarnation === undefined) return undefined;
  return { incarnation, created_at: Number(created), updated_at: Number(updated) };
}

function summaryOf(account: string, id: string, h: Record<string, string>): DatasetSummary | undefined {
  if (h.incarnation === undefined || h.definition === undefined) return undefined;
  return {
    account,
    id,
    incarnation: h.incarnation,
    definition: JSON.parse(h.definition) as DatasetSummary['definition'],
    created_at: Number(h.created_at),
    updated_at: Number(h.updated_at),
  };
}

/*
 * The reads of a dataset together with its account's schema intent (settledHead, settledGet): one script
 * each, so the two come from one moment and a roll-forward cannot fall between them. A script rather than
 * MULTI/EXEC because it is one command where MULTI is four, on a read made for every write (why:
 * docs/architecture.md → The Redis schema store; the figure: docs/performance.md → Measurements behind the
 * code). Only schema-intent.ts reads the intent's shape.
 *
 * KEYS[1] the dataset hash, KEYS[2] the account's intent.
 */
const SETTLED_HEAD = `
local h = redis.call('HMGET', KEYS[1], 'incarnation', 'created_at', 'updated_at')
h[4] = redis.call('GET', KEYS[2])
return h
`;
const SETTLED_GET = `
return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2])}
`;

const intentOf = (raw: string | null | undefined): SchemaIntent | undefined => (typeof raw === 'string' ? decodeSchemaIntent(raw) : undefined);

/** Where the schema store's keys live under a prefix: replay builds a fresh one and promotes it. */
export const schemaNamespace = (prefix: string): string => `${checkPrefix(prefix)}schema:`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseSchemaApply(dataset: string, live: string, dead: string, type: string, id: string, incarnation: string, at: number, definition: string): Result<number, Context>;
    pushbaseSchemaSettledHead(dataset: string, intent: string): Result<(string | null)[], Context>;
    pushbaseSchemaSettledGet(dataset: string, intent: string): Result<[string[], string | null], Context>;
  }
}

/** A dataset's live incarnation and its times, without the definition. */
export interface DatasetHead {
  readonly incarnation: string;
  readonly created_at: number;
  readonly updated_at: number;
}

/**
 * A read of one dataset together with whether a change of it is pending: decided by the schema service
 * and perhaps already in the event log, but not yet shown here (schema-intent.ts). A reader that answers
 * without the account's lease must not answer from `dataset` when `pending` is true.
 */
export interface SettledRead<T> {
  readonly dataset: T | undefined;
  readonly pending: boolean;
}

/** Options of a schema store whose writer side also records the applied Idempotency-Keys of the events it applies. */
export interface RedisSchemaStoreOptions extends RedisStoreOptions {
  /**
   * Where the applied keys go (idempotency.ts) and how long they are kept. `prefix`: the live one, which
   * replay, building a fresh generation of the schema store, must name (the keys are not part of it).
   * Default: the store's prefix, 24 hours.
   */
  readonly idempotency?: { readonly prefix?: string; readonly ttlMs?: number };
}

export class RedisSchemaStore implements SchemaStore, SchemaStoreWriter {
  private readonly prefix: string;
  private readonly keysPrefix: string;
  private readonly keysTtlMs: number;
  private readonly intentNamespace: string;
  private readonly guard: RedisStateGuard;

  constructor(
    private readonly redis: Redis,
    options: RedisSchemaStoreOptions = {},
  ) {
    this.prefix = schemaNamespace(options.prefix ?? DEFAULT_PREFIX);
    this.keysPrefix = options.idempotency?.prefix ?? options.prefix ?? DEFAULT_PREFIX;
    this.keysTtlMs = options.idempotency?.ttlMs ?? 24 * 3_600_000;
    this.guard = new RedisStateGuard(redis, options.prefix ?? DEFAULT_PREFIX, options.stateCheckMs);
    this.intentNamespace = schemaIntentNamespace(options.prefix ?? DEFAULT_PREFIX);
    redis.defineCommand('pushbaseSchemaApply', { numberOfKeys: 3, lua: APPLY });
    redis.defineCommand('pushbaseSchemaSettledHead', { numberOfKeys: 2, lua: SETTLED_HEAD });
    redis.defineCommand('pushbaseSchemaSettledGet', { numberOfKeys: 2, lua: SETTLED_GET });
  }

  private where(): string {
    return `${this.redis.options.host ?? '?'}:${this.redis.options.port ?? '?'}`;
  }

  private datasetKey(account: string, id: string): string {
    return `${this.prefix}dataset:${id}:${account}`;
  }

  async get(account: string, id: string): Promise<DatasetSummary | undefined> {
    await this.guard.check();
    let h: Record<string, string>;
    try {
      h = await this.redis.hgetall(this.datasetKey(account, id));
    } catch (e) {
      throw redisError(this.where(), 'reading a dataset', e);
    }
    return summaryOf(account, id, h);
  }

  /**
   * The live incarnation of a dataset and its times, without the definition: one small read, for a caller
   * that keeps definitions by incarnation (the records service's cache). Undefined when not live.
   */
  async head(account: string, id: string): Promise<DatasetHead | undefined> {
    await this.guard.check();
    let h: (string | null)[];
    try {
      h = await this.redis.hmget(this.datasetKey(account, id), ...HEAD_FIELDS);
    } catch (e) {
      throw redisError(this.where(), 'reading a dataset', e);
    }
    return headOf(h);
  }

  /** head(), with whether a change of the dataset is pending (SettledRead), from one moment of the store. */
  async settledHead(account: string, id: string): Promise<SettledRead<DatasetHead>> {
    await this.guard.check();
    let reply: (string | null)[];
    try {
      reply = await this.redis.pushbaseSchemaSettledHead(this.datasetKey(account, id), this.intentKey(account));
    } catch (e) {
      throw redisError(this.where(), 'reading a dataset', e);
    }
    const dataset = headOf(reply);
    return { dataset, pending: pendingFor(intentOf(reply[3]), id, dataset?.incarnation) };
  }

  /** get(), with whether a change of the dataset is pending (SettledRead), from one moment of the store. */
  async settledGet(account: string, id: string): Promise<SettledRead<DatasetSummary>> {
    await this.guard.check();
    let reply: [string[], string | null];
    try {
      reply = await this.redis.pushbaseSchemaSettledGet(this.datasetKey(account, id), this.intentKey(account));
    } catch (e) {
      throw redisError(this.where(), 'reading a dataset', e);
    }
    const [flat, intent] = reply;
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
    const dataset = summaryOf(account, id, h);
    return { dataset, pending: pendingFor(intentOf(intent), id, dataset?.incarnation) };
  }

  private intentKey(account: string): string {
    return `${this.intentNamespace}${account}`;
  }

  /** The ids of the account's live datasets, sorted (deleting an account deletes each). */
  async liveIds(account: string): Promise<string[]> {
    await this.guard.check();
    try {
      return (await this.redis.smembers(`${this.prefix}live:${account}`)).sort();
    } catch (e) {
      throw redisError(this.where(), "listing an account's datasets", e);
    }
  }

  async count(account: string): Promise<number> {
    await this.guard.check();
    try {
      return await this.redis.scard(`${this.prefix}live:${account}`);
    } catch (e) {
      throw redisError(this.where(), "counting an account's datasets", e);
    }
  }

  /**
   * Applies the events in order, each atomically, in one round trip. Only the schema side is kept: a
   * write's records are not, only its time (updated_at).
   */
  async apply(events: readonly DatasetEvent[]): Promise<void> {
    if (events.length === 0) return;
    const pipeline: ChainableCommander = this.redis.pipeline();
    for (const e of events) {
      pipeline.pushbaseSchemaApply(
        this.datasetKey(e.account, e.dataset),
        `${this.prefix}live:${e.account}`,
        `${this.prefix}dead:${e.dataset}:${e.account}`,
        e.type,
        e.dataset,
        e.incarnation,
        e.at,
        e.type === 'DatasetDefined' ? JSON.stringify(e.definition) : '',
      );
    }
    // The keys inside the events: a write's key is recorded by whatever folds its event (idempotency.ts).
    recordAppliedKeys(pipeline, this.keysPrefix, events, this.keysTtlMs, Date.now());
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipeline.exec();
    } catch (e) {
      throw redisError(this.where(), `applying ${events.length} events`, e);
    }
    // exec reports each command's error beside its result instead of rejecting.
    const failed = results?.find(([err]) => err !== null);
    if (failed) throw redisError(this.where(), `applying ${events.length} events`, failed[0]);
  }
}

import type { SchemaChanges, SchemaDecision, SettledDataset } from '@pushbase/app';
import { KeyedMutex } from '@pushbase/app';
import type { EventAppender, SchemaStoreWriter, StreamPosition } from '@pushbase/contracts';
import { DomainError, type AccountEvent } from '@pushbase/domain';
import type { Logger } from '@pushbase/grpc';
import {
  decodeSchemaIntent,
  encodeSchemaIntent,
  isAccountEvent,
  redisError,
  type RedisAccountStore,
  schemaIntentKey,
  schemaIntentNamespace,
  type Redis,
  type RedisSchemaStore,
  type SchemaChangeEvent,
} from '@pushbase/redis';
import type { Result } from 'ioredis';
import type { AccountLease, RedisAccountLock } from './account-lock';

/*
 * How a schema or account change takes effect in the distributed schema service: under the account's Redis
 * lease (account-lock.ts), decided from the store, written ahead as the account's intent, appended to Kafka,
 * applied to Redis, then the intent removed; a crash at any step is rolled forward by the next change or the
 * sweep. The steps, repair, answers and fencing: docs/architecture.md → Schema changes.
 */

type SchemaEvent = SchemaChangeEvent;
/** What a decision under an account's lease appends: a dataset's change, or an account's (accounts.ts). */
type ChangeEvent = SchemaEvent | AccountEvent;

/**
 * Where account and key changes go: the accounts topic (resolving with each event's position) and the
 * Redis account store, which orders its applies by those positions.
 */
export interface AccountChangeSink {
  readonly log: { append(events: readonly AccountEvent[]): Promise<StreamPosition[]> };
  readonly store: Pick<RedisAccountStore, 'apply'>;
}

export interface RedisSchemaChangesOptions {
  readonly redis: Redis;
  /** The deployment's key prefix, as the schema store and the projector use it. */
  readonly prefix: string;
  readonly lock: RedisAccountLock;
  /** Where decided events go: Kafka in production. Its `unavailable` must mean "never stored". */
  readonly appender: EventAppender;
  /**
   * The Redis schema store the decisions are read from; applying is idempotent per incarnation. Its
   * settledGet serves the lock-free reads (settled()).
   */
  readonly store: SchemaStoreWriter & Pick<RedisSchemaStore, 'settledGet'>;
  readonly log?: Logger;
  /** Account and key changes (decidedAccount); without it only dataset changes can be made. */
  readonly accounts?: AccountChangeSink;
  /** Test seam: runs once the append was acknowledged, before Redis is updated (where a crash needs repair). */
  readonly afterAppend?: (event: SchemaEvent) => Promise<void>;
}

// KEYS[1] the lease, KEYS[2] the intent; ARGV[1] the lease's token, ARGV[2] the intent. 1 written, 0 not ours.
const WRITE_INTENT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
`;

// KEYS[1] the intent, ARGV[1] the intent as written. Removes it only if it is still that one.
const RETRACT_INTENT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseSchemaWriteIntent(lease: string, intent: string, token: string, value: string): Result<number, Context>;
    pushbaseSchemaRetractIntent(intent: string, value: string): Result<number, Context>;
  }
}

/** What one holder of a lease learnt that outlives the call: whether it must let the lease expire. */
interface Holding {
  readonly lease: AccountLease;
  /** An append whose fate is unknown may still land: the lease is kept until it expires. */
  keepLease: boolean;
}

const neverStored = (e: unknown): boolean => e instanceof DomainError && (e.code === 'unavailable' || e.code === 'invalid');
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class RedisSchemaChanges implements SchemaChanges {
  private readonly local = new KeyedMutex();
  private readonly intentNamespace: string;
  private readonly redis: Redis;
  private readonly lock: RedisAccountLock;
  private readonly appender: EventAppender;
  private readonly store: SchemaStoreWriter & Pick<RedisSchemaStore, 'settledGet'>;
  private readonly prefix: string;
  private readonly log: Logger;
  private readonly afterAppend: ((event: SchemaEvent) => Promise<void>) | undefined;
  private readonly accounts: AccountChangeSink | undefined;

  constructor(options: RedisSchemaChangesOptions) {
    this.accounts = options.accounts;
    this.redis = options.redis;
    this.lock = options.lock;
    this.appender = options.appender;
    this.store = options.store;
    this.log = options.log ?? (() => undefined);
    this.afterAppend = options.afterAppend;
    this.prefix = options.prefix;
    this.intentNamespace = schemaIntentNamespace(options.prefix);
    this.redis.defineCommand('pushbaseSchemaWriteIntent', { numberOfKeys: 2, lua: WRITE_INTENT });
    this.redis.defineCommand('pushbaseSchemaRetractIntent', { numberOfKeys: 1, lua: RETRACT_INTENT });
  }

  intentKey(account: string): string {
    return schemaIntentKey(this.prefix, account);
  }

  /**
   * The dataset and whether a change of it is pending, in one read: the lock-free answers (find of an
   * existing dataset, get) go through `decided` instead when it is, which waits for the account's lease
   * (a dead holder's expires) and rolls the intent forward first. Without this, a holder that died after
   * its DatasetDeleted was committed to Kafka left the store answering "found" for a whole lease TTL.
   */
  settled(account: string, id: string): Promise<SettledDataset> {
    return this.store.settledGet(account, id);
  }

  decided<T>(account: string, decide: () => Promise<SchemaDecision<T>>): Promise<T> {
    return this.underLease(account, decide);
  }

  /**
   * An account or key change, made as a dataset change is (the same lease, intent, roll-forward and
   * answers; see the top): `decide` runs holding the account's lease after any change left half done was
   * completed, so it decides from an account store holding every earlier change of the account; its event
   * is in the accounts topic and applied to the account store before this resolves.
   */
  decidedAccount<T>(account: string, decide: () => Promise<{ readonly event?: AccountEvent; readonly answer: T }>): Promise<T> {
    return this.underLease(account, decide);
  }

  private underLease<T>(account: string, decide: () => Promise<{ readonly event?: ChangeEvent; readonly answer: T }>): Promise<T> {
    // The wait in this process's queue counts too: a request is decided within `waitMs` of its arrival or
    // refused undecided, so it is never decided after its caller's deadline gave up on it (waitMs plus two
    // appends' timeouts stays under the gRPC clients' write deadline).
    const deadline = Date.now() + this.lock.waitMs;
    return this.local.run(account, async () => {
      const holding: Holding = { lease: await this.lock.acquire(account, deadline), keepLease: false };
      try {
        await this.rollForward(holding);
        const { event, answer } = await decide();
        if (event !== undefined) await this.commit(holding, event);
        return answer;
      } finally {
        if (!holding.keepLease) await this.lock.release(holding.lease).catch((e: unknown) => this.log('warn', 'schema lock not released; it expires by itself', { account, error: message(e) }));
      }
    });
  }

  /**
   * Rolls forward the intents left in Redis, for accounts whose lease is free now (a busy account's next
   * decision does it anyway). Resolves with the number rolled forward; an account that cannot be repaired
   * now is logged and left for the next sweep.
   */
  async sweep(): Promise<number> {
    let repaired = 0;
    for (const key of await this.intentKeys()) {
      const account = key.slice(this.intentNamespace.length);
      try {
        const done = await this.local.run(account, async () => {
          const lease = await this.lock.tryAcquire(account);
          if (lease === undefined) return false;
          const holding: Holding = { lease, keepLease: false };
          try {
            return await this.rollForward(holding);
          } finally {
            if (!holding.keepLease) await this.lock.release(lease).catch(() => undefined);
          }
        });
        if (done) repaired += 1;
      } catch (e) {
        this.log('warn', 'schema intent not rolled forward; the next sweep tries again', { account, error: message(e) });
      }
    }
    return repaired;
  }

  /** Sweeps every `intervalMs` (a tick is skipped while a sweep runs) until the returned function is called. */
  startSweeping(intervalMs: number): () => Promise<void> {
    let running: Promise<void> | undefined;
    const timer = setInterval(() => {
      running ??= this.sweep()
        .then(
          (n) => {
            if (n > 0) this.log('info', 'schema intents rolled forward by the sweep', { intents: n });
          },
          (e: unknown) => this.log('warn', 'schema intent sweep failed; it runs again', { error: message(e) }),
        )
        .finally(() => {
          running = undefined;
        });
    }, intervalMs);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await running;
    };
  }

  private async intentKeys(): Promise<string[]> {
    // The prefix is checked by the config; glob characters are escaped all the same, as generations.ts does.
    const match = `${this.intentNamespace.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;
    const keys = new Set<string>();
    let cursor = '0';
    try {
      do {
        const [next, batch] = await this.redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        for (const k of batch) keys.add(k);
        cursor = next;
      } while (cursor !== '0');
    } catch (e) {
      throw redisError(this.where(), 'listing schema intents', e);
    }
    return [...keys];
  }

  /**
   * Finishes the change a former holder left as the account's intent. Any failure here answers the
   * current request `unavailable`: its own decision was not made, so it will never be applied.
   */
  private async rollForward(holding: Holding): Promise<boolean> {
    const key = this.intentKey(holding.lease.account);
    let written: string | null;
    try {
      written = await this.redis.get(key);
    } catch (e) {
      throw redisError(this.where(), 'reading the schema intent', e);
    }
    if (written === null) return false;
    const { event } = decodeSchemaIntent(written);
    let position: StreamPosition | undefined;
    try {
      position = await this.appendUnderLease(holding, event);
    } catch (e) {
      // The intent stays whatever happened: its original append may be stored.
      throw new DomainError('unavailable', `An earlier change of this account could not be completed (${message(e)}); nothing was changed`);
    }
    try {
      await this.applyChange(event, position);
      await this.redis.pushbaseSchemaRetractIntent(key, written);
    } catch (e) {
      throw redisError(this.where(), 'completing an earlier change of this account', e);
    }
    this.log(
      'info',
      'schema intent rolled forward',
      isAccountEvent(event) ? { account: event.account, type: event.type } : { account: event.account, dataset: event.dataset, type: event.type, incarnation: event.incarnation },
    );
    return true;
  }

  /** Shows an appended change in Redis: the schema store, or the account store at the event's position. */
  private async applyChange(event: ChangeEvent, position: StreamPosition | undefined): Promise<void> {
    if (!isAccountEvent(event)) {
      await this.store.apply([event]);
      return;
    }
    if (this.accounts === undefined || position === undefined) throw new Error(`An account change (${event.type}) without an account store`);
    await this.accounts.store.apply([{ event, position }]);
  }

  private async commit(holding: Holding, event: ChangeEvent): Promise<void> {
    const { lease } = holding;
    const key = this.intentKey(lease.account);
    const intent = encodeSchemaIntent({ token: lease.token, event });
    let ours: number;
    try {
      ours = await this.redis.pushbaseSchemaWriteIntent(lease.key, key, lease.token, intent);
    } catch (e) {
      // The script may have run before the connection failed: only a retraction proves it left nothing.
      await this.retractOrUnknown(key, intent, e);
      throw redisError(this.where(), 'recording the schema change', e);
    }
    if (ours !== 1) throw new DomainError('unavailable', 'The schema lock of this account expired before the change was recorded; nothing was changed');

    let position: StreamPosition | undefined;
    try {
      position = await this.appendUnderLease(holding, event);
    } catch (e) {
      if (!neverStored(e)) throw e;
      await this.retractOrUnknown(key, intent, e);
      throw e;
    }
    if (!isAccountEvent(event)) await this.afterAppend?.(event);
    try {
      await this.applyChange(event, position);
    } catch (e) {
      throw new DomainError('outcome_unknown', `The change is stored in the event log but the schema store could not be updated (${message(e)}); it is completed by the next change of this account`);
    }
    try {
      await this.redis.pushbaseSchemaRetractIntent(key, intent);
    } catch (e) {
      // Done and visible; the intent left behind is rolled forward later, which changes nothing.
      this.log('warn', 'schema intent not removed; it is rolled forward later', { account: lease.account, error: message(e) });
    }
  }

  /**
   * Appends `event` if the lease is still ours (extending it, so the append has a full TTL ahead of it).
   * Rejects with the appender's own error when the event was never stored, else with `outcome_unknown`,
   * marking the lease to be kept until it expires.
   */
  private async appendUnderLease(holding: Holding, event: ChangeEvent): Promise<StreamPosition | undefined> {
    let held: boolean;
    try {
      held = await this.lock.extend(holding.lease);
    } catch (e) {
      throw new DomainError('outcome_unknown', `The schema lock could not be checked (${message(e)}); the change is completed by the next change of this account`);
    }
    if (!held) {
      // The intent is written: whoever holds the lease now rolls it forward.
      throw new DomainError('outcome_unknown', 'The schema lock of this account expired while the change was being made; it is completed by the next change of this account');
    }
    try {
      if (!isAccountEvent(event)) {
        await this.appender.append([event]);
        return undefined;
      }
      if (this.accounts === undefined) throw new Error(`An account change (${event.type}) without an accounts topic`);
      const [position] = await this.accounts.log.append([event]);
      if (position === undefined) throw new Error('The accounts topic acknowledged an append without its position');
      return position;
    } catch (e) {
      if (neverStored(e)) throw e;
      holding.keepLease = true;
      throw new DomainError('outcome_unknown', `The event log may or may not have stored the change (${message(e)}); it is completed by the next change of this account`);
    }
  }

  /** Removes the intent after a failure; if even that fails, the intent may still be rolled forward: unknown. */
  private async retractOrUnknown(key: string, intent: string, cause: unknown): Promise<void> {
    try {
      await this.redis.pushbaseSchemaRetractIntent(key, intent);
    } catch (e) {
      throw new DomainError('outcome_unknown', `The change failed (${message(cause)}) and its record could not be removed (${message(e)}); it may still be completed`);
    }
  }

  private where(): string {
    return `${this.redis.options.host ?? '?'}:${this.redis.options.port ?? '?'}`;
  }
}

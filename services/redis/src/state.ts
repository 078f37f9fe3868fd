import { DomainError } from '@pushbase/domain';
import type { Redis, Result } from 'ioredis';
import { redisError, where } from './connection';
import { checkPrefix } from './keys';

/*
 * The marker hash `<prefix>state` that tells a Redis which lost part of what it was given from one that did
 * not: markers only grow within a generation, so whoever sees one lower marks the state `regressed`, and the
 * stores answer 503 until `pushbase replay` rebuilds them. Layout and reasoning: docs/architecture.md → A Redis
 * that lost state.
 */

export const stateKey = (prefix: string): string => `${checkPrefix(prefix)}state`;

/** The marker of partition `partition` of the dataset topic (`d`) or of the accounts topic (`a`). */
export const markerField = (topic: 'd' | 'a', partition: number): string => `${topic}:${partition}`;

const MARKER = /^[ad]:\d+$/;

// KEYS[1] the state; ARGV[1] who raises, then per marker: field, next, least ('' when none is known).
// Raises each marker to `next`; one below its `least` means lost state: `regressed` is set. 1 if regressed.
const RAISE = `
for i = 2, #ARGV, 3 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if ARGV[i + 2] ~= '' and cur < tonumber(ARGV[i + 2]) then
    redis.call('HSETNX', KEYS[1], 'regressed', ARGV[1] .. ' found ' .. ARGV[i] .. ' at ' .. cur .. ', below ' .. ARGV[i + 2])
  end
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return redis.call('HEXISTS', KEYS[1], 'regressed')
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    pushbaseStateRaise(state: string, ...args: string[]): Result<number, Context>;
  }
}

export interface Marker {
  readonly field: string;
  /** The marker's new value, if higher. */
  readonly next: number;
  /** What the caller knows the marker reached (it raised or saw it): lower now means lost state. */
  readonly least?: number | undefined;
}

const defined = new WeakSet<Redis>();

/** Raises markers in one script; resolves true when Redis is (now or already) known to have lost state. */
export async function raiseMarkers(redis: Redis, prefix: string, who: string, markers: readonly Marker[]): Promise<boolean> {
  if (markers.length === 0) return false;
  // Once per connection: defining computes the script's digest.
  if (!defined.has(redis)) redis.defineCommand('pushbaseStateRaise', { numberOfKeys: 1, lua: RAISE });
  defined.add(redis);
  try {
    return (await redis.pushbaseStateRaise(stateKey(prefix), who, ...markers.flatMap((m) => [m.field, String(m.next), m.least === undefined ? '' : String(m.least)]))) === 1;
  } catch (e) {
    throw redisError(where(redis), 'raising the applied offsets', e);
  }
}

/** Records that Redis lost state (kept until a replay swaps a new state in). */
export async function markRegressed(redis: Redis, prefix: string, why: string): Promise<void> {
  try {
    await redis.hsetnx(stateKey(prefix), 'regressed', why);
  } catch (e) {
    throw redisError(where(redis), 'recording lost state', e);
  }
}

export async function readState(redis: Redis, prefix: string): Promise<Record<string, string>> {
  try {
    return await redis.hgetall(stateKey(prefix));
  } catch (e) {
    throw redisError(where(redis), 'reading the state of the stores', e);
  }
}

export const lostState = (why: string): DomainError =>
  new DomainError('unavailable', `Redis lost part of the stores (${why}); they are refused until \`pushbase replay\` rebuilt them from the topics`);

/**
 * A reader's check of the state, before it answers from a store: at most once per `intervalMs` it reads
 * the state and compares it with the newest it saw — an older generation, a lower marker or a state gone
 * means lost state, which it records (`regressed`) — and refuses while `regressed` is set.
 */
export class RedisStateGuard {
  private readonly key: string;
  private seen: { generation: number; markers: Map<string, number> } | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private refused: DomainError | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly intervalMs = 1000,
  ) {
    this.key = stateKey(prefix);
  }

  async check(): Promise<void> {
    if (Date.now() - this.checkedAt >= this.intervalMs) {
      this.reading ??= this.read().finally(() => (this.reading = undefined));
      await this.reading;
    }
    if (this.refused !== undefined) throw this.refused;
  }

  private async read(): Promise<void> {
    const fields = await readState(this.redis, this.prefix);
    const why = this.compare(fields);
    if (why !== undefined && fields.regressed === undefined) {
      await markRegressed(this.redis, this.prefix, why);
      fields.regressed = why;
    }
    this.refused = fields.regressed === undefined ? undefined : lostState(fields.regressed);
    this.checkedAt = Date.now();
  }

  /** Why `fields` shows lost state against what this reader saw; remembers the newest. */
  private compare(fields: Record<string, string>): string | undefined {
    const generation = Number(fields.generation ?? 0);
    const markers = new Map(Object.entries(fields).flatMap(([k, v]) => (MARKER.test(k) ? [[k, Number(v)] as const] : [])));
    const seen = this.seen;
    if (seen === undefined || generation > seen.generation) {
      this.seen = { generation, markers };
      return undefined;
    }
    if (generation < seen.generation) return `a reader found generation ${generation}, after ${seen.generation}`;
    for (const [field, was] of seen.markers) {
      const now = markers.get(field) ?? 0;
      if (now < was) return `a reader found ${field} at ${now}, after ${was}`;
    }
    for (const [field, now] of markers) seen.markers.set(field, now);
    return undefined;
  }
}

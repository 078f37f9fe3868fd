import { keyGuard, createRecordService, createSchemaService, MemoryProjection, MemoryEventLog } from '@pushbase/app';
import { RedisIdempotencyLedger, RedisSchemaStore } from '@pushbase/redis';
import { DomainError, type AppliedKey, type DatasetEvent } from '@pushbase/domain';
import type { SchemaStore } from '@pushbase/contracts';
import type { Redis } from 'ioredis';
import { connectTestRedis, deleteUnder, randomPrefix } from '../../../test/helpers/redis';

/*
 * The distributed Idempotency-Key ledger on the real Redis, as two replicas share it: one attempt holds a
 * key at a time, an applied write is found by every replica, an attempt of unknown outcome (or whose holder
 * died) is settled only after its lease and once the log is folded into Redis — then from the keys the
 * fold recorded (RedisSchemaStore.apply, as the projector and replay run it) — and keys expire.
 */

const TTL = 60_000;
const LEASE = 1_000;

describe('RedisIdempotencyLedger', () => {
  let a: Redis;
  let b: Redis;
  let prefix: string;
  let now: number;
  let projected: boolean;
  const clock = { now: () => now };
  const ledgerOn = (redis: Redis) => new RedisIdempotencyLedger(redis, { prefix, ttlMs: TTL, leaseMs: LEASE, clock,
      progress: { end: () => Promise.resolve({ partition: 0, offset: 1 }), projected: () => Promise.resolve(projected) },
    });

  beforeEach(async () => {
    [a, b] = await Promise.all([connectTestRedis(), connectTestRedis()]);
    prefix = randomPrefix();
    now = Date.now();
    projected = true;
  });
  afterEach(async () => {
    await deleteUnder(a, prefix);
    await Promise.all([a.quit(), b.quit()]);
  });

  const applied = (key: string, at = now): AppliedKey => ({ account: 'acme', key, fingerprint: `fp-${key}`, at });
  const event = (key: string, at = now): DatasetEvent => ({
    type: 'RecordsAppended',
    schema_version: 2,
    account: 'acme',
    dataset: 'd',
    incarnation: 'i',
    at,
    records: [],
    delete_by: null,
    idempotency: { key, fingerprint: `fp-${key}` },
  });
  const inFlight = async (p: Promise<unknown>): Promise<boolean> => p.then(
    () => false,
    (e: unknown) => {
      if (e instanceof DomainError && e.code === 'idempotency_in_flight') return true;
      throw e;
    },
  );

  it('lets one attempt of all replicas hold a key; the applied write is then found by every replica', async () => {
    const [one, two] = [ledgerOn(a), ledgerOn(b)];
    const claims = await Promise.all([one.claim('acme', 'k', 'd'), two.claim('acme', 'k', 'd')]);
    expect(claims.filter((c) => c !== undefined)).toHaveLength(1);
    expect(await two.claim('globex', 'k', 'd')).toBeDefined(); // per account
    await claims.find((c) => c !== undefined)!.settle({ applied: applied('k') });
    expect(await two.applied('acme', 'k')).toEqual(applied('k'));
    expect(await one.applied('globex', 'k')).toBeUndefined();
  });

  it('frees a key whose attempt was not applied', async () => {
    const ledger = ledgerOn(a);
    await (await ledger.claim('acme', 'k', 'd'))!.settle('not_applied');
    expect(await ledger.applied('acme', 'k')).toBeUndefined();
    expect(await ledger.claim('acme', 'k', 'd')).toBeDefined();
  });

  it('settles an unknown attempt only after its lease and once the log is folded: found stored', async () => {
    const [one, two] = [ledgerOn(a), ledgerOn(b)];
    await (await one.claim('acme', 'k', 'd'))!.settle('unknown');
    // The first attempt may still land: neither answered nor run again.
    expect(await inFlight(two.applied('acme', 'k'))).toBe(true);
    now += LEASE;
    projected = false;
    expect(await inFlight(two.applied('acme', 'k'))).toBe(true);
    // The projector folds the stored event and records its key.
    await new RedisSchemaStore(a, { prefix, idempotency: { ttlMs: TTL } }).apply([event('k')]);
    projected = true;
    expect(await two.applied('acme', 'k')).toMatchObject({ key: 'k', fingerprint: 'fp-k' });
  });

  it('settles an unknown attempt as not stored when the folded log has no key: the key is free again', async () => {
    const [one, two] = [ledgerOn(a), ledgerOn(b)];
    await (await one.claim('acme', 'k', 'd'))!.settle('unknown');
    now += LEASE;
    expect(await two.applied('acme', 'k')).toBeUndefined();
    expect(await two.claim('acme', 'k', 'd')).toBeDefined();
  });

  it('settles the attempt of a holder that died (a claim never settled) the same way, after its lease', async () => {
    const [one, two] = [ledgerOn(a), ledgerOn(b)];
    expect(await one.claim('acme', 'k', 'd')).toBeDefined();
    expect(await two.applied('acme', 'k')).toBeUndefined();
    expect(await two.claim('acme', 'k', 'd')).toBeUndefined(); // live lease: 409
    now += LEASE;
    await new RedisSchemaStore(a, { prefix, idempotency: { ttlMs: TTL } }).apply([event('k')]);
    expect(await two.applied('acme', 'k')).toMatchObject({ fingerprint: 'fp-k' });
  });

  it('records the keys of folded events once (first one wins), and not those already expired', async () => {
    const store = new RedisSchemaStore(a, { prefix, idempotency: { ttlMs: TTL } });
    await store.apply([event('k', now - 10)]);
    await store.apply([{ ...event('k', now), idempotency: { key: 'k', fingerprint: 'other' } }, event('old', Date.now() - TTL - 1)]);
    const ledger = ledgerOn(b);
    expect(await ledger.applied('acme', 'k')).toMatchObject({ fingerprint: 'fp-k', at: now - 10 });
    expect(await ledger.applied('acme', 'old')).toBeUndefined();
    const ttl = await a.pttl(`${prefix}idem:applied:4:acme:k`);
    expect(ttl).toBeGreaterThan(TTL - 5_000);
    expect(ttl).toBeLessThanOrEqual(TTL);
  });

  it('gets the keys back from a replay into a fresh generation of the schema store (a Redis that lost them)', async () => {
    // `pushbase replay` folds the topic into a fresh prefix and promotes it; the keys go to the live one.
    const fresh = `${prefix}replay-1:`;
    await new RedisSchemaStore(a, { prefix: fresh, idempotency: { prefix, ttlMs: TTL } }).apply([event('replayed')]);
    expect(await ledgerOn(b).applied('acme', 'replayed')).toMatchObject({ fingerprint: 'fp-replayed' });
    expect(await a.exists(`${fresh}idem:applied:4:acme:replayed`)).toBe(0);
  });

  it('behind the record service: a retried append applied once across two replicas', async () => {
    const log = new MemoryEventLog();
    const projection = new MemoryProjection();
    await log.start(projection.apply);
    projection.apply([
      { type: 'DatasetDefined', schema_version: 2, account: 'acme', dataset: 'd', incarnation: 'i', at: now, definition: { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] } },
    ]);
    const replica = (redis: Redis) => keyGuard(ledgerOn(redis), clock).records(createRecordService({ schemas: projection, log, clock }));
    const [one, two] = [replica(a), replica(b)];
    const json = Buffer.from('{"data":[{"n":1}]}');
    const idempotency = { key: 'retry', fingerprint: 'fp' };
    await expect(one.append({ account: 'acme', id: 'd', json, idempotency })).resolves.toEqual({ replayed: false });
    await expect(two.append({ account: 'acme', id: 'd', json, idempotency })).resolves.toEqual({ replayed: true });
    expect(log.events.filter((e) => e.idempotency?.key === 'retry')).toHaveLength(1);
  });
  it('fences an attempt slower than its lease before the append: the retry applies it, the first attempt does not', async () => {
    const log = new MemoryEventLog();
    const projection = new MemoryProjection();
    await log.start(projection.apply);
    projection.apply([
      { type: 'DatasetDefined', schema_version: 2, account: 'acme', dataset: 'd', incarnation: 'i', at: now, definition: { fields: { n: { type: 'number', name: 'N', optional: false } }, unique_by: [] } },
    ]);
    let releaseFirst!: () => void;
    const stalled = new Promise<void>((r) => (releaseFirst = r));
    // The first replica's schema read stalls (a queue, a pause) while its lease runs out.
    const slowSchemas = { ...projection, get: async (account: string, id: string) => (await stalled, projection.get(account, id)) } as typeof projection;
    const one = keyGuard(ledgerOn(a), clock).records(createRecordService({ schemas: slowSchemas, log, clock }));
    const two = keyGuard(ledgerOn(b), clock).records(createRecordService({ schemas: projection, log, clock }));
    const json = Buffer.from('{"data":[{"n":1}]}');
    const idempotency = { key: 'slow', fingerprint: 'fp' };
    const first = one.append({ account: 'acme', id: 'd', json, idempotency });
    await new Promise((r) => setTimeout(r, 50));
    now += LEASE + 1;
    await expect(two.append({ account: 'acme', id: 'd', json, idempotency })).resolves.toEqual({ replayed: false });
    releaseFirst();
    await expect(first).rejects.toMatchObject({ code: 'unavailable' });
    expect(log.events.filter((e) => e.idempotency?.key === 'slow')).toHaveLength(1);
  });

  it('fences a keyed create of the schema service slower than its lease the same way', async () => {
    const log = new MemoryEventLog();
    const projection = new MemoryProjection();
    await log.start(projection.apply);
    let releaseFirst!: () => void;
    const stalled = new Promise<void>((r) => (releaseFirst = r));
    let stall = true;
    // The first replica's count of the account's datasets stalls (waiting for the account's lock, a pause).
    const slowStore: SchemaStore = {
      get: (account, id) => projection.get(account, id),
      count: async (account) => {
        if (stall) await stalled;
        return projection.count(account);
      },
    };
    const service = (store: SchemaStore, redis: Redis) =>
      keyGuard(ledgerOn(redis), clock).schemas(createSchemaService({ log, store, clock, ids: { newIncarnation: () => `inc-${now}` } }));
    const [one, two] = [service(slowStore, a), service(projection, b)];
    const req = { account: 'acme', id: 'created', body: { fields: { n: { type: 'number', name: 'N' } } }, idempotency: { key: 'create', fingerprint: 'fp' } };
    const first = one.findOrCreate(req);
    await new Promise((r) => setTimeout(r, 50));
    stall = false;
    now += LEASE + 1;
    await expect(two.findOrCreate(req)).resolves.toMatchObject({ created: true });
    releaseFirst();
    await expect(first).rejects.toMatchObject({ code: 'unavailable' });
    expect(log.events.filter((e) => e.idempotency?.key === 'create')).toHaveLength(1);
  });

  it('keeps a keyed create without its definition (from the attempt and from the fold); a repeat still gets the dataset', async () => {
    const log = new MemoryEventLog();
    const projection = new MemoryProjection();
    await log.start(projection.apply);
    const service = (redis: Redis) => keyGuard(ledgerOn(redis), clock).schemas(createSchemaService({ log, store: projection, clock, ids: { newIncarnation: () => 'inc-1' } }));
    // Ten fields with long names: a definition's worth is what the key must not copy.
    const fields = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`field_${i}`, { type: 'string', name: `A rather long field name, number ${i}`.padEnd(90, '.') }]));
    const req = { account: 'acme', id: 'created', body: { fields }, idempotency: { key: 'create', fingerprint: 'fp' } };
    const first = await service(a).findOrCreate(req);
    expect(first).toMatchObject({ created: true });
    const stored = async (key: string) => (await a.get(`${prefix}idem:applied:4:acme:${key}`))!;
    // Settled by the attempt: the created dataset's identity and times, not its definition.
    expect(JSON.parse(await stored('create'))).toEqual({ account: 'acme', key: 'create', fingerprint: 'fp', at: now, dataset: { account: 'acme', id: 'created', incarnation: 'inc-1', created_at: now, updated_at: now } });
    expect((await stored('create')).length).toBeLessThan(300);
    // The repeat (another replica) parses its own body, the same bytes: the first answer, whole.
    await expect(service(b).findOrCreate(req)).resolves.toEqual({ ...first, replayed: true });
    // Recorded by the fold (the projector, replay) from the event: likewise without the definition.
    const defined = log.events.find((e) => e.idempotency?.key === 'create')!;
    await new RedisSchemaStore(a, { prefix, idempotency: { ttlMs: TTL } }).apply([{ ...defined, idempotency: { key: 'folded', fingerprint: 'fp' } }]);
    expect(JSON.parse(await stored('folded'))).toEqual({ account: 'acme', key: 'folded', fingerprint: 'fp', at: now, dataset: { account: 'acme', id: 'created', incarnation: 'inc-1', created_at: now, updated_at: now } });
  });

  it('renews the lease of an attempt that holds its key at the append', async () => {
    const [one, two] = [ledgerOn(a), ledgerOn(b)];
    const claim = (await one.claim('acme', 'k', 'd'))!;
    now += LEASE - 1;
    await claim.hold();
    now += LEASE - 1; // past the first lease, inside the renewed one
    await claim.settle('unknown');
    expect(await inFlight(two.applied('acme', 'k'))).toBe(true);
    now += 2;
    expect(await two.applied('acme', 'k')).toBeUndefined(); // over: settled from the (empty) log
    await expect(claim.hold()).rejects.toMatchObject({ code: 'unavailable' });
  });
  it('settles against the end of the log when the lease was found over, not a moving end (steady writes of others)', async () => {
    // Other datasets on the partition keep it growing; the projector trails its end by one event throughout.
    let logEnd = 100;
    let ends = 0;
    const progress = {
      end: () => Promise.resolve({ partition: 0, offset: (ends++, (logEnd += 10)) }),
      projected: (end: { offset: number }) => Promise.resolve(logEnd - 1 >= end.offset),
    };
    const busy = (redis: Redis) => new RedisIdempotencyLedger(redis, { prefix, ttlMs: TTL, leaseMs: LEASE, clock, progress });
    const [one, two] = [busy(a), busy(b)];
    await (await one.claim('acme', 'k', 'd'))!.settle('unknown');
    now += LEASE;
    expect(await inFlight(two.applied('acme', 'k'))).toBe(true); // the fold has not reached the end kept: 110
    logEnd += 10; // more writes of others: the fold passed 110
    expect(await two.applied('acme', 'k')).toBeUndefined();
    expect(ends).toBe(1); // the end was read once
    expect(await two.claim('acme', 'k', 'd')).toBeDefined();
  });
});

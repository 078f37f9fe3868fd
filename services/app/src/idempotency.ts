import type { DatasetRef, DatasetBody, FindOrCreateResult, IdempotencyLedger, KeyClaim, KeyedWrite, RawDatasetBody, RecordService, SchemaService, WriteAnswer } from '@pushbase/contracts';
import { appliedKeyOf, DomainError, keyInFlight, keyReused, parseDefinition, repeatOf, retained, type AppliedKey, type CreatedDataset, type DatasetEvent, type DatasetSummary, type IdempotencyMark } from '@pushbase/domain';
import type { Clock, Fenced } from './services';


/*
 * The embedded ledger: the applied keys are a fold of the log, fed by the same listener as the projection
 * (the replay at start, then every durable batch before its append resolves), and carried by snapshots,
 * so a key is exactly as durable as its write and survives a kill -9. In-flight claims live in memory:
 * one process serves every request. Keys are held in order of application and dropped from the oldest
 * end once past the TTL, so the ledger holds at most a TTL's worth of keyed writes.
 */
export class MemoryIdempotencyLedger implements IdempotencyLedger {
  private readonly keys = new Map<string, AppliedKey>();
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly ttlMs: number,
    private readonly clock: Clock,
    initial: Iterable<AppliedKey> = [],
  ) {
    for (const applied of initial) this.remember(applied);
    this.prune();
  }

  readonly apply = (events: readonly DatasetEvent[]): void => {
    for (const e of events) {
      const applied = appliedKeyOf(e);
      if (applied !== undefined) this.remember(applied);
    }
    this.prune();
  };

  /** The retained keys, oldest first, for a snapshot. */
  entries(): AppliedKey[] {
    this.prune();
    return [...this.keys.values()];
  }

  get size(): number {
    return this.keys.size;
  }

  applied(account: string, key: string): Promise<AppliedKey | undefined> {
    const found = this.keys.get(slot(account, key));
    return Promise.resolve(found !== undefined && retained(found, this.clock.now(), this.ttlMs) ? found : undefined);
  }

  claim(account: string, key: string): Promise<KeyClaim | undefined> {
    const k = slot(account, key);
    if (this.inFlight.has(k)) return Promise.resolve(undefined);
    this.inFlight.add(k);
    // Whatever the outcome, the log's listener already recorded a stored write: nothing to settle here.
    // One process: a claim is held until settled, never taken over.
    return Promise.resolve({ hold: () => Promise.resolve(), settle: () => Promise.resolve(void this.inFlight.delete(k)) });
  }

  private remember(applied: AppliedKey): void {
    const k = slot(applied.account, applied.key);
    this.keys.delete(k); // re-inserted at the newest end
    // A time ahead of this clock (one set back since, or another machine's) is taken as now: kept at the
    // front of the ledger it would stop prune() and keep every later key for as long as it is ahead.
    const now = this.clock.now();
    this.keys.set(k, applied.at > now ? { ...applied, at: now } : applied);
  }

  /** Drops expired keys from the oldest end; one applied a little out of time order waits for the next call. */
  private prune(): void {
    const now = this.clock.now();
    for (const [k, applied] of this.keys) {
      if (retained(applied, now, this.ttlMs)) break;
      this.keys.delete(k);
    }
  }
}

const withoutDefinition = ({ definition: _definition, ...created }: DatasetSummary): CreatedDataset => created;

// A key is printable ASCII (checked at the edge), so it holds no newline: the pair is unambiguous.
const slot = (account: string, key: string): string => `${key}\n${account}`;

/** The request with its fence (services.ts → Fenced), for the service that hands its event to the log. */
const fenced = <R extends object>(req: R, fence: () => Promise<void>): R & Fenced => ({ ...req, fence });

/** What became of an attempt that failed: only a refusal or `unavailable` proves nothing was stored. */
const outcomeOf = (e: unknown): 'not_applied' | 'unknown' => (e instanceof DomainError && e.code !== 'outcome_unknown' ? 'not_applied' : 'unknown');

/**
 * The schema and record services with Idempotency-Keys honoured (docs/api.md → Retrying a write). A write
 * without a key passes through. A keyed one: a repeat of an applied write is answered from the ledger
 * (`replayed`); the same key with another request is refused (422); one while another attempt holds the
 * key is refused (409, Retry-After) rather than queued, so a client's retry loop never piles up waiting
 * requests; else the write runs under the key's claim, with the key inside its event.
 */
export function keyedWrites(
  inner: { readonly schemas: SchemaService; readonly records: RecordService },
  ledger: IdempotencyLedger,
  clock: Clock = { now: () => Date.now() },
): { schemas: SchemaService; records: RecordService } {
  const guard = keyGuard(ledger, clock);
  return { schemas: guard.schemas(inner.schemas), records: guard.records(inner.records) };
}

/** The Idempotency-Key rules of keyedWrites, for a service that serves only one of the two (distributed mode). */
export function keyGuard(ledger: IdempotencyLedger, clock: Clock = { now: () => Date.now() }): { schemas(s: SchemaService): SchemaService; records(r: RecordService): RecordService } {
  async function guarded<T>(
    ref: DatasetRef,
    mark: IdempotencyMark,
    replay: (applied: AppliedKey) => T,
    run: (fence: () => Promise<void>) => Promise<T>,
    applies: (result: T) => AppliedKey | undefined,
  ): Promise<T> {
    const { account } = ref;
    const repeat = repeatOf(await ledger.applied(account, mark.key), mark);
    if (repeat !== undefined) return replay(repeat);
    const claim = await ledger.claim(account, mark.key, ref.id);
    if (claim === undefined) throw keyInFlight(mark.key);
    let result: T;
    let applied: AppliedKey | undefined;
    try {
      // Again under the claim: the attempt that held it may have been applied since the first look.
      const settled = repeatOf(await ledger.applied(account, mark.key), mark);
      if (settled !== undefined) result = replay(settled);
      else {
        // The lease runs from the claim, the log's deadline only from the append: the time between (the
        // schema read, a queue for a write worker, a pause) is fenced off by holding the claim at the append.
        result = await run(() => claim.hold());
        applied = applies(result);
      }
    } catch (e) {
      // A claim left unsettled ends with its lease and is then settled from the log: the write's answer stands.
      await claim.settle(outcomeOf(e)).catch(() => undefined);
      throw e;
    }
    await claim.settle(applied === undefined ? 'not_applied' : { applied }).catch(() => undefined);
    return result;
  }
  const replayedWrite = (): WriteAnswer => ({ replayed: true });
  // A created dataset is kept without its definition, as the log's fold keeps it (appliedKeyOf): a repeat
  // has the same body bytes and parses it again (the replay above), so a ledger holding keys in Redis
  // keeps a few hundred bytes per create instead of a definition's worth.
  const appliedKey = (req: DatasetRef, mark: IdempotencyMark, dataset?: DatasetSummary): AppliedKey => ({
    account: req.account,
    key: mark.key,
    fingerprint: mark.fingerprint,
    at: clock.now(),
    ...(dataset === undefined ? {} : { dataset: withoutDefinition(dataset) }),
  });
  const keyed =
    <R extends DatasetRef & KeyedWrite>(write: (req: R) => Promise<WriteAnswer>) =>
    (req: R): Promise<WriteAnswer> => {
      const mark = req.idempotency;
      return mark === undefined ? write(req) : guarded(req, mark, replayedWrite, (fence) => write(fenced(req, fence)), (answer) => (answer.replayed ? undefined : appliedKey(req, mark)));
    };
  return {
    schemas: (schemas) => ({
      findOrCreate: (req: DatasetBody): Promise<FindOrCreateResult> => {
        if (req.idempotency === undefined) return schemas.findOrCreate(req);
        const mark = req.idempotency;
        return guarded(
          req,
          mark,
          (applied) => {
            // The same fingerprint is the same method and path, so the applied write was this create; a key
            // recorded without its dataset can only be another request's.
            if (applied.dataset === undefined) throw keyReused(applied.key);
            // The same fingerprint is the same body bytes: its definition is the one the create stored.
            const definition = applied.dataset.definition ?? parseDefinition(req.body);
            return { created: true, dataset: { ...applied.dataset, definition }, replayed: true };
          },
          (fence) => schemas.findOrCreate(fenced(req, fence)),
          // A find applies nothing: its key stays free.
          (found) => (found.created && found.replayed !== true ? appliedKey(req, mark, found.dataset) : undefined),
        );
      },
      get: (req) => schemas.get(req),
      delete: keyed((req: DatasetRef & KeyedWrite) => schemas.delete(req)),
    }),
    records: (records) => ({
      append: keyed((req: RawDatasetBody) => records.append(req)),
      replace: keyed((req: RawDatasetBody) => records.replace(req)),
    }),
  };
}

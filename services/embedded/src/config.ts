import { availableParallelism } from 'node:os';
import { defaultWriteWorkerCount } from '@pushbase/app';
import { listenerConfigOf, listenerEnv, tlsPairRefinement, type ListenerConfig } from '@pushbase/gateway';
import { telemetryConfigOf, telemetryEnv, type TelemetryConfig } from '@pushbase/telemetry';
import { z } from 'zod';
import { blankToUndefined, hoursToMs, idempotencyEnv, parseEnv } from '@pushbase/config';

/**
 * One write worker more than the cores, at most 4; none on one core (the rule: defaultWriteWorkerCount).
 * A write passes the event loop, a worker and the event loop again, so with one worker per spare core
 * requests queued behind the busy worker while a core idled (docs/performance.md → Embedded write workers).
 */
export const defaultWriteWorkers = (cores: number = availableParallelism()): number => defaultWriteWorkerCount(1, cores);

const positive = (def: number) => z.preprocess(blankToUndefined, z.coerce.number().int().positive().default(def));

// The listeners' variables (shared with `pushbase gateway`) and the embedded store's own.
const schema = z
  .object({
    ...listenerEnv,
    ...telemetryEnv,
    // Embedded event log: a segment holding at least this many bytes is sealed and a new one started.
    PUSHBASE_SEGMENT_BYTES: positive(64 * 1024 * 1024),
    // Embedded mode: a background compaction writes a snapshot once sealed, uncovered segments hold this much.
    PUSHBASE_COMPACT_AFTER_BYTES: positive(256 * 1024 * 1024),
    // Threads that parse and validate writes beside the event loop; 0 keeps them on it.
    PUSHBASE_WRITE_WORKERS: z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(64).default(defaultWriteWorkers())),
    ...idempotencyEnv,
  })
  .refine(...tlsPairRefinement);

export interface EmbeddedConfig extends ListenerConfig {
  readonly segmentBytes: number;
  readonly compactAfterBytes: number;
  readonly writeWorkers: number;
  /** How long an applied Idempotency-Key is retained, in ms. */
  readonly idempotencyTtlMs: number;
  /** Log level and tracing; off when not given. */
  readonly telemetry?: TelemetryConfig;
}

/** Parses the environment once, at start; a bad value stops the process with every problem listed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): EmbeddedConfig {
  const c = parseEnv(schema, env);
  return Object.freeze({
    ...listenerConfigOf(c),
    segmentBytes: c.PUSHBASE_SEGMENT_BYTES,
    compactAfterBytes: c.PUSHBASE_COMPACT_AFTER_BYTES,
    writeWorkers: c.PUSHBASE_WRITE_WORKERS,
    idempotencyTtlMs: hoursToMs(c.PUSHBASE_IDEMPOTENCY_TTL_HOURS),
    telemetry: telemetryConfigOf(c),
  });
}

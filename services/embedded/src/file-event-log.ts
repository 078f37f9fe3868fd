import type { EventListener, EventLog } from '@pushbase/contracts';
import { DomainError, type DatasetEvent } from '@pushbase/domain';
import type { EventLogMetrics } from '@pushbase/metrics';
import { failSpan, pushbaseTracer, SpanKind } from '@pushbase/telemetry';
import { errorText, MAX_FRAME_BYTES } from './frames';
import { framePrefix } from './log-records';
import { DATASET_EVENT_CODEC, recoverLog, type LogCodec } from './log-recovery';
import { segmentFile, type SegmentInfo } from './log-segments';
import { LogWriter, nodeIo, unavailable, type EventLogIo } from './log-writer';

export { FRAME_HEADER_BYTES, MAX_FRAME_BYTES } from './frames';
export { DATASET_EVENT_CODEC, EventLogCorruptError, readSealedSegment, type LogCodec } from './log-recovery';
export { hasLegacyLog, LEGACY_LOG_FILE, listSegments, SEGMENT_DIR, SEGMENT_SUFFIX, segmentDir, segmentFile, type SegmentInfo } from './log-segments';
export type { EventLogIo } from './log-writer';

/*
 * The embedded mode's durable event log: numbered segment files, one record per group commit (one crc over
 * it), one frame per append() so a multi-event append is atomic. This file is the log's face (start, append,
 * close, stats); recovery at start is log-recovery.ts, the group-commit writer log-writer.ts. Layout,
 * positions, rolling, group commit and recovery: docs/embedded-storage.md → The event log.
 */

export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024;

export interface FileEventLogOptions {
  /** The data directory; created when missing. Segments live in `<dir>/log/`. */
  readonly dir: string;
  /** Upper bound on the bytes of one group-commit write. A single larger frame is still written, alone. */
  readonly maxBatchBytes?: number;
  /** A segment holding at least this many bytes is sealed before the next batch. Default 64 MiB. */
  readonly segmentBytes?: number;
  /** Called after a segment was sealed (the new one exists and is durable). Must not throw. */
  readonly onSealed?: (segment: SegmentInfo) => void;
  /** Where start() reports a dropped torn tail and where a broken log says so. Default: stderr. */
  readonly warn?: (message: string) => void;
  /** Test seam: replaces some of the append path's file operations. */
  readonly io?: Partial<EventLogIo>;
  /**
   * Called when the log can no longer tell which appends are stored (a failed write could not be rolled
   * back). Default: print the reason and exit the process at once (exit code 74), so that no client is
   * told "refused" about a write a restart might replay. Tests replace it.
   */
  readonly onFatal?: (message: string) => void;
  /** Group commits' and appends' durations (docs/metrics.md); none when not given. */
  readonly metrics?: EventLogMetrics;
}

export interface FileEventLogCodecOptions<E> extends FileEventLogOptions {
  readonly codec: LogCodec<E>;
}

export interface FileEventLogStartOptions {
  /**
   * Global index of the first frame to deliver: the position of the snapshot the caller loaded. Frames
   * below it are not delivered, and segments wholly below it are not even read. Default 0.
   */
  readonly from?: number;
}

export interface FileEventLogStats {
  /** Committed (fsync'd) bytes of the live segments. */
  readonly bytes: number;
  /** Committed frames held by the live segments, i.e. append() calls, including those replayed at start. */
  readonly frames: number;
  /** Global index the next frame will get: every frame ever committed, deleted segments included. */
  readonly position: number;
  /** Global index of the first frame still held (the base of the oldest live segment). */
  readonly firstPosition: number;
  /** Base of the segment appends go to; every frame before it is in a sealed segment. */
  readonly activeBase: number;
  /** Live segment files, the active one included. */
  readonly segments: number;
  /** Frames delivered by start()'s replay. */
  readonly replayed: number;
  /** fdatasync calls made by group commits since start. */
  readonly syncs: number;
}

type State = 'new' | 'starting' | 'open' | 'closing' | 'closed';

export class FileEventLog<E = DatasetEvent> implements EventLog<E> {
  readonly dir: string;
  private readonly codec: LogCodec<E>;
  private readonly tracer = pushbaseTracer();
  private readonly warn: (message: string) => void;
  private readonly io: EventLogIo;
  private readonly writer: LogWriter<E>;

  private state: State = 'new';
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  /** Set synchronously by close(): from then on append() rejects. */
  private stopping = false;
  private replayed = 0;

  /** Dataset events unless `codec` says otherwise (then E is the codec's event type). */
  constructor(opts: FileEventLogOptions | FileEventLogCodecOptions<E>) {
    this.dir = opts.dir;
    // Without a codec the log is a log of dataset events: E is DatasetEvent (the default type argument).
    this.codec = 'codec' in opts ? opts.codec : (DATASET_EVENT_CODEC as unknown as LogCodec<E>);
    this.warn = opts.warn ?? ((message) => void process.stderr.write(`${message}\n`));
    this.io = { ...nodeIo, ...opts.io };
    this.writer = new LogWriter<E>({
      dir: opts.dir,
      // Capped so that a batch's body always fits what the start-up scan accepts (log-records.ts).
      maxBatchBytes: Math.min(MAX_FRAME_BYTES, Math.max(1, opts.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES)),
      segmentBytes: Math.max(1, opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES),
      onSealed: opts.onSealed,
      warn: this.warn,
      onFatal:
        opts.onFatal ??
        ((message) => {
          process.stderr.write(`pushbase: fatal: ${message}\n`);
          process.exit(74); // EX_IOERR
        }),
      io: this.io,
      metrics: opts.metrics,
    });
  }

  /** The segment appends go to (after start). */
  get file(): string {
    return this.writer.active?.file ?? segmentFile(this.dir, 0);
  }

  stats(): FileEventLogStats {
    const { active, sealed } = this.writer;
    const sealedBytes = sealed.reduce((n, s) => n + s.bytes, 0);
    const sealedFrames = sealed.reduce((n, s) => n + s.frames, 0);
    const activeBase = active?.base ?? 0;
    return {
      bytes: sealedBytes + (active?.size ?? 0),
      frames: sealedFrames + (active?.frames ?? 0),
      position: activeBase + (active?.frames ?? 0),
      firstPosition: sealed[0]?.base ?? activeBase,
      activeBase,
      segments: sealed.length + (active === undefined ? 0 : 1),
      replayed: this.replayed,
      syncs: this.writer.syncs,
    };
  }

  /** The sealed segments this log knows of, oldest first. */
  sealedSegments(): readonly SegmentInfo[] {
    return this.writer.sealed;
  }

  /** Compaction deleted the sealed segments that end at or before `position`: forget them. */
  forgetSealedBefore(position: number): void {
    this.writer.sealed = this.writer.sealed.filter((s) => s.base + s.frames > position);
  }

  start(listener: EventListener<E>, opts: FileEventLogStartOptions = {}): Promise<void> {
    if (this.state !== 'new') return Promise.reject(new Error(`FileEventLog.start: the log is ${this.state}`));
    this.state = 'starting';
    this.writer.listener = listener;
    this.starting = this.open(listener, opts.from ?? 0);
    return this.starting;
  }

  append(events: readonly E[], encoded?: Uint8Array): Promise<void> {
    const broken = this.writer.broken;
    if (broken !== undefined) return Promise.reject(unavailable(broken));
    if (this.stopping) return Promise.reject(unavailable('The event log is closed'));
    // Appends made while start() replays wait for it; they are written after the replayed frames.
    if (this.state !== 'open' && this.state !== 'starting') {
      return Promise.reject(unavailable(`The event log is ${this.state === 'new' ? 'not started' : 'closed'}`));
    }
    let payload: Buffer;
    try {
      payload =
        encoded === undefined ? this.codec.encode(events) : Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    if (payload.length > MAX_FRAME_BYTES) {
      // No retry could succeed, so this is the request's fault, not an outage (the body limit prevents it).
      return Promise.reject(
        new DomainError('invalid', `The batch is ${payload.length} bytes, over the event log's limit of ${MAX_FRAME_BYTES}`),
      );
    }
    const prefix = framePrefix(payload);
    // From the queue to the group commit's fsync and the listener: a child of the request's span.
    const span = this.tracer.startSpan('event log append', { kind: SpanKind.INTERNAL, attributes: { 'pushbase.events': events.length, 'pushbase.bytes': payload.length } });
    return new Promise<void>((resolve, reject) => {
      const traced = span.isRecording();
      this.writer.enqueue(
        {
          events,
          prefix,
          payload,
          resolve: traced
            ? () => {
                span.end();
                resolve();
              }
            : resolve,
          reject: traced
            ? (err: unknown) => {
                failSpan(span, err);
                reject(err instanceof Error ? err : new Error(String(err)));
              }
            : reject,
          queuedAt: performance.now(),
        },
        this.state === 'open',
      );
    });
  }

  close(): Promise<void> {
    this.stopping = true;
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /** start(): recovery (log-recovery.ts), then the queued appends are written. */
  private async open(listener: EventListener<E>, from: number): Promise<void> {
    try {
      this.writer.active = await recoverLog(
        {
          dir: this.dir,
          codec: this.codec,
          io: this.io,
          warn: this.warn,
          listener: (events) => {
            listener(events);
            this.replayed += 1;
          },
          sealed: (segment) => void this.writer.sealed.push(segment),
        },
        from,
      );
    } catch (err) {
      this.writer.active = undefined;
      this.writer.sealed = [];
      this.state = 'closed';
      this.writer.failQueued(unavailable(`The event log could not start: ${errorText(err)}`));
      throw err;
    }
    this.state = 'open';
    if (this.writer.queued > 0) this.writer.kick();
  }

  private async shutdown(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined);
    if (this.state === 'open') this.state = 'closing';
    await this.writer.idle();
    this.state = 'closed';
    await this.writer.closeActive();
  }
}

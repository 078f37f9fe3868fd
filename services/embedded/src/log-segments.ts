import * as fs from 'node:fs';
import * as path from 'node:path';
import { listPositioned, positionName } from './frames';

/*
 * The event log's segment files on disk, shared by its recovery (log-recovery.ts) and its write path
 * (log-writer.ts): where they live, how they are named (by the global index of their first frame) and
 * what the log keeps of each. Layout and positions: docs/embedded-storage.md → The event log.
 */

export const SEGMENT_DIR = 'log';
export const SEGMENT_SUFFIX = '.seg';
export const LEGACY_LOG_FILE = 'events.log';

/** A legacy single-file log to migrate: a file. A directory of that name is the guard of data-dir-format.ts. */
export const hasLegacyLog = (dir: string): boolean => fs.statSync(path.join(dir, LEGACY_LOG_FILE), { throwIfNoEntry: false })?.isFile() === true;

export const segmentDir = (dir: string): string => path.join(dir, SEGMENT_DIR);
export const segmentFile = (dir: string, base: number): string => path.join(segmentDir(dir), positionName(base, SEGMENT_SUFFIX));

/** The segment files of a data directory, by ascending base (the global index of their first frame). */
export async function listSegments(dir: string): Promise<{ base: number; file: string }[]> {
  return (await listPositioned(segmentDir(dir), SEGMENT_SUFFIX)).map((s) => ({ base: s.position, file: s.file }));
}

export interface SegmentInfo {
  /** Global index of the segment's first frame (its name). */
  readonly base: number;
  readonly frames: number;
  readonly bytes: number;
  readonly file: string;
}

/** The segment appends go to: opened read-write by recovery, grown by the writer's commits. */
export interface ActiveSegment {
  readonly base: number;
  readonly file: string;
  readonly fd: number;
  size: number;
  frames: number;
}

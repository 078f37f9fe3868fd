import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ACCOUNT_LOG_DIR } from './account-log';
import { lockDataDir, type DataDirLock } from './data-dir-lock';
import { LEGACY_LOG_FILE } from './file-event-log';
import { readIfExists, syncDirectory, writeFileAtomic } from '@pushbase/data-dir';

/*
 * The data directory's format: a number in `<dir>/FORMAT`, read before anything is touched; a later format
 * is refused, an earlier or missing one opens and is marked. Releases from before FORMAT are stopped by a
 * guard directory `events.log` beside each log, placed only once the log has a segment. Why that stops
 * them: docs/embedded-storage.md → The data directory's format.
 */

/** The format this release writes and reads; see above for when it changes. */
export const DATA_DIR_FORMAT = 1;
export const FORMAT_FILE = 'FORMAT';

const GUARD_NOTE = `This is not an event log. Its name stops pushbase releases from before ${FORMAT_FILE} (they never read that
file) from opening this data directory: they would take the newer log for a damaged one and cut it. With
this directory here they refuse to start instead ("Both a legacy event log ... and segments ... exist").
Do not move or delete it. To go back to an older release, restore a copy of the data directory made before
the upgrade.
`;

/** A data directory of a later format than this release reads, or whose format cannot be told. */
export class DataDirFormatError extends Error {
  override readonly name = 'DataDirFormatError';
}

/** The directory's format, undefined when it has no FORMAT (an older one); throws for one this release must not open. */
export async function checkDataDirFormat(dir: string): Promise<number | undefined> {
  const file = path.resolve(dir, FORMAT_FILE);
  const text = await readIfExists(file);
  if (text === undefined) return undefined;
  if (!/^\d+\n?$/.test(text)) {
    throw new DataDirFormatError(`${file} does not hold a format number. Refusing to start; nothing was changed. Restore it from a backup.`);
  }
  const format = Number(text.trim());
  if (format > DATA_DIR_FORMAT) {
    throw new DataDirFormatError(
      `The data directory ${path.resolve(dir)} is in format ${format} (${file}), newer than this pushbase reads (format ${DATA_DIR_FORMAT}): a later ` +
        'release wrote it. Refusing to start; nothing was changed. Run that release or a later one, or restore a copy of the ' +
        'directory made before the upgrade.',
    );
  }
  return format;
}

/** Takes the directory's lock (data-dir-lock.ts) if this release reads its format: checked before LOCK is touched, and again under the lock. */
export async function lockDataDirOfKnownFormat(dir: string): Promise<DataDirLock> {
  await checkDataDirFormat(dir);
  const lock = await lockDataDir(dir);
  try {
    // A later release may have upgraded the directory while this one waited for the lock.
    await checkDataDirFormat(dir);
    return lock;
  } catch (e: unknown) {
    await lock.release();
    throw e;
  }
}

/** Places the guards (see above) and writes this release's FORMAT; once the logs are open, so they have segments. */
export async function markDataDirFormat(dir: string): Promise<void> {
  for (const logDir of [dir, path.join(dir, ACCOUNT_LOG_DIR)]) {
    const guard = path.join(logDir, LEGACY_LOG_FILE);
    const note = path.join(guard, 'README');
    if (existsSync(note)) continue;
    await mkdir(guard, { recursive: true });
    await syncDirectory(logDir);
    await writeFileAtomic(note, GUARD_NOTE, 0o644);
  }
  // After the guards: a FORMAT file must never claim a directory that older releases could still cut.
  const file = path.join(dir, FORMAT_FILE);
  if ((await readIfExists(file)) !== `${DATA_DIR_FORMAT}\n`) await writeFileAtomic(file, `${DATA_DIR_FORMAT}\n`, 0o644);
}

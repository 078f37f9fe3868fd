import * as fs from 'node:fs';
import * as path from 'node:path';
import { callback, closeFd, fsyncFd, syncDirectory } from './fs';

/** The file's text, or undefined when it does not exist; any other error is thrown, never taken for "absent". */
export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.promises.readFile(file, 'utf8');
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${file}: ${(e as Error).message}`);
  }
}

/** The durable steps of writeFileAtomic. Injectable so tests can see that each happens, in order. */
export interface AtomicWriteIo {
  /** fsync of the temporary file's descriptor, then (after the rename) of the directory's. */
  fsync(fd: number): Promise<void>;
  rename(from: string, to: string): Promise<void>;
}

const nodeAtomicWriteIo: AtomicWriteIo = {
  fsync: fsyncFd,
  rename: (from, to) => fs.promises.rename(from, to),
};

async function writeAllAt(fd: number, data: Buffer): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const n = await callback<number>((cb) => fs.write(fd, data, done, data.length - done, done, cb));
    if (n <= 0) throw new Error('write made no progress');
    done += n;
  }
}

/**
 * Writes beside, fsyncs, renames, fsyncs the directory. Without the two fsyncs a power loss soon after a
 * first start can leave the file empty or missing although the server already used it (a key shown once,
 * a certificate a client pinned): the rename may reach the disk before the data, or not at all.
 */
export async function writeFileAtomic(file: string, data: string, mode: number, io: Partial<AtomicWriteIo> = {}): Promise<void> {
  const { fsync, rename } = { ...nodeAtomicWriteIo, ...io };
  const tmp = `${file}.tmp`;
  const fd = await callback<number>((cb) => fs.open(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC, mode, cb));
  try {
    // open() sets the mode only when it creates the file: a .tmp left by a crash would keep its own.
    await callback<void>((cb) => fs.fchmod(fd, mode, cb));
    await writeAllAt(fd, Buffer.from(data, 'utf8'));
    await fsync(fd);
  } finally {
    await closeFd(fd);
  }
  await rename(tmp, file);
  await syncDirectory(path.dirname(file), fsync);
}

/** A side file of the data directory that exists but cannot be used: the start stops, naming it. */
export class SideFileError extends Error {
  override readonly name = 'SideFileError';
  constructor(
    readonly file: string,
    problem: string,
    remedy: string,
  ) {
    super(`${file} ${problem}. Refusing to start rather than replace it: ${remedy}`);
  }
}

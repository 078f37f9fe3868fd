import * as fs from 'node:fs';

/* node:fs's callback forms as promises, on plain descriptors: what the durable writes here and the embedded
 * event log's segments share. */

export const callback = <T>(run: (done: (err: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> =>
  new Promise<T>((resolve, reject) => run((err, value) => (err ? reject(err) : resolve(value as T))));

export const openFile = (file: string, flags: number): Promise<number> => callback<number>((done) => fs.open(file, flags, 0o644, done));
export const closeFd = (fd: number): Promise<void> => callback<void>((done) => fs.close(fd, done));
export const fsyncFd = (fd: number): Promise<void> => callback<void>((done) => fs.fsync(fd, done));

/** fsyncs a directory, so the entries made or renamed in it survive a power loss. */
export async function syncDirectory(dir: string, fsync: (fd: number) => Promise<void> = fsyncFd): Promise<void> {
  const fd = await openFile(dir, fs.constants.O_RDONLY);
  try {
    await fsync(fd);
  } catch (err) {
    // Some file systems cannot fsync a directory; the files' own fsyncs still hold.
    if (!['EINVAL', 'EISDIR', 'EPERM', 'ENOTSUP'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  } finally {
    await closeFd(fd);
  }
}

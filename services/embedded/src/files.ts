import { readFile, rename, writeFile } from 'node:fs/promises';

/** The file's text, or undefined when it does not exist; any other error is thrown, never taken for "absent". */
export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (e: unknown) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${file}: ${(e as Error).message}`);
  }
}

/** Writes beside, then renames: a crash mid-write never leaves half a file that a restart would trust. */
export async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  await writeFile(`${file}.tmp`, data, { mode });
  await rename(`${file}.tmp`, file);
}

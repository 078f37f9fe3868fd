import { spawn } from 'node:child_process';
import * as path from 'node:path';

/** The event log's source, for child scripts that `require(process.env.FEL_SRC)`. */
export const LOG_SOURCE = path.join(__dirname, '..', 'src', 'file-event-log.ts');
const REPO_ROOT = path.join(__dirname, '..', '..', '..');

/**
 * Runs `script` (TypeScript, through tsx) in a child node with `env`, waits for it to print `ready`, lets it
 * run `killAfterMs` more, kills it with SIGKILL and resolves to the complete lines it printed (a partial
 * last line is dropped). Rejects if it ends any other way. Bounded by a 15 s guard.
 */
export function runUntilKilled(script: string, env: Record<string, string>, killAfterMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: REPO_ROOT,
      env: { ...process.env, FEL_SRC: LOG_SOURCE, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (timer === undefined && out.includes('ready')) timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const guard = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('error', reject);
    child.on('exit', (_code, signal) => {
      clearTimeout(guard);
      if (timer) clearTimeout(timer);
      if (signal !== 'SIGKILL' || timer === undefined) return reject(new Error(`child ended early (${signal}): ${err}`));
      resolve(out.split('\n').slice(0, -1));
    });
  });
}

import { readdirSync, readFileSync } from 'node:fs';

/**
 * 'Z' once every thread of the process has exited and it waits only to be reaped (its thread group leader
 * turns Z first, while the other threads are still being torn down and its files still open); its state
 * letter otherwise; undefined once it is gone.
 */
export function procState(pid: number): string | undefined {
  const stateOf = (file: string): string | undefined => {
    try {
      const stat = readFileSync(file, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    } catch {
      return undefined;
    }
  };
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  const states = tasks.map((tid) => stateOf(`/proc/${pid}/task/${tid}/stat`) ?? 'Z');
  return states.every((st) => st === 'Z') ? 'Z' : (states.find((st) => st !== 'Z') ?? stateOf(`/proc/${pid}/stat`));
}

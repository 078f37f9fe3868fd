import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/*
 * The projector's niceness (PUSHBASE_PROJECTOR_NICE), so that on a shared host it yields the CPU to the
 * request path. Off by default: a trade (docs/performance.md → The projector's niceness). Set per thread
 * and, when it leads its session, for its autogroup, since Node's os.setPriority covers neither; a failure
 * is reported, never fatal. How and why: docs/architecture.md → The projector's niceness.
 */

export interface Yielded {
  /** The process's niceness now. */
  readonly nice: number;
  /** Whether the session's scheduling group got the niceness too (Linux autogroup, session leader only). */
  readonly autogroup: boolean;
  /** Why something could not be set. */
  readonly problem?: string;
}

/** The session id in a /proc/<pid>/stat line (its field 6). */
export function sessionIdOf(stat: string): number | undefined {
  // The command name (field 2) is in parentheses and may hold spaces or parentheses: count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const sid = Number(fields[3]);
  return Number.isInteger(sid) ? sid : undefined;
}

const readOr = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/** The ids of this process's threads, the main thread's (the process id) among them. */
function threadIds(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number).filter(Number.isInteger);
  } catch {
    return [0]; // no /proc: the calling thread only
  }
}

/**
 * Gives the scheduling group of the session that `pid` leads (Linux autogroup) the niceness `nice`, where
 * the kernel has autogroups: whether it was set, and why not when that failed. Also used by the local
 * servers script (deploy/local) for the ClickHouse it starts. The caller sees to it that `pid` leads its
 * session: otherwise the group is that of the shell it was started from.
 */
export async function setAutogroupNiceness(pid: number | 'self', nice: number): Promise<{ readonly set: boolean; readonly problem?: string }> {
  if (readOr('/proc/sys/kernel/sched_autogroup_enabled')?.trim() !== '1') return { set: false };
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(`/proc/${pid}/autogroup`, String(nice));
      return { set: true };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN' && attempt === 0) {
        await sleep(110);
        continue;
      }
      return { set: false, problem: `autogroup: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
}

export async function yieldCpu(nice: number): Promise<Yielded> {
  const problems: string[] = [];
  for (const tid of threadIds()) {
    try {
      if (os.getPriority(tid) < nice) os.setPriority(tid, nice);
    } catch (e) {
      // A thread that ended meanwhile (ESRCH) needs nothing.
      if ((e as { info?: { code?: string } }).info?.code !== 'ESRCH') problems.push(`setpriority(${tid}): ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  let autogroup = false;
  const stat = readOr('/proc/self/stat');
  if (stat !== undefined && sessionIdOf(stat) === process.pid) {
    const group = await setAutogroupNiceness('self', nice);
    autogroup = group.set;
    if (group.problem !== undefined) problems.push(group.problem);
  }
  return { nice: os.getPriority(), autogroup, ...(problems.length === 0 ? {} : { problem: problems.join('; ') }) };
}

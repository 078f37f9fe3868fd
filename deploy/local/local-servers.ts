import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { setAutogroupNiceness } from '../../services/projector/src/priority';
import { alive, aptInstall, findExecutable, Provisioner, stopPid, tail, withLock } from '../proc';
import { clickhouseServer } from './clickhouse';
import type { Endpoint, ServicesConfig } from './config';
import { kafkaLibs, kafkaServer } from './kafka';
import { waitUntilAnswering } from './probes';
import { redisServer } from './redis';
import type { ServerName, ServerSpec } from './server';

/*
 * Kafka, ClickHouse and Redis as plain local processes on loopback, for machines without a Docker engine
 * (each server's own part: kafka.ts, clickhouse.ts, redis.ts). Everything lives under one folder (config.dir):
 *
 *   kafka-<version>/        the broker's jars, collected once per version by Maven (libs/)
 *   kafka/                  server.properties, the logging config (log4j2.yaml on 4.x, log4j.properties
 *                           on 3.9), data/ (formatted once), logs/, pid
 *   legacy/kafka/           the second, 3.9.x broker of the int-kafka-3.9 jest project, when it ran
 *   clickhouse/             data/, tmp/, ch.log, ch.err.log, pid
 *   redis/                  the append-only file, redis.log, pid
 *   provision.log           what apt-get, Maven and the storage tool printed
 *
 * `up` leaves alone a server that already answers on its port: it may be someone else's, so it records no
 * pid for it and `down` never touches it. `down` stops only processes whose pid this script recorded, and
 * only after checking the pid still belongs to that server (its working directory is the server's folder),
 * so a reused pid is never killed.
 */

export const SERVER_NAMES: readonly ServerName[] = ['kafka', 'clickhouse', 'redis'];

export interface ServerStatus {
  readonly name: ServerName;
  readonly endpoint: Endpoint;
  /** The pid this script recorded, when that process is still the server it started. */
  readonly pid: number | undefined;
  readonly answering: boolean;
}

/**
 * Lines for a person at a terminal. `provision` marks the slow, once-per-machine steps (apt-get, Maven,
 * formatting), which jest's global setup shows so a first run does not look hung; it hides the rest.
 */
export type Say = (line: string, kind: 'progress' | 'provision') => void;

function specs(c: ServicesConfig): Record<ServerName, ServerSpec> {
  return { kafka: kafkaServer(c), clickhouse: clickhouseServer(c), redis: redisServer(c) };
}

// ── Processes ──

/**
 * The pid recorded for `spec`, if that process is alive and still the server started from its folder.
 * Every server runs with its folder as working directory (Redis chdirs to its --dir, which is the same),
 * and Redis rewrites its command line, so the working directory is what identifies it.
 */
function recordedPid(spec: ServerSpec): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(spec.home, 'pid'), 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  if (existsSync('/proc/self/cwd')) {
    try {
      if (path.resolve(readlinkSync(`/proc/${pid}/cwd`)) !== path.resolve(spec.home)) return undefined;
    } catch {
      return undefined;
    }
  }
  return pid;
}

/** The once-per-machine steps, their output in <dir>/provision.log: the slow lines jest's setup shows. */
function provisioner(c: ServicesConfig, say: Say): Provisioner {
  return new Provisioner(path.join(c.dir, 'provision.log'), (line) => say(line, 'provision'), c.dir);
}

// ── One command at a time per folder ──

function withFolderLock<T>(dir: string, say: Say, fn: () => Promise<T>): Promise<T> {
  return withLock(path.join(dir, 'lock'), { what: `another services command in ${dir}`, say: (line) => say(line, 'progress'), deadlineMs: 15 * 60_000 }, fn);
}

// ── The commands ──

async function statusOf(spec: ServerSpec): Promise<ServerStatus> {
  return { name: spec.name, endpoint: spec.endpoint, pid: recordedPid(spec), answering: await spec.answers() };
}

export async function status(c: ServicesConfig): Promise<ServerStatus[]> {
  return Promise.all(Object.values(specs(c)).map(statusOf));
}

async function launch(spec: ServerSpec, p: Provisioner, say: Say): Promise<void> {
  const command = await spec.prepare(p);
  const out = path.join(spec.home, 'out.log');
  const fd = openSync(out, 'a');
  let exited: string | undefined;
  try {
    // Detached, in its own process group: it outlives this command (and jest's setup) until `down`.
    // A niceness is set by `nice` before the server starts, so every thread it starts inherits it.
    const nice = command.niceness === undefined ? undefined : findExecutable('nice');
    if (command.niceness !== undefined && nice === undefined) say(`nice not found: ${spec.name} runs at the other servers' CPU priority`, 'progress');
    const niced = nice === undefined || command.niceness === undefined ? undefined : { nice, by: command.niceness };
    const [file, args] = niced === undefined ? [command.file, command.args] : [niced.nice, ['-n', String(niced.by), command.file, ...command.args]];
    const child = spawn(file, args, { cwd: spec.home, detached: true, stdio: ['ignore', fd, fd] });
    child.on('exit', (code, signal) => {
      exited = `exited (${signal ?? code}) before answering`;
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    child.unref();
    // Between sessions the kernel's autogroups (where it has them, for processes in the root CPU cgroup)
    // weigh the session's group, not the threads' niceness: the server leads its own session, so its
    // group gets the niceness too (priority.ts says more).
    if (niced !== undefined && child.pid !== undefined) {
      // The other servers' groups start at 0 whatever this script's niceness: the gap is `by` there too.
      const group = await setAutogroupNiceness(child.pid, Math.min(19, niced.by));
      if (group.problem !== undefined) say(`${spec.name}: could not lower its session's CPU weight (${group.problem})`, 'progress');
    }
    await writeFile(path.join(spec.home, 'pid'), `${child.pid}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    await waitUntilAnswering(spec.answers, spec.startDeadlineMs, () => exited);
  } catch (err) {
    throw new Error(`${spec.name} on ${spec.endpoint.host}:${spec.endpoint.port} ${(err as Error).message}; ${out} ends:\n${tail(out)}`);
  }
}

/**
 * Starts every server that does not answer yet, installing what is missing, and waits until each answers.
 * Returns the names of the servers it started (the ones the caller may stop again).
 */
export async function up(c: ServicesConfig, say: Say, names: readonly ServerName[] = SERVER_NAMES): Promise<ServerName[]> {
  await mkdir(c.dir, { recursive: true });
  return withFolderLock(c.dir, say, async () => {
    const all = specs(c);
    const before = await Promise.all(names.map((n) => statusOf(all[n])));
    // A recorded process that does not answer yet is still starting (or hung): wait for it, never start a twin.
    const starting = before.filter((s) => !s.answering && s.pid !== undefined);
    const missing = before.filter((s) => !s.answering && s.pid === undefined).map((s) => all[s.name]);
    for (const s of before.filter((x) => x.answering)) say(`${s.name}: already answering on ${s.endpoint.host}:${s.endpoint.port}`, 'progress');
    if (starting.length + missing.length === 0) return [];

    const p = provisioner(c, say);
    const pkgs = [...new Set(missing.flatMap((s) => s.packages.filter((x) => findExecutable(x.executable) === undefined).map((x) => x.pkg)))];
    await aptInstall(p, pkgs);

    const started: ServerName[] = [];
    const results = await Promise.allSettled([
      ...starting.map((s) => waitUntilAnswering(all[s.name].answers, all[s.name].startDeadlineMs, () => (recordedPid(all[s.name]) === undefined ? 'exited before answering' : undefined))),
      ...missing.map(async (spec) => {
        await mkdir(spec.home, { recursive: true });
        say(`${spec.name}: starting on ${spec.endpoint.host}:${spec.endpoint.port}`, 'progress');
        const t0 = Date.now();
        started.push(spec.name);
        await launch(spec, p, say);
        say(`${spec.name}: answering after ${((Date.now() - t0) / 1000).toFixed(1)} s`, 'progress');
      }),
    ]);
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
    if (failures.length > 0) {
      // Leave nothing half-started behind a failed `up`: stop what this call started.
      await Promise.all(started.map((name) => stopOne(all[name], () => undefined)));
      throw new Error(failures.join('\n\n'));
    }
    return started;
  });
}

async function stopOne(spec: ServerSpec, say: Say, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<boolean> {
  const pid = recordedPid(spec);
  await rm(path.join(spec.home, 'pid'), { force: true });
  if (pid === undefined) return false;
  // Kafka's controlled shutdown takes a few seconds; past 60 s the process is hung. Stopped means the pid
  // is gone, reaped too, as `down` promises: its callers look at the pid itself.
  await stopPid(pid, spec.name, (line) => say(line, 'progress'), { graceMs: 60_000, signal, isRunning: alive });
  return true;
}

export interface DownOptions {
  /** SIGKILL stops a server as a crash would (fault tests); SIGTERM, the default, lets it shut down cleanly. */
  readonly signal?: 'SIGTERM' | 'SIGKILL';
}

/**
 * Stops the named servers (all by default), but only the processes this script recorded, and waits until
 * each has exited. `up` with the same names starts them again on the same data.
 */
export async function down(c: ServicesConfig, say: Say, names: readonly ServerName[] = SERVER_NAMES, opts: DownOptions = {}): Promise<ServerName[]> {
  if (!existsSync(c.dir)) return [];
  return withFolderLock(c.dir, say, async () => {
    const all = specs(c);
    const stopped = await Promise.all(names.map(async (n) => ((await stopOne(all[n], say, opts.signal)) ? [n] : [])));
    return stopped.flat();
  });
}

/**
 * The once-per-machine steps of `up` without starting anything: the Debian packages the named servers need
 * and Kafka's jars. For callers that start the servers where there is no network to fetch them from (the
 * cluster's namespace: deploy/cluster/deps.ts).
 */
export async function provision(c: ServicesConfig, say: Say, names: readonly ServerName[] = SERVER_NAMES): Promise<void> {
  await mkdir(c.dir, { recursive: true });
  const all = specs(c);
  const p = provisioner(c, say);
  const pkgs = [...new Set(names.flatMap((n) => all[n].packages.filter((x) => findExecutable(x.executable) === undefined).map((x) => x.pkg)))];
  await aptInstall(p, pkgs);
  if (names.includes('kafka')) await kafkaLibs(c, p);
}

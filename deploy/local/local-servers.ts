import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { closeSync, existsSync, openSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { setAutogroupNiceness } from '../../services/projector/src/priority';
import { alive, aptInstall, findExecutable, Provisioner, stopPid, tail, withLock } from '../proc';
import type { Endpoint, ServicesConfig } from './config';
import { clickhouseAnswers, kafkaAnswers, redisAnswers, waitUntilAnswering } from './probes';

/*
 * Kafka, ClickHouse and Redis as plain local processes on loopback, for machines without a Docker engine.
 * Everything lives under one folder (config.dir):
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

const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';

export type ServerName = 'kafka' | 'clickhouse' | 'redis';
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

interface Command {
  readonly file: string;
  readonly args: readonly string[];
  /** Run below the other servers' CPU priority: added to this script's niceness, as nice(1) does. */
  readonly niceness?: number;
}

interface ServerSpec {
  readonly name: ServerName;
  readonly endpoint: Endpoint;
  readonly home: string;
  /** Kafka's JVM needs the longest on a busy 2-core machine. */
  readonly startDeadlineMs: number;
  readonly answers: () => Promise<boolean>;
  /** Debian packages this server needs, by the executable that tells whether each is there. */
  readonly packages: readonly { readonly executable: string; readonly pkg: string }[];
  /** Installs what apt cannot (Kafka's jars), writes the config, formats storage; returns how to run it. */
  readonly prepare: (provision: Provisioner) => Promise<Command>;
}

function specs(c: ServicesConfig): Record<ServerName, ServerSpec> {
  return {
    kafka: {
      name: 'kafka',
      endpoint: c.kafka,
      home: path.join(c.dir, 'kafka'),
      startDeadlineMs: 180_000,
      answers: () => kafkaAnswers(c.kafka),
      packages: [
        { executable: 'java', pkg: 'default-jre-headless' },
        { executable: 'mvn', pkg: 'maven' },
      ],
      prepare: (p) => prepareKafka(c, p),
    },
    clickhouse: {
      name: 'clickhouse',
      endpoint: c.clickhouse,
      home: path.join(c.dir, 'clickhouse'),
      startDeadlineMs: 90_000,
      answers: () => clickhouseAnswers(c.clickhouse),
      packages: [{ executable: 'clickhouse-server', pkg: 'clickhouse-server' }],
      prepare: () => prepareClickHouse(c),
    },
    redis: {
      name: 'redis',
      endpoint: c.redis,
      home: path.join(c.dir, 'redis'),
      startDeadlineMs: 30_000,
      answers: () => redisAnswers(c.redis),
      packages: [{ executable: 'redis-server', pkg: 'redis-server' }],
      prepare: () => prepareRedis(c),
    },
  };
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

// ── Kafka ──

/**
 * How a Kafka line logs, as its own distribution does it. 3.9 logs through SLF4J 1.7 to reload4j (a
 * maintained log4j 1.2) with a log4j.properties; 4.x to log4j2 with a log4j2.yaml (YAML needs
 * jackson-dataformat-yaml, which kafka_2.13 4.x brings at run time). 4.x's artifacts still ask for slf4j-api
 * 1.7.36, so the binding is log4j2's for SLF4J 1.x (log4j-slf4j-impl; the SLF4J 2 one would leave SLF4J
 * logging nowhere). 4.4's artifacts ask for log4j2 2.25.5, 4.0's for none at all (its distribution adds
 * them): so the log4j2 jars are named here, at one version for every 4.x, and win over a release's own.
 */
interface KafkaLogging {
  /** Maven coordinates (group:artifact:version) collected with kafka_2.13. */
  readonly artifacts: readonly string[];
  readonly file: string;
  /** The JVM option that points the logging at `file`. */
  readonly option: (file: string) => string;
  readonly config: string;
}

const LOG4J2_VERSION = '2.25.5';

function kafkaLogging(version: string): KafkaLogging {
  if (version.startsWith('3.')) {
    return {
      artifacts: ['org.slf4j:slf4j-reload4j:1.7.36'],
      file: 'log4j.properties',
      option: (file) => `-Dlog4j.configuration=file:${file}`,
      config: [
        'log4j.rootLogger=INFO, file',
        'log4j.appender.file=org.apache.log4j.RollingFileAppender',
        'log4j.appender.file.File=${kafka.logs.dir}/server.log',
        'log4j.appender.file.MaxFileSize=20MB',
        'log4j.appender.file.MaxBackupIndex=2',
        'log4j.appender.file.layout=org.apache.log4j.PatternLayout',
        'log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n',
        'log4j.logger.kafka.request.logger=WARN',
        'log4j.logger.state.change.logger=WARN',
        '',
      ].join('\n'),
    };
  }
  return {
    artifacts: ['log4j-api', 'log4j-core', 'log4j-slf4j-impl'].map((a) => `org.apache.logging.log4j:${a}:${LOG4J2_VERSION}`),
    file: 'log4j2.yaml',
    option: (file) => `-Dlog4j2.configurationFile=${file}`,
    // The 3.9 config's intent: one size-rolled server.log (20 MB, two kept), quiet request and state-change
    // loggers; unlike the distribution's, nothing on stdout (out.log keeps only what the JVM itself says).
    config: [
      'Configuration:',
      '  Appenders:',
      '    RollingFile:',
      '      name: file',
      '      fileName: "${sys:kafka.logs.dir}/server.log"',
      '      filePattern: "${sys:kafka.logs.dir}/server.log.%i"',
      '      PatternLayout:',
      '        pattern: "[%d] %p %m (%c)%n"',
      '      SizeBasedTriggeringPolicy:',
      '        size: 20MB',
      '      DefaultRolloverStrategy:',
      '        max: 2',
      '  Loggers:',
      '    Root:',
      '      level: INFO',
      '      AppenderRef:',
      '        ref: file',
      '    Logger:',
      '      - name: kafka.request.logger',
      '        level: WARN',
      '      - name: state.change.logger',
      '        level: WARN',
      '',
    ].join('\n'),
  };
}

/** Where the jars of the configured version are collected: PUSHBASE_KAFKA_JARS_DIR, else `<dir>/kafka-<version>`. */
export function kafkaJarsDir(c: Pick<ServicesConfig, 'dir' | 'kafkaJarsDir' | 'kafkaVersion'>): string {
  return c.kafkaJarsDir ?? path.join(c.dir, `kafka-${c.kafkaVersion}`);
}

async function kafkaLibs(c: ServicesConfig, p: Provisioner): Promise<string> {
  const version = c.kafkaVersion;
  const home = kafkaJarsDir(c);
  const libs = path.join(home, 'libs');
  const done = path.join(home, '.complete');
  // One folder holds one version's jars; a folder named by PUSHBASE_KAFKA_JARS_DIR may hold another's.
  const check = (): string => {
    if (!existsSync(path.join(libs, `kafka_2.13-${version}.jar`))) {
      throw new Error(`${libs} holds no kafka_2.13-${version}.jar (another version's jars?): give PUSHBASE_KAFKA_JARS_DIR a folder of its own for Kafka ${version}`);
    }
    return libs;
  };
  if (existsSync(done)) return check();
  p.say(`collecting Apache Kafka ${version} jars with Maven`);
  await mkdir(home, { recursive: true });
  // A jars folder shared by several services folders (PUSHBASE_KAFKA_JARS_DIR) may be filled by two runs at
  // once: each collects into a folder of its own and renames it into place; a loser finds the winner's.
  const mine = path.join(home, `libs.${process.pid}.${Date.now()}`);
  // The broker is the kafka_2.13 artifact and its runtime dependencies, plus the logging that Kafka's own
  // distribution ships; Maven resolves the rest, so there is no jar list to keep by hand.
  const dependency = (coordinates: string): string => {
    const [groupId, artifactId, v] = coordinates.split(':');
    return `    <dependency><groupId>${groupId}</groupId><artifactId>${artifactId}</artifactId><version>${v}</version></dependency>`;
  };
  const logging = kafkaLogging(version);
  const pom = `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pushbase.local</groupId>
  <artifactId>kafka-server</artifactId>
  <version>${version}</version>
  <packaging>pom</packaging>
  <dependencies>
${[`org.apache.kafka:kafka_2.13:${version}`, ...logging.artifacts].map(dependency).join('\n')}
  </dependencies>
</project>
`;
  const pomFile = path.join(home, `pom.${process.pid}.xml`);
  await writeFile(pomFile, pom);
  const mvn = findExecutable('mvn');
  if (mvn === undefined) throw new Error('mvn not found');
  try {
    await p.run(mvn, ['-B', '-q', '-f', pomFile, `${DEPENDENCY_PLUGIN}:copy-dependencies`, `-DoutputDirectory=${mine}`, '-DincludeScope=runtime'], { cwd: home });
    if (logging.file.endsWith('.yaml') && !(await readdir(mine)).some((f) => f.startsWith('jackson-dataformat-yaml-'))) {
      throw new Error(`Kafka ${version}'s dependencies bring no jackson-dataformat-yaml: log4j2 could not read ${logging.file}`);
    }
    if (!existsSync(done)) {
      // A folder left by a run killed before writing .complete is incomplete.
      await rm(libs, { recursive: true, force: true });
      await rename(mine, libs);
      await writeFile(done, `${new Date().toISOString()}\n`);
    }
  } finally {
    await rm(mine, { recursive: true, force: true });
    await rm(pomFile, { force: true });
  }
  return check();
}

function kafkaJava(c: ServicesConfig, libs: string, mainClass: string, args: readonly string[]): Command {
  const home = path.join(c.dir, 'kafka');
  const java = findExecutable('java');
  if (java === undefined) throw new Error('java not found');
  const logging = kafkaLogging(c.kafkaVersion);
  return {
    file: java,
    args: [
      // Kafka's own start scripts' heap and G1 settings: at 512m at most, the log cleaner's 128 MiB
      // buffer kept G1 marking after nearly every young collection (docs/operations.md, "The broker's heap").
      '-Xms1g',
      '-Xmx1g',
      '-XX:+UseG1GC',
      '-XX:MaxGCPauseMillis=20',
      '-XX:InitiatingHeapOccupancyPercent=35',
      '-XX:+ExplicitGCInvokesConcurrent',
      '-XX:+ExitOnOutOfMemoryError',
      '-Djava.awt.headless=true',
      `-Dkafka.logs.dir=${path.join(home, 'logs')}`,
      logging.option(path.join(home, logging.file)),
      '-cp',
      path.join(libs, '*'),
      mainClass,
      ...args,
    ],
  };
}

/** The Kafka release whose storage tool formatted `data`, as recorded beside it (undefined: not recorded). */
const FORMATTED_BY = 'formatted-by';

/** Whether release line x.y of `a` is older than that of `b` (patch releases of one line share a format). */
function olderLine(a: string, b: string): boolean {
  const [am = 0, an = 0] = a.split('.').map(Number);
  const [bm = 0, bn = 0] = b.split('.').map(Number);
  return am < bm || (am === bm && an < bn);
}

async function prepareKafka(c: ServicesConfig, p: Provisioner): Promise<Command> {
  const libs = await kafkaLibs(c, p);
  const home = path.join(c.dir, 'kafka');
  const data = path.join(home, 'data');
  await mkdir(path.join(home, 'logs'), { recursive: true });
  // Each release line formats its storage at its own, newest metadata version, which an older line cannot
  // read: starting 3.9 on a 4.x's data would fail deep in the broker's log. Upwards (3.9 data, a 4.x broker)
  // is Kafka's supported upgrade and goes ahead; the metadata version stays the older line's until someone
  // raises it with kafka-features.
  const formattedBy = (await readFile(path.join(home, FORMATTED_BY), 'utf8').catch(() => '')).trim();
  if (formattedBy !== '' && olderLine(c.kafkaVersion, formattedBy)) {
    throw new Error(`${data} was formatted by Kafka ${formattedBy}, which ${c.kafkaVersion} cannot read: use another PUSHBASE_SERVICES_DIR for ${c.kafkaVersion} (or delete ${home})`);
  }
  const { host, port, controllerPort } = c.kafka;
  const hostListener = c.kafkaHostListener === undefined ? '' : `,HOST://${c.kafkaHostListener.host}:${c.kafkaHostListener.port}`;
  const properties = [
    '# Written by deploy/local at every start; the ports follow PUSHBASE_KAFKA_BROKERS.',
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@${host}:${controllerPort}`,
    `listeners=PLAINTEXT://${host}:${port},CONTROLLER://${host}:${controllerPort}${hostListener}`,
    `advertised.listeners=PLAINTEXT://${host}:${port}${hostListener}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT${c.kafkaHostListener === undefined ? '' : ',HOST:PLAINTEXT'}`,
    `log.dirs=${data}`,
    // One node: every replication factor is 1.
    'default.replication.factor=1',
    'min.insync.replicas=1',
    'offsets.topic.replication.factor=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    // Fewer internal partitions than the 50 of a production cluster: the first consumer group and the
    // first idempotent producer create these topics, and 50 partitions take seconds on two cores.
    'offsets.topic.num.partitions=10',
    'transaction.state.log.num.partitions=10',
    // The appenders write in transactions; one left open by a killed writer holds every read-committed
    // reader (the projector) back until the coordinator aborts it. Check for expired ones every second
    // rather than every 10 s, so that wait is about the writer's transaction timeout (10 s), not twice it.
    'transaction.abort.timed.out.transaction.cleanup.interval.ms=1000',
    // pushbase creates its own topic with its own partition count; a typo must not create another.
    'auto.create.topics.enable=false',
    // Tests start consumer groups all the time; a single-node group needs no wait for more members.
    'group.initial.rebalance.delay.ms=0',
    'num.partitions=1',
    '',
  ].join('\n');
  await writeFile(path.join(home, 'server.properties'), properties);
  const logging = kafkaLogging(c.kafkaVersion);
  // Only the current version's logging config in the folder, so what it holds is what the broker reads.
  for (const other of ['log4j.properties', 'log4j2.yaml'].filter((f) => f !== logging.file)) await rm(path.join(home, other), { force: true });
  await writeFile(path.join(home, logging.file), logging.config);
  if (!existsSync(path.join(data, 'meta.properties'))) {
    p.say(`formatting Kafka ${c.kafkaVersion} storage (KRaft)`);
    // A cluster id is a random UUID in Kafka's text form: 16 bytes, URL-safe base64 without padding, and,
    // as Kafka's own Uuid.randomUuid makes them, never starting with "-" (it would read as an option).
    let clusterId = randomBytes(16).toString('base64url');
    while (clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
    const format = kafkaJava(c, libs, 'kafka.tools.StorageTool', ['format', '-t', clusterId, '-c', path.join(home, 'server.properties'), '--ignore-formatted']);
    await p.run(format.file, format.args, { cwd: home });
    await writeFile(path.join(home, FORMATTED_BY), `${c.kafkaVersion}\n`);
  }
  return kafkaJava(c, libs, 'kafka.Kafka', [path.join(home, 'server.properties')]);
}

// ── ClickHouse ──

async function prepareClickHouse(c: ServicesConfig): Promise<Command> {
  const home = path.join(c.dir, 'clickhouse');
  await mkdir(path.join(home, 'data'), { recursive: true });
  await mkdir(path.join(home, 'tmp'), { recursive: true });
  const server = findExecutable('clickhouse-server');
  if (server === undefined) throw new Error('clickhouse-server not found');
  const { host, port, tcpPort, interserverPort } = c.clickhouse;
  const users = path.join(home, 'users.xml');
  await writeFile(users, usersConfig(await readFile('/etc/clickhouse-server/users.xml', 'utf8'), mergeThreads()));
  return {
    file: server,
    // Its inserts and merges are background work with a second of freshness budget; a write's answer never
    // waits on them, but at the same priority their bursts took the cores from the path it does wait on
    // (docs/operations.md, "Sharing one machine", has the figures).
    niceness: 10,
    // Debian's config with everything that is per-server overridden on the command line, without systemd.
    args: [
      '--config-file=/etc/clickhouse-server/config.xml',
      '--',
      `--path=${path.join(home, 'data')}/`,
      `--tmp_path=${path.join(home, 'tmp')}/`,
      `--logger.log=${path.join(home, 'ch.log')}`,
      `--logger.errorlog=${path.join(home, 'ch.err.log')}`,
      `--listen_host=${host}`,
      `--http_port=${port}`,
      `--tcp_port=${tcpPort}`,
      `--interserver_http_port=${interserverPort}`,
      `--users_config=${users}`,
    ],
  };
}

/**
 * Threads for background merges: PUSHBASE_CLICKHOUSE_MERGE_THREADS, else the machine's cores. Debian's
 * 18.16 default is 16, and on a 2-core machine that runs every server and service, merges of the parts a
 * burst of inserts left took both cores for seconds and stalled the services' answers (bench:distributed:
 * clusters of acknowledgements 10× slower than the median while the projector's inserts slowed from
 * ~100 ms to ~800 ms). A cluster's ClickHouse runs on machines of its own and is configured there.
 */
function mergeThreads(): number {
  const raw = process.env.PUSHBASE_CLICKHOUSE_MERGE_THREADS;
  const n = raw === undefined || raw === '' ? os.cpus().length : Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`PUSHBASE_CLICKHOUSE_MERGE_THREADS must be an integer in 1..64, got "${raw}"`);
  return n;
}

/** Debian's users.xml with background_pool_size set in the default profile (where 18.16 reads it at start). */
export function usersConfig(debian: string, threads: number): string {
  const at = debian.search(/<profiles>(?:\s|<!--[\s\S]*?-->)*<default>/);
  if (at < 0) throw new Error('/etc/clickhouse-server/users.xml has no <profiles><default>: cannot set background_pool_size');
  const end = debian.indexOf('<default>', at) + '<default>'.length;
  return `${debian.slice(0, end)}\n            <background_pool_size>${threads}</background_pool_size>${debian.slice(end)}`;
}

// ── Redis ──

async function prepareRedis(c: ServicesConfig): Promise<Command> {
  const home = path.join(c.dir, 'redis');
  await mkdir(home, { recursive: true });
  const server = findExecutable('redis-server');
  if (server === undefined) throw new Error('redis-server not found');
  return {
    file: server,
    args: [
      '--bind',
      c.redis.host,
      '--port',
      String(c.redis.port),
      '--dir',
      home,
      '--logfile',
      path.join(home, 'redis.log'),
      '--daemonize',
      'no',
      // Append-only, fsync'd every second, no RDB snapshots: Kafka and ClickHouse in this folder survive
      // `down` and `up`, so Redis does too (key hashes and the schema store stay consistent with them).
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      // Protected mode answers only loopback peers when there is no password. A server on another address
      // (the cluster's, deploy/cluster/deps.ts: readServicesConfig never yields one) serves its pods.
      ...(/^127\./.test(c.redis.host) || c.redis.host === 'localhost' || c.redis.host === '::1' ? [] : ['--protected-mode', 'no']),
    ],
  };
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

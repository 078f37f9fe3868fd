import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { findExecutable, type Provisioner } from '../proc';
import type { ServicesConfig } from './config';
import { kafkaAnswers } from './probes';
import { serverSpec, type Command, type ServerSpec } from './server';

/*
 * Kafka for deploy/local: the broker's jars collected once per version by Maven into kafka-<version>/libs,
 * and a single KRaft node (broker and controller) in kafka/: server.properties, the logging config, data/
 * (formatted once), logs/.
 */

const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';

/** Kafka as local-servers.ts runs it. */
export function kafkaServer(c: ServicesConfig): ServerSpec {
  return serverSpec(c, 'kafka', {
    startDeadlineMs: 180_000,
    answers: () => kafkaAnswers(c.kafka),
    packages: [
      { executable: 'java', pkg: 'default-jre-headless' },
      { executable: 'mvn', pkg: 'maven' },
    ],
    prepare: (p) => prepareKafka(c, p),
  });
}

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

export async function kafkaLibs(c: ServicesConfig, p: Provisioner): Promise<string> {
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

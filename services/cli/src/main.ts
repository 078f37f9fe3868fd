#!/usr/bin/env node
import { Command } from 'commander';
import { connectClickHouse, migrate } from '@pushbase/clickhouse';
import { compact, listSegments, loadConfig, lockDataDirOfKnownFormat, startEmbedded } from '@pushbase/embedded';
import { ACCOUNTS_TOPIC_PARTITIONS, createKafka, ensureTopic } from '@pushbase/kafka';
import { loadRecordsConfig, runRecords } from '@pushbase/records';
import { loadSchemaConfig, runSchema } from '@pushbase/schema';
import { loadGatewayConfig, runGateway } from '@pushbase/gateway';
import { addAdminCommands } from './admin-commands';
import { DistributedStack, SERVICES, type ServiceName } from './distributed';
import { tuneRequestPathHeap } from './heap';
import { createLogger, startTracing, type JsonLogger, type TelemetryConfig } from '@pushbase/telemetry';
import { formatResult, loadMigrateConfig, loadProjectorConfig, loadReplayConfig, ReplayRefused, runProjector, runReplay, yieldCpu, type ReplayFlags, type RunningProjector } from '@pushbase/projector';

/**
 * Runs a server until SIGTERM or SIGINT, then stops it and exits 0 (1 when stopping fails). The handlers go
 * in before the server starts: a SIGTERM with no listener kills Node on the spot, and one sent right after
 * the "listening" line (a supervisor, a test) could arrive before the start returned. A signal during the
 * start stops the server once it is up. A second signal ends the process at once when
 * `secondSignalExits`, else only while the server is still starting.
 */
async function untilSignalled<T extends { stop(): Promise<void> }>(start: () => Promise<T>, log: JsonLogger, secondSignalExits: boolean): Promise<void> {
  const server: { running?: T; signalled?: string } = {};
  const stop = (running: T, signal: string): void => {
    log.info({ signal }, 'shutting down');
    running.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ error: e instanceof Error ? e.message : String(e) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const shutdown = (signal: string): void => {
    if (server.signalled !== undefined) {
      if (secondSignalExits || server.running === undefined) process.exit(1);
      return;
    }
    server.signalled = signal;
    if (server.running !== undefined) stop(server.running, signal);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  server.running = await start();
  if (server.signalled !== undefined) stop(server.running, server.signalled);
}

/**
 * A server with the process's tracing (off unless OTEL_TRACES_EXPORTER asks): started before the server,
 * so its first request is traced, and shut down after it, so the last spans are sent before the exit.
 */
async function traced(telemetry: TelemetryConfig | undefined, service: string, start: () => Promise<{ stop(): Promise<void> }>): Promise<{ stop(): Promise<void> }> {
  const tracing = telemetry === undefined ? undefined : startTracing(telemetry.traces, service);
  let running: { stop(): Promise<void> };
  try {
    running = await start();
  } catch (e) {
    await tracing?.shutdown();
    throw e;
  }
  return { stop: () => running.stop().finally(() => tracing?.shutdown()) };
}

/**
 * `pushbase serve`: every service in one process, on the embedded default. A second signal while it stops
 * is ignored (while it starts, it ends the process: safe at any point, the log and snapshots survive kill -9).
 */
const serve = async (): Promise<void> => {
  const config = loadConfig();
  const logger = createLogger({ service: 'pushbase', level: config.telemetry?.logLevel ?? 'info' });
  await untilSignalled(() => traced(config.telemetry, 'pushbase', () => startEmbedded(config, logger)), logger, false);
};

/** The lines of a command that ends (compact, migrate). */
const commandLog = (): JsonLogger => createLogger({ service: 'pushbase' });

/**
 * `pushbase compact`: on a stopped server's data directory, folds every segment but the last into a
 * snapshot and deletes what it covers (a running server does this by itself, from its live state).
 */
async function compactOffline(): Promise<void> {
  const { dataDir, idempotencyTtlMs } = loadConfig();
  const lock = await lockDataDirOfKnownFormat(dataDir);
  const log = commandLog();
  try {
    const last = (await listSegments(dataDir)).at(-1);
    const result = last === undefined || last.base === 0 ? undefined : await compact({ dir: dataDir, sealedEnd: last.base, retainSnapshots: 1, idempotencyTtlMs });
    if (result === undefined) {
      log.info({ data_dir: dataDir }, 'nothing to compact');
      return;
    }
    log.info(
      {
        position: result.snapshot.position,
        ms: Math.round(result.ms),
        datasets: result.snapshot.datasets,
        records: result.snapshot.records,
        snapshot_bytes: result.snapshot.bytes,
        segments_deleted: result.segmentsDeleted.length,
      },
      'compaction finished',
    );
  } finally {
    await lock.release();
  }
}

/**
 * `pushbase migrate`: creates the topic of dataset events and the accounts topic when they are missing (an existing one is checked and
 * reported, never changed) and creates or upgrades the ClickHouse projection's tables; running it again
 * changes nothing.
 */
async function migrateDataPath(): Promise<void> {
  const config = loadMigrateConfig();
  const log = commandLog();
  const admin = createKafka({ brokers: config.kafka.brokers, clientId: 'pushbase-migrate' }).admin();
  await admin.connect();
  try {
    const topic = await ensureTopic(admin, { topic: config.kafka.topic, partitions: config.kafka.partitions, replicationFactor: config.kafka.replicationFactor });
    log.info({ topic: config.kafka.topic, partitions: topic.partitions, notes: topic.notes }, topic.created ? 'topic created' : 'topic present');
    // The accounts topic: the same settings (everything kept, never compacted), one partition (account-log.ts).
    const accounts = await ensureTopic(admin, { topic: config.kafka.accountsTopic, partitions: ACCOUNTS_TOPIC_PARTITIONS, replicationFactor: config.kafka.replicationFactor });
    log.info({ topic: config.kafka.accountsTopic, partitions: accounts.partitions, notes: accounts.notes }, accounts.created ? 'topic created' : 'topic present');
  } finally {
    await admin.disconnect();
  }
  const { url, database } = config.clickhouse;
  const conn = connectClickHouse(url);
  try {
    const result = await migrate(conn, database);
    log.info({ url, database, applied: result.applied, already_applied: result.alreadyApplied }, 'migrations applied');
  } finally {
    await conn.close();
  }
}

/**
 * `pushbase projector`: a member of the projector consumer group, folding dataset events from Kafka into
 * ClickHouse. SIGTERM/SIGINT finish the running batch, write it, commit its offsets and exit 0; an error
 * it must not retry (a bug, an event it cannot read) exits 1 without committing, so nothing is skipped.
 */
async function projector(): Promise<void> {
  // Filled once started; a fatal error may come before that.
  const started: { running?: RunningProjector } = {};
  const failed = (): void => {
    // The events before the failing one are written and committed (it is not), then exit non-zero.
    void (started.running?.stop() ?? Promise.resolve()).finally(() => process.exit(1));
  };
  const config = loadProjectorConfig();
  const log = createLogger({ service: 'projector', level: config.telemetry.logLevel });
  // Background work: the request path gets the CPU first on a shared host (services/projector/src/priority.ts).
  if (config.nice > 0) {
    const yielded = await yieldCpu(config.nice);
    if (yielded.problem === undefined) log.info({ nice: yielded.nice, autogroup: yielded.autogroup }, 'cpu priority lowered');
    else log.warn({ nice: yielded.nice, autogroup: yielded.autogroup, problem: yielded.problem }, 'cpu priority not fully lowered');
  }
  await untilSignalled(() => traced(config.telemetry, 'pushbase-projector', async () => (started.running = await runProjector(config, { onFatal: failed }))), log, false);
}

/**
 * `pushbase schema`: the distributed schema service (find-or-create, get, delete) over gRPC. SIGTERM/SIGINT
 * turn its health NOT_SERVING, drain the calls in flight, close Kafka and Redis and exit 0; a second signal
 * ends the process at once (a change cut short is repaired by the next one: services/schema/src/changes.ts).
 */
const schemaService = async (): Promise<void> => {
  tuneRequestPathHeap();
  const config = loadSchemaConfig();
  await untilSignalled(() => traced(config.telemetry, 'pushbase-schema', () => runSchema(config)), createLogger({ service: 'schema', level: config.telemetry.logLevel }), true);
};

/**
 * `pushbase records`: the distributed record-command service over gRPC. SIGTERM/SIGINT turn its health
 * NOT_SERVING, let the calls in flight finish (their appends acknowledged or refused), close Kafka and
 * Redis and exit 0; a second signal exits at once.
 */
const recordsService = async (): Promise<void> => {
  tuneRequestPathHeap();
  const config = loadRecordsConfig();
  await untilSignalled(() => traced(config.telemetry, 'pushbase-records', () => runRecords(config)), createLogger({ service: 'records', level: config.telemetry.logLevel }), true);
};

/**
 * `pushbase replay`: rebuilds the ClickHouse projection and the Redis schema store from the topic and
 * swaps them in (services/projector/src/replay.ts). Exit 0 done, 1 the rebuild differs from the live state
 * (--verify, --verify-only), 2 could not replay.
 */
async function replay(flags: ReplayFlags): Promise<void> {
  let code = 0;
  try {
    const result = await runReplay(loadReplayConfig(flags));
    for (const line of formatResult(result)) process.stdout.write(`${line}\n`);
    if (result.verify !== undefined && !result.verify.equal) code = 1;
  } catch (e) {
    process.stderr.write(`pushbase replay: ${e instanceof ReplayRefused ? 'refused: ' : ''}${e instanceof Error ? e.message : String(e)}\n`);
    code = 2;
  }
  process.exit(code);
}

/**
 * `pushbase gateway`: the public API and the admin listener of the distributed mode. SIGTERM/SIGINT stop
 * accepting, let in-flight requests finish, close the clients and exit 0; a second signal exits at once.
 */
const gateway = async (): Promise<void> => {
  tuneRequestPathHeap();
  const config = loadGatewayConfig();
  const logger = createLogger({ service: 'gateway', level: config.telemetry?.logLevel ?? 'info' });
  await untilSignalled(() => traced(config.telemetry, 'pushbase-gateway', () => runGateway(config, logger)), logger, true);
};

/**
 * `pushbase distributed` (`npm run start:distributed`): migrate, then the projector, schema, records and
 * gateway services as separate processes in the foreground, each line of theirs prefixed with its name
 * (services/cli/src/distributed.ts). SIGINT/SIGTERM stop them in order and exit 0; a service that dies
 * unexpectedly is reported, the others are stopped, and the exit status is 1.
 */
async function distributed(): Promise<void> {
  const width = 'supervisor'.length;
  const print = (service: ServiceName | 'migrate' | 'supervisor', line: string): void => {
    process.stdout.write(`${service.padEnd(width)} | ${line}\n`);
  };
  const bundle = process.argv[1] ?? '';
  let stack: DistributedStack | undefined;
  let exitCode: number | undefined;
  const stopStack = (running: DistributedStack, code: number): void => {
    void running.stop().then(
      (exits) => {
        print('supervisor', `stopped: ${Object.entries(exits).map(([s, e]) => `${s} ${e.signal ?? e.code}`).join(', ')}`);
        process.exit(code);
      },
      () => process.exit(1),
    );
  };
  const stopAll = (code: number, why: string): void => {
    if (exitCode !== undefined) {
      // A second Ctrl-C: stop waiting for the services.
      if (code === 0) process.exit(1);
      return;
    }
    exitCode = code;
    print('supervisor', `${why}; stopping the services (gateway, then records and schema, projector last)`);
    // While starting, the services are stopped as soon as the start is over (none is left behind).
    if (stack !== undefined) stopStack(stack, code);
  };
  process.on('SIGINT', () => stopAll(0, 'SIGINT'));
  process.on('SIGTERM', () => stopAll(0, 'SIGTERM'));
  try {
    stack = await DistributedStack.start({
      bundle,
      env: process.env,
      detached: true,
      onLine: print,
      onUnexpectedExit: (service, exit) => stopAll(1, `${service} exited unexpectedly (${exit.signal ?? `code ${exit.code}`})`),
    });
  } catch (e) {
    print('supervisor', `could not start: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  }
  // Services must not outlive a supervisor that ends without stopping them (an uncaught error).
  process.on('exit', () => stack?.signalAllNow('SIGTERM'));
  if (exitCode !== undefined) {
    stopStack(stack, exitCode);
    return;
  }
  const { port, adminPort, certFile } = stack.gateway;
  print('supervisor', JSON.stringify({ msg: 'listening', port, admin_port: adminPort, cert_file: certFile, schema_address: stack.addresses.schema, records_address: stack.addresses.records, metrics_ports: Object.fromEntries(SERVICES.map((s) => [s, stack.metricsPort(s) ?? null])) }));
}

const REPLAY_HELP = `
Reads the topic (PUSHBASE_KAFKA_TOPIC) from its beginning up to the end offsets taken at the start, folds it
with the projector's own code into a fresh ClickHouse database (<database>_replay_<id>) and a fresh Redis
prefix (<prefix>replay-<id>:), then swaps them in: RENAME TABLE moves the live tables to
<database>_retired_<id> and the fresh ones into their place; one Redis MULTI/EXEC renames the fresh schema
keys onto the live names. The live tables and keys serve reads until the swap. Accounts, quotas and key
hashes are rebuilt the same way from the accounts topic (PUSHBASE_KAFKA_ACCOUNTS_TOPIC, by default
<topic>.accounts) and swapped in after the schema keys.

Stop every \`pushbase projector\` of PUSHBASE_PROJECTOR_GROUP first: replay refuses to run while the group has
members. At the swap it sets the group's offsets to where the rebuild ended, so restarted projectors apply
exactly the events written meanwhile. Start them once replay has finished.

--verify compares the rebuilt state with the live one before swapping: every dataset's head (definition,
incarnation, record count, last position), the listing, every live dataset's records in order, and every
key of the Redis schema store. If anything differs it prints a summary, swaps nothing and exits 1.
--verify-only does the same and never swaps (the rebuild is dropped afterwards).

Exit status: 0 done (and equal, when verified), 1 the rebuilt state differs, 2 replay could not run.`;

const program = new Command('pushbase').description('Self-hostable dataset-push service speaking the Geckoboard datasets API');
program
  .command('serve', { isDefault: true })
  .description('run every service in one process (event log in PUSHBASE_DATA_DIR, HTTPS on PUSHBASE_PORT)')
  .action(serve);
program
  .command('compact')
  .description('compact the event log of a stopped server in PUSHBASE_DATA_DIR into a snapshot')
  .action(compactOffline);
program
  .command('migrate')
  .description('create the event topic when missing (PUSHBASE_KAFKA_*) and create or upgrade the ClickHouse tables (PUSHBASE_CLICKHOUSE_*); idempotent')
  .action(migrateDataPath);

program
  .command('projector')
  .description('fold dataset events from Kafka into ClickHouse as a consumer group member (PUSHBASE_KAFKA_*, PUSHBASE_CLICKHOUSE_*, PUSHBASE_PROJECTOR_*)')
  .action(projector);

program
  .command('schema')
  .description('serve the distributed schema service over gRPC (PUSHBASE_GRPC_HOST, PUSHBASE_SCHEMA_*, PUSHBASE_KAFKA_*, PUSHBASE_REDIS_*)')
  .action(schemaService);
program
  .command('records')
  .description('serve the distributed record-command service over gRPC (PUSHBASE_GRPC_HOST, PUSHBASE_RECORDS_*, PUSHBASE_KAFKA_*, PUSHBASE_REDIS_*)')
  .action(recordsService);
program
  .command('gateway')
  .description('the public API and the admin listener of the distributed mode (PUSHBASE_SCHEMA_ADDRESS, PUSHBASE_RECORDS_ADDRESS, PUSHBASE_REDIS_*, PUSHBASE_CLICKHOUSE_*)')
  .action(gateway);
program
  .command('distributed')
  .description('migrate, then run the projector, schema, records and gateway services as separate processes in the foreground (npm run start:distributed)')
  .action(distributed);

program
  .command('replay')
  .description('rebuild the ClickHouse projection and the Redis schema store from the Kafka topic into fresh tables and keys, then swap them in')
  .option('--verify', 'compare the rebuilt state with the live one first; swap only if equal, else print the differences and exit 1')
  .option('--verify-only', 'rebuild into scratch tables and keys, compare with the live state, drop the scratch; never swap')
  .option('--keep-retired', 'keep the replaced tables and schema keys (names printed) instead of dropping them')
  .option('--no-progress', 'do not draw the progress bar')
  .addHelpText('after', REPLAY_HELP)
  .action((options: { verify?: boolean; verifyOnly?: boolean; keepRetired?: boolean; progress: boolean }) =>
    replay({ verify: options.verify === true, verifyOnly: options.verifyOnly === true, keepRetired: options.keepRetired === true, progress: options.progress }),
  );

addAdminCommands(program);

program.parseAsync(process.argv).catch((e: unknown) => {
  process.stderr.write(`pushbase: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});

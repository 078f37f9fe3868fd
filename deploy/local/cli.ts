import * as path from 'node:path';
import { runCommand } from '../command';
import { legacyKafkaConfig, readServicesConfig } from './config';
import { down, SERVER_NAMES, status, up } from './local-servers';
import type { ServerName } from './server';

/*
 * `npm run services:up|down|status`: Kafka, ClickHouse and Redis as local processes on loopback.
 * Always the local path: containers started by testcontainers live only as long as the process that
 * started them (its reaper removes them), so they belong to a test run, not to a command that exits.
 * TypeScript rather than bash: jest's global setup runs the same code in its own process (where containers
 * must live), the probes use the project's own clients (kafkajs, ioredis), and it is typechecked and linted.
 */

const USAGE = 'usage: services up|down|status [kafka|clickhouse|redis …]   (down --kill: SIGKILL, as a crash)\n';

async function main(argv: readonly string[], say: (line: string) => void): Promise<number> {
  const verb = argv[0];
  const rest = argv.slice(1);
  const kill = rest.includes('--kill');
  const named = rest.filter((a) => a !== '--kill');
  const unknown = named.filter((n) => !(SERVER_NAMES as readonly string[]).includes(n));
  if (unknown.length > 0 || (kill && verb !== 'down')) {
    process.stderr.write(USAGE);
    return 2;
  }
  // One server or a few (stop or restart just Kafka, say); all three when none is named.
  const names = named.length === 0 ? SERVER_NAMES : (named as ServerName[]);
  const config = readServicesConfig(process.env, path.resolve(__dirname, '..', '..'));
  switch (verb) {
    case 'up': {
      const t0 = Date.now();
      const started = await up(config, say, names);
      say(`up in ${((Date.now() - t0) / 1000).toFixed(1)} s (${started.length === 0 ? 'nothing to start' : `started ${started.join(', ')}`}); folder ${config.dir}`);
      return 0;
    }
    case 'down': {
      const signal = kill ? 'SIGKILL' : 'SIGTERM';
      const stopped: string[] = await down(config, say, names, { signal });
      // The int-kafka-3.9 project's second broker lives in the same folder (legacy/); a killed test run
      // leaves it running, so `down` of Kafka stops it too.
      if (names.includes('kafka') && (await down(legacyKafkaConfig(config), say, ['kafka'], { signal })).length > 0) stopped.push('legacy kafka');
      say(stopped.length === 0 ? 'nothing of ours was running' : `stopped ${stopped.join(', ')}`);
      return 0;
    }
    case 'status': {
      const all = await status(config);
      for (const s of all.filter((x) => names.includes(x.name))) {
        const where = `${s.endpoint.host}:${s.endpoint.port}`;
        const who = s.pid !== undefined ? `pid ${s.pid}` : s.answering ? 'not started by this folder' : '-';
        process.stdout.write(`${s.name.padEnd(11)}${where.padEnd(22)}${who.padEnd(28)}${s.answering ? 'answering' : 'not answering'}\n`);
      }
      process.stdout.write(`folder: ${config.dir}\n`);
      return 0;
    }
    case undefined:
    default:
      process.stderr.write(USAGE);
      return 2;
  }
}

void runCommand('services', main);

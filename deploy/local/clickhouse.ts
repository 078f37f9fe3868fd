import os from 'node:os';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { findExecutable } from '../proc';
import type { ServicesConfig } from './config';
import { clickhouseAnswers } from './probes';
import { serverSpec, type Command, type ServerSpec } from './server';

/* ClickHouse for deploy/local: Debian's clickhouse-server with its data, tmp and logs in clickhouse/. */

/** ClickHouse as local-servers.ts runs it. */
export function clickhouseServer(c: ServicesConfig): ServerSpec {
  return serverSpec(c, 'clickhouse', {
    startDeadlineMs: 90_000,
    answers: () => clickhouseAnswers(c.clickhouse),
    packages: [{ executable: 'clickhouse-server', pkg: 'clickhouse-server' }],
    prepare: () => prepareClickHouse(c),
  });
}

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

import { mkdir } from 'node:fs/promises';
import * as path from 'node:path';
import { findExecutable } from '../proc';
import type { ServicesConfig } from './config';
import { redisAnswers } from './probes';
import { serverSpec, type Command, type ServerSpec } from './server';

/* Redis for deploy/local: Debian's redis-server with its append-only file and log in redis/. */

/** Redis as local-servers.ts runs it. */
export function redisServer(c: ServicesConfig): ServerSpec {
  return serverSpec(c, 'redis', {
    startDeadlineMs: 30_000,
    answers: () => redisAnswers(c.redis),
    packages: [{ executable: 'redis-server', pkg: 'redis-server' }],
    prepare: () => prepareRedis(c),
  });
}

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

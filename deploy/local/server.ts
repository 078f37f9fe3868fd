import * as path from 'node:path';
import type { Provisioner } from '../proc';
import type { Endpoint, ServicesConfig } from './config';

/* What deploy/local/local-servers.ts needs to know of each server it runs (kafka.ts, clickhouse.ts, redis.ts). */

export type ServerName = 'kafka' | 'clickhouse' | 'redis';

export interface Command {
  readonly file: string;
  readonly args: readonly string[];
  /** Run below the other servers' CPU priority: added to this script's niceness, as nice(1) does. */
  readonly niceness?: number;
}

export interface ServerSpec {
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

/** A server's spec: its endpoint from the configuration and its folder `<dir>/<name>`, with what is its own. */
export function serverSpec(c: ServicesConfig, name: ServerName, own: Omit<ServerSpec, 'name' | 'endpoint' | 'home'>): ServerSpec {
  return { name, endpoint: c[name], home: path.join(c.dir, name), ...own };
}

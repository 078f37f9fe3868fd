import * as path from 'node:path';
import { readServicesConfig, type ServicesConfig } from '../local/config';
import { kafkaJarsDir } from '../local/kafka';
import { DEPS_IP, type ClusterConfig } from './config';

/*
 * Kafka, ClickHouse and Redis for pushbase's pods, run by deploy/local's own starters but inside the
 * cluster's network namespace, on DEPS_IP (a second address of the node's bridge): outside the cluster as
 * a managed Kafka, ClickHouse or Redis would be, reached from the pods through Services with explicit
 * EndpointSlices (pushbase.ts). Kafka advertises DEPS_IP, the address the pods connect to.
 *
 * deploy/local/config.ts refuses any address but loopback for what it parses from the environment; this
 * config is built here, for this one address, and never comes from the environment.
 */

export function depsConfig(c: ClusterConfig): ServicesConfig {
  // The Kafka version and the jars folder of the host's services (collected there once, on the host: the
  // namespace has no network to fetch them).
  const host = readServicesConfig(process.env, c.repoRoot);
  return {
    dir: path.join(c.dir, 'deps'),
    kafkaVersion: host.kafkaVersion,
    kafkaJarsDir: kafkaJarsDir(host),
    mode: 'local',
    kafka: { host: DEPS_IP, port: 9092, controllerPort: 9093 },
    clickhouse: { host: DEPS_IP, port: 8123, tcpPort: 9000, interserverPort: 9009 },
    redis: { host: DEPS_IP, port: 6379 },
    legacyKafka: host.legacyKafka,
    // For the host (tests that wait for the projector, people with a Kafka tool): the namespace's own
    // loopback, which a bridge in pushbase.ts makes the host's 127.0.0.1:<kafkaHostPort>. The address
    // advertised is the host's, the one its clients reach through the bridge.
    kafkaHostListener: { host: '127.0.0.1', port: c.kafkaHostPort },
  };
}

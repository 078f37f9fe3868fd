import { isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';
import { blankToUndefined, parseEnv } from '@pushbase/config';
import { clickhouseEnv } from '@pushbase/clickhouse';
import { grpcTokenEnv } from '@pushbase/grpc';
import { redisEnv } from '@pushbase/redis';
import { telemetryConfigOf, telemetryEnv, type TelemetryConfig } from '@pushbase/telemetry';
import { listenerConfigOf, listenerEnv, tlsPairRefinement, type ListenerConfig } from './listener-config';

/*
 * `pushbase gateway`, the distributed gateway: the listeners' variables of `pushbase serve`
 * (docs/configuration.md), where the two gRPC services answer, and the Redis and ClickHouse it reads. One schema,
 * parsed once at start.
 */
const HOST_PORT = /^[^\s:,]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/;
const address = (name: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string({ error: `${name} is required: host:port of the service (the "listening" line of its process shows its grpc_port)` })
      .refine((v) => HOST_PORT.test(v), `${name} must be host:port, such as 127.0.0.1:50051`),
  );

/**
 * The records service may be given as several replicas: `ip:port` entries separated by commas, all IPv4 or
 * all `[IPv6]:port` (the gateway balances its calls over them, round robin: @pushbase/grpc's channelTarget).
 * IP literals only: one connection per replica needs addresses that do not change under the gateway.
 */
const replicaFamily = (entry: string): 4 | 6 | undefined => {
  const v4 = /^([^:]+):\d{1,5}$/.exec(entry);
  if (v4 !== null) return isIPv4(v4[1]!) ? 4 : undefined;
  const v6 = /^\[([^\]]+)\]:\d{1,5}$/.exec(entry);
  return v6 !== null && isIPv6(v6[1]!) ? 6 : undefined;
};
const validAddressList = (v: string): boolean => {
  const entries = v.split(',');
  if (entries.length === 1) return HOST_PORT.test(v);
  const families = new Set(entries.map(replicaFamily));
  return families.size === 1 && !families.has(undefined) && new Set(entries).size === entries.length;
};
const addressList = (name: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string({ error: `${name} is required: host:port of the service, or ip:port of each replica separated by commas` })
      .refine(validAddressList, `${name} must be host:port (such as 127.0.0.1:50052), or replicas' ip:port separated by commas, all IPv4 or all [IPv6]:port, each once`),
  );

const schema = z
  .object({
    ...listenerEnv,
    ...redisEnv,
    ...clickhouseEnv,
    ...telemetryEnv,
    PUSHBASE_SCHEMA_ADDRESS: address('PUSHBASE_SCHEMA_ADDRESS'),
    PUSHBASE_RECORDS_ADDRESS: addressList('PUSHBASE_RECORDS_ADDRESS'),
    // Sent with every gRPC call; the services' own (they refuse calls without it when they have one).
    ...grpcTokenEnv,
  })
  .refine(...tlsPairRefinement);

export interface GatewayConfig extends ListenerConfig {
  readonly schemaAddress: string;
  /** host:port, or the replicas' ip:port separated by commas. */
  readonly recordsAddress: string;
  /** PUSHBASE_GRPC_TOKEN; undefined when the services take calls without one (on loopback). */
  readonly grpcToken: string | undefined;
  readonly redis: { readonly url: string; readonly prefix: string };
  readonly clickhouse: { readonly url: string; readonly database: string };
  /** Log level and tracing; off when not given. */
  readonly telemetry?: TelemetryConfig;
}

/** Parses the environment; a bad or missing value throws with every problem listed. */
export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const c = parseEnv(schema, env);
  return Object.freeze({
    ...listenerConfigOf(c),
    schemaAddress: c.PUSHBASE_SCHEMA_ADDRESS,
    recordsAddress: c.PUSHBASE_RECORDS_ADDRESS,
    grpcToken: c.PUSHBASE_GRPC_TOKEN,
    redis: Object.freeze({ url: c.PUSHBASE_REDIS_URL, prefix: c.PUSHBASE_REDIS_PREFIX }),
    clickhouse: Object.freeze({ url: c.PUSHBASE_CLICKHOUSE_URL, database: c.PUSHBASE_CLICKHOUSE_DATABASE }),
    telemetry: telemetryConfigOf(c),
  });
}

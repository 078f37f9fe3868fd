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
const address = (name: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string({ error: `${name} is required: host:port of the service (the "listening" line of its process shows its grpc_port)` })
      .refine((v) => /^[^\s:]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/.test(v), `${name} must be host:port, such as 127.0.0.1:50051`),
  );

const schema = z
  .object({
    ...listenerEnv,
    ...redisEnv,
    ...clickhouseEnv,
    ...telemetryEnv,
    PUSHBASE_SCHEMA_ADDRESS: address('PUSHBASE_SCHEMA_ADDRESS'),
    PUSHBASE_RECORDS_ADDRESS: address('PUSHBASE_RECORDS_ADDRESS'),
    // Sent with every gRPC call; the services' own (they refuse calls without it when they have one).
    ...grpcTokenEnv,
  })
  .refine(...tlsPairRefinement);

export interface GatewayConfig extends ListenerConfig {
  readonly schemaAddress: string;
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

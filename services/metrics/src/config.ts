import { z } from 'zod';
import { blankToUndefined } from '@pushbase/config';

/*
 * The metrics listener's variables, for the services without an HTTP listener of their own (schema,
 * records, projector); each spreads them into its one config schema. The gateway and `pushbase serve`
 * serve /metrics on their admin listener instead. Unset and empty both mean "use the default".
 */

export const metricsEnv = {
  // Loopback by default, like the admin listener; a chart sets 0.0.0.0 so Prometheus reaches the pod.
  PUSHBASE_METRICS_HOST: z.preprocess(blankToUndefined, z.string().default('127.0.0.1')),
  // 0: the system picks a free port and the "listening" line says which (metrics_port), so several services
  // on one host never collide; a chart sets a fixed one.
  PUSHBASE_METRICS_PORT: z.preprocess(blankToUndefined, z.coerce.number().int().min(0).max(65_535).default(0)),
};

export interface MetricsConfig {
  readonly host: string;
  readonly port: number;
}

export const metricsConfigOf = (env: { PUSHBASE_METRICS_HOST: string; PUSHBASE_METRICS_PORT: number }): MetricsConfig =>
  Object.freeze({ host: env.PUSHBASE_METRICS_HOST, port: env.PUSHBASE_METRICS_PORT });

import { collectDefaultMetrics, Registry } from 'prom-client';

/*
 * One Prometheus registry per process, made by its composition root and handed down to what it measures.
 * prom-client's global default registry is never used: tests run several services in one process, and two
 * of them registering `pushbase_http_requests_total` in one registry would throw (or, worse, mix their counts).
 */

export interface MetricsRegistryOptions {
  /**
   * Node's process metrics (CPU, memory, event-loop delay, GC, handles), as prom-client collects them.
   * Default true; tests that build many registries in one process turn them off (each set keeps an
   * event-loop-delay monitor and a GC observer running).
   */
  readonly processMetrics?: boolean;
}

export function createMetricsRegistry(options: MetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}

export type { Registry } from 'prom-client';

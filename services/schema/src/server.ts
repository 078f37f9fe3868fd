import { RequestScope, type PushbaseServices } from '@pushbase/contracts';
import { createGrpcServer, requestLogger, type GrpcCallMetrics, type GrpcServer, type Logger } from '@pushbase/grpc';
import { createDistributedSchema, type DistributedSchema, type DistributedSchemaDeps } from './service';

export interface SchemaServerDeps extends Omit<DistributedSchemaDeps, 'log'> {
  readonly log: Logger;
  /** The loaded protos; loaded anew when not given (tests starting many servers pass one). */
  readonly protos?: PushbaseServices;
  /** Times every gRPC call it answers (docs/metrics.md). */
  readonly metrics?: GrpcCallMetrics;
  /** PUSHBASE_GRPC_TOKEN: calls without it are refused (@pushbase/grpc auth.ts). */
  readonly token?: string | undefined;
}

export interface SchemaServer extends DistributedSchema {
  /** Unstarted: listen() binds it and turns its health SERVING. */
  readonly grpc: GrpcServer;
}

/**
 * The schema service behind a gRPC server (pushbase.v1.SchemaService and grpc.health.v1), unstarted. Its
 * log lines (a roll-forward, a lease left to expire) carry the gateway's request id of the call they
 * belong to.
 */
export function createSchemaServer(deps: SchemaServerDeps): SchemaServer {
  const requestScope = new RequestScope();
  const { log, protos, metrics, token, ...rest } = deps;
  const schema = createDistributedSchema({ ...rest, log: requestLogger(log, requestScope) });
  const grpc = createGrpcServer({
    schema: schema.service,
    ...(schema.accounts === undefined ? {} : { accounts: schema.accounts }),
    log,
    requestScope,
    ...(protos === undefined ? {} : { protos }),
    ...(metrics === undefined ? {} : { metrics }),
    ...(token === undefined ? {} : { token }),
  });
  return { ...schema, grpc };
}

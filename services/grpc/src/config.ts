import { z } from 'zod';
import { blankToUndefined, integer, text } from '@pushbase/config';
import { GRPC_TOKEN_PATTERN, GRPC_TOKEN_PROBLEM, GRPC_TOKEN_REQUIRED, isLoopbackHost } from './auth';

/* The gRPC variables, read the same way by the gateway (a client) and the schema and records services. */

/** The secret every call must carry; required unless PUSHBASE_GRPC_HOST is loopback (GRPC_TOKEN_REQUIRED). */
export const grpcTokenEnv = { PUSHBASE_GRPC_TOKEN: z.preprocess(blankToUndefined, z.string().regex(GRPC_TOKEN_PATTERN, GRPC_TOKEN_PROBLEM).optional()) };

/** A gRPC server's listener and drain; each service adds its own port variable. */
export const grpcServerEnv = {
  PUSHBASE_GRPC_HOST: text('127.0.0.1'),
  ...grpcTokenEnv,
  // After SIGTERM, how long health reports NOT_SERVING while calls are still answered, before the drain
  // (PUSHBASE_SHUTDOWN_TIMEOUT_MS) begins: behind a Kubernetes Service, the time for the readiness probe to
  // see NOT_SERVING and the endpoint to be removed (a chart sets a few seconds). 0: drain at once, right
  // for clients connected directly (the drain's GOAWAY sends them elsewhere).
  PUSHBASE_GRPC_DRAIN_MS: integer(0, 0, 600_000),
};

interface GrpcServerEnv {
  readonly PUSHBASE_GRPC_HOST: string;
  readonly PUSHBASE_GRPC_TOKEN?: string | undefined;
  readonly PUSHBASE_GRPC_DRAIN_MS: number;
}

/** Refuses a server without a token on a non-loopback host: spread into the service schema's `.refine()`. */
export const grpcTokenRefinement: readonly [(e: GrpcServerEnv) => boolean, { message: string; path: PropertyKey[] }] = [
  (e) => e.PUSHBASE_GRPC_TOKEN !== undefined || isLoopbackHost(e.PUSHBASE_GRPC_HOST),
  { message: GRPC_TOKEN_REQUIRED, path: ['PUSHBASE_GRPC_TOKEN'] },
];

/** A service's gRPC listener, on its own port variable. */
export const grpcServerConfigOf = (e: GrpcServerEnv, port: number) => Object.freeze({ host: e.PUSHBASE_GRPC_HOST, port, drainMs: e.PUSHBASE_GRPC_DRAIN_MS, token: e.PUSHBASE_GRPC_TOKEN });

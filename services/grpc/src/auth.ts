import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { InterceptingCall, Metadata, ServerInterceptingCall, status as Status, type Interceptor, type ServerInterceptor } from '@grpc/grpc-js';

/*
 * The shared secret between the gateway and the gRPC services (PUSHBASE_GRPC_TOKEN): the services answer
 * calls only from whoever holds it — the schema service's AccountAdmin registers keys for any account, the
 * records service appends for any. The gateway sends it as `authorization: Bearer <token>` on every call;
 * the services check it before any handler runs. Only grpc.health.v1 stays open, for probes and balancers.
 */

/** At least 32 printable ASCII characters without spaces: a gRPC text metadata value, hard to guess. */
export const GRPC_TOKEN_PATTERN = /^[\x21-\x7e]{32,}$/;
export const GRPC_TOKEN_PROBLEM = 'PUSHBASE_GRPC_TOKEN must be at least 32 printable ASCII characters without spaces';
/**
 * A service refuses to start without the token unless it listens on loopback only: a warning in a log is
 * easily missed, and an open port would trust anyone who reaches it as a gateway.
 */
export const GRPC_TOKEN_REQUIRED = 'PUSHBASE_GRPC_TOKEN is required unless PUSHBASE_GRPC_HOST is a loopback address: without it, whoever reaches the port is trusted as a gateway';

const AUTHORIZATION = 'authorization';
const HEALTH_SERVICE_PREFIX = '/grpc.health.v1.Health/';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Whether a listen address is on this machine only (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost') return true;
  const family = isIP(h);
  return family !== 0 && loopback.check(h, family === 6 ? 'ipv6' : 'ipv4');
}

/** A client interceptor (grpc-js `interceptors` option) that sends the token with every call. */
export function sendToken(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        metadata.set(AUTHORIZATION, value);
        next(metadata, listener);
      },
    });
}

/** The refusal a call without the right token gets; the client adapters recognise it (errors.ts). */
export const UNAUTHENTICATED_DETAILS = 'This call needs the PUSHBASE_GRPC_TOKEN the service was given';

/**
 * A server interceptor (grpc-js `interceptors` option) that ends every call but health's with UNAUTHENTICATED
 * unless its metadata holds the token: the call's metadata is never passed on, so no handler sees it.
 * Compared as SHA-256 digests with timingSafeEqual: constant time, whatever length was presented.
 */
export function requireToken(token: string): ServerInterceptor {
  const expected = createHash('sha256').update(`Bearer ${token}`).digest();
  const holdsToken = (metadata: Metadata): boolean => {
    const presented = metadata.get(AUTHORIZATION);
    if (presented.length !== 1 || typeof presented[0] !== 'string') return false;
    return timingSafeEqual(createHash('sha256').update(presented[0]).digest(), expected);
  };
  return (method, call) => {
    if (method.path.startsWith(HEALTH_SERVICE_PREFIX)) return new ServerInterceptingCall(call);
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            if (holdsToken(metadata)) pass(metadata);
            else call.sendStatus({ code: Status.UNAUTHENTICATED, details: UNAUTHENTICATED_DETAILS, metadata: new Metadata() });
          },
        }),
    });
  };
}

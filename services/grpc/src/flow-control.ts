import type { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Http2SecureServer, Http2Server, ServerHttp2Session } from 'node:http2';

/*
 * HTTP/2 receive windows of pushbase's gRPC servers.
 *
 * A write travels to the record service as one message holding the whole request body: about 70 KiB for
 * a 500-record append, up to 4 MiB. grpc-js (1.14) leaves a server's receive windows at HTTP/2's default
 * of 64 KiB, per call AND per connection, and has no option to raise them on the server side (the client
 * has `grpc-node.flow_control_window`; grpc/grpc-node#3058 proposes the same for servers). With 64 KiB,
 * every append needs at least one WINDOW_UPDATE from the server before its last bytes may be sent, and all
 * the gateway's calls share one connection window: a call waits until the server's event loop has read
 * the calls before it. Under load on a busy machine that wait was the largest part of a slow append
 * (docs/performance.md → gRPC receive windows).
 *
 * So each connection a server accepts announces a larger per-call window (a SETTINGS frame) and opens its
 * connection window, as grpc-java's servers do by default (1 MiB). The windows bound how much a gateway can
 * send ahead of the server's event loop: request data not yet read stays bounded by CONNECTION_WINDOW_BYTES
 * per connection (grpc-js sets no other session memory limit).
 *
 * Written by hand because no option exists: it wraps grpc-js's own (TypeScript-private) factory of its
 * HTTP/2 listeners, and reports whether it could, so that an upgrade that renames the factory fails the
 * test (grpc.int.test.ts) instead of silently losing the windows. Drop it for the option once grpc-js has one.
 */

/** What a call may send before the server has read any of it: a 500-record append, and most replaces, whole. */
export const CALL_WINDOW_BYTES = 1024 * 1024;
/** What all calls of one connection may send ahead of the server together. */
export const CONNECTION_WINDOW_BYTES = 8 * 1024 * 1024;

interface ServerInternals {
  createHttp2Server?: (credentials: ServerCredentials) => Http2Server | Http2SecureServer;
}

/**
 * Makes every connection `server` accepts from now on announce CALL_WINDOW_BYTES per call and open its
 * connection window to CONNECTION_WINDOW_BYTES. False (and nothing changed) when grpc-js no longer has the
 * factory this wraps.
 */
export function raiseReceiveWindows(server: Server): boolean {
  const internals = server as unknown as ServerInternals;
  const create = internals.createHttp2Server;
  if (typeof create !== 'function') return false;
  internals.createHttp2Server = function (this: Server, credentials: ServerCredentials) {
    const listener = create.call(this, credentials);
    listener.on('session', (session: ServerHttp2Session) => {
      try {
        session.settings({ initialWindowSize: CALL_WINDOW_BYTES });
        session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      } catch {
        // The session closed before its first tick (a client that connected and left): nothing to widen.
      }
    });
    return listener;
  };
  return true;
}

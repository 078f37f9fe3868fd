import type { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Http2SecureServer, Http2Server, ServerHttp2Session } from 'node:http2';

/*
 * HTTP/2 receive windows of pushbase's gRPC servers, opened wider than grpc-js's 64 KiB default (which has
 * no server option) so an append need not wait for WINDOW_UPDATEs behind the calls before it. It wraps
 * grpc-js's private listener factory and reports whether it could, so an upgrade that renames it fails
 * grpc.int.test.ts; drop it for the option once grpc-js has one. Why: docs/architecture.md → gRPC receive windows.
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

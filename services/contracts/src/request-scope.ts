import { AsyncLocalStorage } from 'node:async_hooks';

/** What is known of the request being served, wherever in its call tree the code runs. */
export interface RequestInfo {
  /** The gateway's request id (X-Request-Id), also quoted in error bodies and carried across gRPC. */
  readonly requestId: string;
}

/**
 * Carries the request being served down the asynchronous call tree, so code behind a port (a gRPC
 * client adapter sending `x-request-id`, a service's log lines) knows it without every port method
 * taking it as an argument. One instance is made by a composition root and handed to both ends (the
 * gateway app and the gRPC clients; a gRPC server and its handlers' loggers), never a module-level one:
 * two gateways in one test process keep their requests apart.
 */
export class RequestScope {
  private readonly storage = new AsyncLocalStorage<RequestInfo>();

  /** Runs `fn` (and everything it starts) as part of the request `info`. */
  run<T>(info: RequestInfo, fn: () => T): T {
    return this.storage.run(info, fn);
  }

  /** The request being served, or undefined outside any request (start-up, timers of their own). */
  current(): RequestInfo | undefined {
    return this.storage.getStore();
  }
}

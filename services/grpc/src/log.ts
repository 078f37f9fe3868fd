import type { RequestScope } from '@pushbase/contracts';

/** The shape of pushbase's structured loggers (as the projector's): one JSON object per line. */
export type Logger = (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;

/** JSON lines on stdout, each naming its service: what log shippers and the launchers read. */
export function jsonLogger(service: string, write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  return (level, msg, fields = {}) => {
    write(`${JSON.stringify({ time: new Date().toISOString(), level, service, msg, ...fields })}\n`);
  };
}

/**
 * A logger that adds the `request_id` of the request being served (when there is one) to every line,
 * so a service's handlers log with the gateway's request id without passing it around.
 */
export function requestLogger(log: Logger, scope: RequestScope): Logger {
  return (level, msg, fields = {}) => {
    const requestId = scope.current()?.requestId;
    log(level, msg, requestId === undefined ? fields : { request_id: requestId, ...fields });
  };
}

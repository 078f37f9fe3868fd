import type { RequestScope } from '@pushbase/contracts';
import { createLogger, levelledLog, type LevelledLog, type LogLevel } from '@pushbase/telemetry';

/** The shape of pushbase's structured loggers (as the projector's): a level, a message, fields. */
export type Logger = LevelledLog;

/**
 * A service's JSON lines (pino, @pushbase/telemetry), each naming its service: what log shippers and the
 * launchers read. `write` receives each line (tests); stdout by default.
 */
export function jsonLogger(service: string, write?: (line: string) => void, level?: LogLevel): Logger {
  return levelledLog(createLogger({ service, ...(write === undefined ? {} : { destination: { write } }), ...(level === undefined ? {} : { level }) }));
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

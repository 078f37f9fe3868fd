import { Metadata, Server, ServerCredentials, status as Status, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import {
  ACCOUNT_ADMIN_SERVICE_NAME,
  RECORD_SERVICE_NAME,
  RequestScope,
  SCHEMA_SERVICE_NAME,
  pushbaseServices,
  type AccountCommands,
  type KeyedWrite,
  type PushbaseServices,
  type RecordService,
  type SchemaService,
} from '@pushbase/contracts';
import { DomainError, parseJsonBody, type KeyScope } from '@pushbase/domain';
import { INTERNAL_DETAILS, statusName, toGrpcStatus } from './errors';
import { requestLogger, type Logger } from './log';
import { accountToMessage, keyToMessage, quotaChangeFromMessage, quotasFromMessage, summaryToMessage, type QuotaChangeMessage, type QuotasMessage } from './messages';
import { requireToken } from './auth';
import { raiseReceiveWindows } from './flow-control';
import { SERVER_CHANNEL_OPTIONS } from './options';
import { requestIdOf } from './request-id';
import { contextFromMetadata } from './trace-context';
import { context, failSpan, pushbaseTracer, SpanKind, trace } from '@pushbase/telemetry';

export interface GrpcServerDeps {
  /** Served as pushbase.v1.SchemaService when given. */
  readonly schema?: SchemaService;
  /** Served as pushbase.v1.RecordService when given. */
  readonly records?: RecordService;
  /** Served as pushbase.v1.AccountAdmin when given (by the schema service). */
  readonly accounts?: AccountCommands;
  readonly log: Logger;
  /**
   * Every call runs inside this scope with the caller's `x-request-id`, so the services' own loggers
   * (`requestLogger(log, scope)`) write the gateway's request id. One is made when not given.
   */
  readonly requestScope?: RequestScope;
  /** The loaded protos; loaded anew when not given (tests starting many servers pass one). */
  readonly protos?: PushbaseServices;
  /** Told of every call once its handler settled: its handling time and status (@pushbase/metrics' grpcMetrics(…, 'server')). */
  readonly metrics?: GrpcCallMetrics;
  /** PUSHBASE_GRPC_TOKEN: every call but health's must carry it (auth.ts); none, any call is taken. */
  readonly token?: string;
}

/**
 * Times calls by service, method and status name (`OK`, `INVALID_ARGUMENT`…). @pushbase/metrics'
 * GrpcMetrics is one; declared here, as a port, so that this package needs no metrics library.
 */
export interface GrpcCallMetrics {
  call(service: string, method: string, code: string, durationMs: number): void;
}

export interface GrpcServer {
  /** Binds and serves; resolves with the actual port (`port` 0 picks a free one). Health turns SERVING. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Health turns NOT_SERVING first (so probes and balancers stop sending), then, after `drainAfterMs`,
   * the server stops taking calls and waits for those in flight; `graceMs` after that the rest are
   * cancelled. Resolves once stopped; calling it again returns the same promise.
   *
   * `drainAfterMs` (default 0) is for a server behind an L4 balancer (a Kubernetes Service): until its
   * readiness probe has seen NOT_SERVING and the endpoint is removed, new connections still arrive, and
   * closing the listener at once would refuse them (503s for requests another replica could serve).
   * Clients connected directly need no wait: the GOAWAY of the drain sends them elsewhere.
   */
  shutdown(graceMs: number, drainAfterMs?: number): Promise<void>;
  /** The scope the calls run in (the one given, or the server's own). */
  readonly requestScope: RequestScope;
}

interface KeyMessage {
  key: string;
  fingerprint: string;
}
interface BodyRequest {
  account: string;
  id: string;
  body_json: Buffer;
  idempotency?: KeyMessage | null;
}
interface RefRequest {
  account: string;
  id: string;
  idempotency?: KeyMessage | null;
}

/** The write's Idempotency-Key as the services take it: none when unset (an older gateway never sets it). */
const keyed = (req: { idempotency?: KeyMessage | null }): KeyedWrite =>
  req.idempotency === null || req.idempotency === undefined || req.idempotency.key === '' ? {} : { idempotency: { key: req.idempotency.key, fingerprint: req.idempotency.fingerprint } };

/** `host:port` for bindAsync; an IPv6 literal needs brackets. */
const bindAddress = (host: string, port: number): string => `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;

/**
 * An unstarted gRPC server for the schema and/or record service, with the standard health service
 * (grpc.health.v1: the overall status "" and each service's full name). The services are the very
 * objects the embedded mode calls in-process; this only translates messages and errors.
 */
export function createGrpcServer(deps: GrpcServerDeps): GrpcServer {
  if (deps.schema === undefined && deps.records === undefined && deps.accounts === undefined) throw new Error('createGrpcServer needs a schema service, a record service or accounts');
  const scope = deps.requestScope ?? new RequestScope();
  const log = requestLogger(deps.log, scope);
  const protos = deps.protos ?? pushbaseServices();
  const tracer = pushbaseTracer();
  const server = new Server({ ...SERVER_CHANNEL_OPTIONS, ...(deps.token === undefined ? {} : { interceptors: [requireToken(deps.token)] }) });
  // Writes arrive as one message of up to 4 MiB: without this, each waits for window updates (flow-control.ts).
  if (!raiseReceiveWindows(server)) deps.log('warn', 'cannot raise the HTTP/2 receive windows of this grpc-js version; large writes wait for window updates');
  const names = [
    ...(deps.schema === undefined ? [] : [SCHEMA_SERVICE_NAME]),
    ...(deps.records === undefined ? [] : [RECORD_SERVICE_NAME]),
    ...(deps.accounts === undefined ? [] : [ACCOUNT_ADMIN_SERVICE_NAME]),
  ];
  const health = new HealthImplementation(Object.fromEntries(['', ...names].map((n) => [n, 'NOT_SERVING'])));
  health.addToServer(server);

  /**
   * A unary handler around a port method: runs it in the caller's request scope and answers its failure
   * through the one mapping (toGrpcStatus). Only failures the service did not mean to send are logged
   * here with their stack; the API client's own mistakes (invalid, not_found…) are not noise for the log.
   */
  const unary =
    <Req, Res>(service: string, method: string, handle: (req: Req) => Promise<Res>) =>
    (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      const requestId = requestIdOf(call.metadata);
      // The caller's span (the gateway's client span, from the call's traceparent) is this server span's parent.
      const parent = contextFromMetadata(call.metadata);
      const span = tracer.startSpan(`${service}/${method}`, { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method, 'pushbase.request_id': requestId } }, parent);
      const started = performance.now();
      scope.run({ requestId }, () =>
        context.with(trace.setSpan(parent, span), () => {
          // Started inside then(): a handler that throws before its first await is answered like one that rejects.
          Promise.resolve()
            .then(() => handle(call.request))
            .then(
            (res) => {
              span.end();
              const ms = performance.now() - started;
              // A call its caller gave up on (deadline, cancellation) is not answered OK, whatever the handler did.
              deps.metrics?.call(service, method, call.cancelled ? 'CANCELLED' : 'OK', ms);
              log('debug', 'call', { method, ms: Math.round(ms) });
              callback(null, res);
            },
            (err: unknown) => {
              const status = toGrpcStatus(err);
              deps.metrics?.call(service, method, call.cancelled ? 'CANCELLED' : statusName(status.code), performance.now() - started);
              if (span.isRecording()) span.setAttribute('rpc.grpc.status_code', status.code ?? Status.UNKNOWN);
              if (status.code === Status.INTERNAL) {
                log('error', 'call failed', { method, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
              } else if (err instanceof DomainError && (err.code === 'unavailable' || err.code === 'outcome_unknown')) {
                log('warn', 'call failed', { method, code: err.code, error: err.message });
              }
              // The API client's own mistakes are answers, not failures of this service.
              if (status.code === Status.INTERNAL || status.code === Status.UNAVAILABLE || status.code === Status.UNKNOWN) failSpan(span, err);
              else span.end();
              callback(status);
            },
          )
            .catch((e: unknown) => {
              // A failure while answering (grpc-js refusing what it was handed, or a bug here) must end as
              // this call's INTERNAL status, never as an unhandled rejection that takes the whole service down.
              log('error', 'answering a call failed', { method, error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
              try {
                callback({ code: Status.INTERNAL, details: INTERNAL_DETAILS, metadata: new Metadata() });
              } catch {
                // Already answered: the stream is gone, nothing more can be sent.
              }
            });
        }),
      );
    };

  if (deps.schema !== undefined) {
    const schema = deps.schema;
    const impl: UntypedServiceImplementation = {
      FindOrCreate: unary(SCHEMA_SERVICE_NAME, 'FindOrCreate', async (req: BodyRequest) => {
        const { created, dataset, replayed } = await schema.findOrCreate({ account: req.account, id: req.id, body: parseJsonBody(req.body_json), ...keyed(req) });
        return { created, dataset: summaryToMessage(dataset), replayed: replayed === true };
      }),
      Get: unary(SCHEMA_SERVICE_NAME, 'Get', async (req: RefRequest) => ({ dataset: summaryToMessage(await schema.get({ account: req.account, id: req.id })) })),
      Delete: unary(SCHEMA_SERVICE_NAME, 'Delete', async (req: RefRequest) => {
        return schema.delete({ account: req.account, id: req.id, ...keyed(req) });
      }),
    };
    server.addService(protos.SchemaService.service, impl);
  }
  if (deps.records !== undefined) {
    const records = deps.records;
    const impl: UntypedServiceImplementation = {
      Append: unary(RECORD_SERVICE_NAME, 'Append', async (req: BodyRequest) => {
        return records.append({ account: req.account, id: req.id, json: req.body_json, ...keyed(req) });
      }),
      Replace: unary(RECORD_SERVICE_NAME, 'Replace', async (req: BodyRequest) => {
        return records.replace({ account: req.account, id: req.id, json: req.body_json, ...keyed(req) });
      }),
    };
    server.addService(protos.RecordService.service, impl);
  }

  if (deps.accounts !== undefined) {
    const accounts = deps.accounts;
    const impl: UntypedServiceImplementation = {
      CreateAccount: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'CreateAccount', async (req: { account: string; quotas: QuotasMessage | null }) => ({
        account: accountToMessage(await accounts.createAccount(req.account, quotasFromMessage(req.quotas))),
      })),
      ListAccounts: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'ListAccounts', async () => ({ accounts: (await accounts.listAccounts()).map(accountToMessage) })),
      GetAccount: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'GetAccount', async (req: { account: string }) => ({ account: accountToMessage(await accounts.getAccount(req.account)) })),
      SetQuotas: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'SetQuotas', async (req: { account: string; quotas: QuotasMessage | null; change: QuotaChangeMessage | null }) => ({
        // Without a change (a gateway older than it), the quotas are the whole new ones.
        account: accountToMessage(await accounts.setQuotas(req.account, req.change === null ? quotasFromMessage(req.quotas) : quotaChangeFromMessage(req.change))),
      })),
      DeleteAccount: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'DeleteAccount', async (req: { account: string }) => accounts.deleteAccount(req.account)),
      CreateKey: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'CreateKey', async (req: { account: string; hash: string; scope: string; label: string; has_label: boolean }) => ({
        key: keyToMessage(
          await accounts.createKeyByHash(req.account, {
            hash: req.hash,
            // Empty is proto3's unset: the domain's default ("write"); anything else is checked by the domain.
            scope: (req.scope === '' ? 'write' : req.scope) as KeyScope,
            label: req.has_label ? req.label : null,
          }),
        ),
      })),
      ListKeys: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'ListKeys', async (req: { account: string }) => ({ keys: (await accounts.listKeys(req.account)).map(keyToMessage) })),
      RevokeKey: unary(ACCOUNT_ADMIN_SERVICE_NAME, 'RevokeKey', async (req: { account: string; key_id: string }) => {
        await accounts.revokeKey(req.account, req.key_id);
        return {};
      }),
    };
    server.addService(protos.AccountAdmin.service, impl);
  }

  /**
   * tryShutdown closes the listeners and sends GOAWAY: clients open no new stream here and reconnect
   * elsewhere, calls in flight run to their end. Open health Watch streams never end by themselves, so a
   * watcher keeps the drain waiting until the grace runs out and forceShutdown cancels it.
   */
  const drain = (graceMs: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        log('warn', 'shutdown grace ran out; cancelling the calls still in flight', { grace_ms: graceMs });
        server.forceShutdown();
        resolve();
      }, graceMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });

  let stopping: Promise<void> | undefined;
  return {
    requestScope: scope,
    listen: (host, port) =>
      new Promise<number>((resolve, reject) => {
        // Plain HTTP/2: the services listen on an internal network (loopback by default) and are reached
        // only by the gateway, which proves itself with the token (auth.ts); TLS between them is the
        // network's or a mesh's job, as for Kafka and Redis.
        server.bindAsync(bindAddress(host, port), ServerCredentials.createInsecure(), (err, actualPort) => {
          if (err !== null) {
            reject(err);
            return;
          }
          for (const name of ['', ...names]) health.setStatus(name, 'SERVING');
          resolve(actualPort);
        });
      }),
    shutdown: (graceMs, drainAfterMs = 0) =>
      (stopping ??= (async () => {
        for (const name of ['', ...names]) health.setStatus(name, 'NOT_SERVING');
        if (drainAfterMs > 0) await new Promise((r) => setTimeout(r, drainAfterMs));
        await drain(graceMs);
      })()),
  };
}

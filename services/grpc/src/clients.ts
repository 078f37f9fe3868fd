import { Metadata, credentials, status as Status, type ChannelOptions, type MethodDefinition, type ServiceClientConstructor } from '@grpc/grpc-js';
import {
  SCHEMA_SERVICE_NAME,
  pushbaseServices,
  type AccountAdmin,
  type AccountView,
  type DatasetBody,
  type DatasetRef,
  type FindOrCreateResult,
  type KeyedWrite,
  type PushbaseServices,
  type RawDatasetBody,
  type RecordService,
  type RequestScope,
  type SchemaService,
  type WriteAnswer,
} from '@pushbase/contracts';
import { changeQuotas, type DatasetSummary, type QuotaLimits } from '@pushbase/domain';
import { sendToken } from './auth';
import { fromGrpcError, isServiceError, statusName, type CallKind } from './errors';
import {
  accountFromMessage,
  keyFromMessage,
  quotaChangeToMessage,
  quotasToMessage,
  summaryFromMessage,
  type AccountMessage,
  type DatasetSummaryMessage,
  type KeyMessage,
} from './messages';
import { CLIENT_CHANNEL_OPTIONS } from './options';
import type { GrpcCallMetrics } from './server';
import { REQUEST_ID_KEY } from './request-id';
import { injectIntoMetadata } from './trace-context';
import { context, failSpan, pushbaseTracer, SpanKind, trace } from '@pushbase/telemetry';

/**
 * How long a read (SchemaService.Get) may take, retries included. A few seconds: the schema service
 * answers it from Redis in about a millisecond; beyond this the gateway had better answer 503.
 */
export const DEFAULT_READ_DEADLINE_MS = 5_000;
/**
 * How long a write (FindOrCreate, Delete, Append, Replace) may take. The services answer a write only
 * once Kafka acknowledged it or its outcome was resolved: the Kafka appender gives up after 30 s
 * (`appendTimeoutMs`) and the outcome of a timed-out produce is then resolved, so the services must
 * answer within about 50 s. A deadline shorter than the service's own bound would turn writes the
 * service still settles correctly into outcome_unknown (500); one much longer only holds a gateway
 * request open. Keep this above the services' bound when changing either.
 */
export const DEFAULT_WRITE_DEADLINE_MS = 60_000;

export interface GrpcClientOptions {
  /** The gateway's request scope: each call sends the current request id as `x-request-id`. */
  readonly requestScope?: RequestScope;
  readonly readDeadlineMs?: number;
  readonly writeDeadlineMs?: number;
  /** Extra channel options (tests shorten backoffs); they override pushbase's defaults. */
  readonly channelOptions?: ChannelOptions;
  /** The loaded protos; loaded anew when not given. */
  readonly protos?: PushbaseServices;
  /** Told of every call's time and status, as the gateway saw it (@pushbase/metrics' grpcMetrics(…, 'client')). */
  readonly metrics?: GrpcCallMetrics;
  /** PUSHBASE_GRPC_TOKEN, sent with every call (auth.ts). */
  readonly token?: string;
}

/** A port adapter that holds a channel. */
export interface Closable {
  /**
   * Resolves once the channel is connected; rejects when it is not within `timeoutMs`. For start-up
   * (a launcher, a test) only: calls never wait for a connection (see waitForReady below).
   */
  readonly waitForReady: (timeoutMs: number) => Promise<void>;
  /** Closes the channel; calls still pending fail with CANCELLED. */
  readonly close: () => void;
}

/**
 * Only SchemaService.Get is idempotent, so only Get is retried, and only on UNAVAILABLE (the service or
 * its store could not answer; any other status is an answer). grpc-js applies this retry policy itself,
 * within the call's deadline. The writes are never retried: a write repeated after an unknown outcome
 * could be applied twice (an append of the same records twice), and the gateway cannot tell.
 */
const SCHEMA_SERVICE_CONFIG = JSON.stringify({
  methodConfig: [
    {
      name: [{ service: SCHEMA_SERVICE_NAME, method: 'Get' }],
      retryPolicy: { maxAttempts: 4, initialBackoff: '0.1s', maxBackoff: '1s', backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'] },
    },
  ],
});

/**
 * What grpc-js dials for an address: `host:port` as it is; replicas given as `ip:port` entries separated by
 * commas become one channel over all of them (grpc-js's `ipv4:`/`ipv6:` target) that sends each call to
 * the next connected replica (its round_robin policy). A replica that is down is skipped until it is back,
 * so a write refused by a dead replica can be retried on another at once (an Idempotency-Key keeps it
 * single).
 */
export function channelTarget(address: string): { readonly target: string; readonly options: ChannelOptions } {
  if (!address.includes(',')) return { target: address, options: {} };
  const scheme = address.startsWith('[') ? 'ipv6' : 'ipv4';
  return { target: `${scheme}:${address}`, options: { 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) } };
}

interface Channel extends Closable {
  call<Res>(method: string, request: unknown, kind: CallKind): Promise<Res>;
}

function openChannel(address: string, ctor: ServiceClientConstructor, service: string, opts: GrpcClientOptions, extra: ChannelOptions = {}): Channel {
  // An interceptor rather than call credentials: those are for TLS channels (C-core drops them on plain ones).
  const interceptors = opts.token === undefined ? {} : { interceptors: [sendToken(opts.token)] };
  const { target, options } = channelTarget(address);
  const client = new ctor(target, credentials.createInsecure(), { ...CLIENT_CHANNEL_OPTIONS, ...options, ...extra, ...opts.channelOptions, ...interceptors });
  // Connect now rather than on the first request, so that request does not pay for the handshake.
  client.getChannel().getConnectivityState(true);
  const deadlineMs: Record<CallKind, number> = {
    read: opts.readDeadlineMs ?? DEFAULT_READ_DEADLINE_MS,
    write: opts.writeDeadlineMs ?? DEFAULT_WRITE_DEADLINE_MS,
  };
  const tracer = pushbaseTracer();
  return {
    close: () => client.close(),
    waitForReady: (timeoutMs) =>
      new Promise<void>((resolve, reject) => {
        client.waitForReady(Date.now() + timeoutMs, (err) => (err === undefined || err === null ? resolve() : reject(err)));
      }),
    call: <Res>(method: string, request: unknown, kind: CallKind) => {
      const def = ctor.service[method] as MethodDefinition<unknown, Res> | undefined;
      if (def === undefined) return Promise.reject(new Error(`${service} has no method ${method}`));
      const metadata = new Metadata();
      const requestId = opts.requestScope?.current()?.requestId;
      if (requestId !== undefined) metadata.set(REQUEST_ID_KEY, requestId);
      const parent = context.active();
      // Named as the server's span is: the full method path (pushbase.v1.RecordService/Append).
      const serviceName = def.path.slice(1, def.path.lastIndexOf('/'));
      const span = tracer.startSpan(def.path.slice(1), { kind: SpanKind.CLIENT, attributes: { 'rpc.system': 'grpc', 'rpc.service': serviceName, 'rpc.method': method } }, parent);
      injectIntoMetadata(trace.setSpan(parent, span), metadata);
      const started = performance.now();
      return new Promise<Res>((resolve, reject) => {
        // waitForReady stays off (the default): with no connection a call fails at once, provably unsent,
        // instead of queueing until its deadline and leaving the gateway unable to tell.
        client.makeUnaryRequest<unknown, Res>(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          request,
          metadata,
          { deadline: Date.now() + deadlineMs[kind] },
          (err, res) => {
            const ms = performance.now() - started;
            if (err !== null && err !== undefined) {
              opts.metrics?.call(serviceName, method, statusName(isServiceError(err) ? err.code : Status.UNKNOWN), ms);
              const failure = isServiceError(err) ? fromGrpcError(err, kind, service) : err;
              failSpan(span, failure);
              reject(failure);
            } else if (res === undefined) {
              opts.metrics?.call(serviceName, method, statusName(Status.INTERNAL), ms);
              const failure = new Error(`${service}.${method} answered nothing`);
              failSpan(span, failure);
              reject(failure);
            } else {
              opts.metrics?.call(serviceName, method, statusName(Status.OK), ms);
              span.end();
              resolve(res);
            }
          },
        );
      });
    },
  };
}

// JSON.stringify(undefined) is undefined: an empty body stays empty, and the service parses it as the
// embedded mode would (parseJsonBody of nothing).
const bodyBytes = (body: unknown): Buffer => Buffer.from(JSON.stringify(body) ?? '', 'utf8');

/**
 * SchemaService over gRPC. The definition's body is small (ten fields at most) and arrives parsed (the
 * gateway's JSON errors stay the gateway's); it travels re-serialised as `body_json`.
 */
export function connectSchemaService(address: string, opts: GrpcClientOptions = {}): SchemaService & Closable {
  const protos = opts.protos ?? pushbaseServices();
  const ch = openChannel(address, protos.SchemaService, 'schema', opts, { 'grpc.service_config': SCHEMA_SERVICE_CONFIG });
  return {
    findOrCreate: async ({ account, id, body, idempotency }: DatasetBody): Promise<FindOrCreateResult> => {
      const res = await ch.call<{ created: boolean; dataset: DatasetSummaryMessage | null; replayed: boolean }>('FindOrCreate', { account, id, body_json: bodyBytes(body), idempotency }, 'write');
      return { created: res.created, dataset: summaryFromMessage(res.dataset), ...(res.replayed ? { replayed: true } : {}) };
    },
    get: async ({ account, id }: DatasetRef): Promise<DatasetSummary> => {
      const res = await ch.call<{ dataset: DatasetSummaryMessage | null }>('Get', { account, id }, 'read');
      return summaryFromMessage(res.dataset);
    },
    delete: async ({ account, id, idempotency }: DatasetRef & KeyedWrite): Promise<WriteAnswer> => {
      const res = await ch.call<{ replayed: boolean }>('Delete', { account, id, idempotency }, 'write');
      return { replayed: res.replayed };
    },
    waitForReady: ch.waitForReady,
    close: ch.close,
  };
}

/** RecordService over gRPC: the request body's bytes travel as they came, parsed only by the service. */
export function connectRecordService(address: string, opts: GrpcClientOptions = {}): RecordService & Closable {
  const protos = opts.protos ?? pushbaseServices();
  const ch = openChannel(address, protos.RecordService, 'records', opts);
  const write =
    (method: 'Append' | 'Replace') =>
    async ({ account, id, json, idempotency }: RawDatasetBody): Promise<WriteAnswer> => {
      const res = await ch.call<{ replayed: boolean }>(method, { account, id, body_json: json, idempotency }, 'write');
      return { replayed: res.replayed };
    };
  return { append: write('Append'), replace: write('Replace'), waitForReady: ch.waitForReady, close: ch.close };
}

export interface AccountAdminClientOptions extends GrpcClientOptions {
  /** A fresh random key (the gateway's newApiKey): made here, shown once, only its hash is sent. */
  readonly newKey: () => string;
  /** The key's SHA-256, hex (the gateway's hashApiKey, what its key store looks keys up by). */
  readonly hashKey: (key: string) => string;
  /** The quotas in force where an account sets none: this gateway's rate limit and the API's dataset limit. */
  readonly defaults?: QuotaLimits;
}

/**
 * AccountAdmin over gRPC, for the gateway's admin listener: the schema service decides and stores (its
 * AccountAdmin service). createKey makes the key here and sends only its hash, so the key is never on the
 * wire between services, in Kafka or in Redis; it is returned to the caller this once.
 */
export function connectAccountAdmin(address: string, opts: AccountAdminClientOptions): AccountAdmin & Closable {
  const protos = opts.protos ?? pushbaseServices();
  const ch = openChannel(address, protos.AccountAdmin, 'schema', opts);
  const account = (res: { account: AccountMessage | null }): AccountView => accountFromMessage(res.account, opts.defaults);
  return {
    createAccount: async (name, quotas) => account(await ch.call('CreateAccount', { account: name, quotas: quotasToMessage(quotas) }, 'write')),
    listAccounts: async () => (await ch.call<{ accounts: AccountMessage[] }>('ListAccounts', {}, 'read')).accounts.map((m) => accountFromMessage(m, opts.defaults)),
    getAccount: async (name) => account(await ch.call('GetAccount', { account: name }, 'read')),
    setQuotas: async (name, change) => {
      // `quotas` only for a schema service older than `change`, which sets them whole (remove with it).
      const merged = changeQuotas(account(await ch.call('GetAccount', { account: name }, 'read')).quotas, change);
      return account(await ch.call('SetQuotas', { account: name, quotas: quotasToMessage(merged), change: quotaChangeToMessage(change) }, 'write'));
    },
    deleteAccount: async (name) => {
      const res = await ch.call<{ datasets_deleted: number }>('DeleteAccount', { account: name }, 'write');
      return { datasets_deleted: res.datasets_deleted };
    },
    createKey: async (name, { scope, label }) => {
      const key = opts.newKey();
      const res = await ch.call<{ key: KeyMessage | null }>('CreateKey', { account: name, hash: opts.hashKey(key), scope, label: label ?? '', has_label: label !== null }, 'write');
      return { ...keyFromMessage(res.key), key };
    },
    listKeys: async (name) => (await ch.call<{ keys: KeyMessage[] }>('ListKeys', { account: name }, 'read')).keys.map(keyFromMessage),
    revokeKey: async (name, keyId) => {
      await ch.call('RevokeKey', { account: name, key_id: keyId }, 'write');
    },
    waitForReady: ch.waitForReady,
    close: ch.close,
  };
}

import { existsSync } from 'node:fs';
import path from 'node:path';
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';

/*
 * The gRPC contracts (proto/pushbase/v1) of SchemaService, RecordService and AccountAdmin. Every gRPC server and client
 * of pushbase loads them through here, so both ends decode messages with the same options.
 */

const MARKER = path.join('pushbase', 'v1', 'schema.proto');

/**
 * The `proto` directory at the repository root (or beside the installed code in an image). Found by
 * walking up from this file, so it works from `src` under ts-node/tsx/jest and from a compiled `dist`.
 */
function findProtoDir(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'proto');
    if (existsSync(path.join(candidate, MARKER))) return candidate;
    if (path.dirname(dir) === dir) break;
  }
  return path.resolve(__dirname, '../../../proto');
}

export const PROTO_DIR = findProtoDir();

/** The service files, relative to PROTO_DIR (they import `pushbase/v1/common.proto`). */
export const PROTO_FILES: readonly string[] = ['pushbase/v1/schema.proto', 'pushbase/v1/records.proto', 'pushbase/v1/accounts.proto'];

/** The fully qualified gRPC service names. */
export const SCHEMA_SERVICE_NAME = 'pushbase.v1.SchemaService';
export const RECORD_SERVICE_NAME = 'pushbase.v1.RecordService';
export const ACCOUNT_ADMIN_SERVICE_NAME = 'pushbase.v1.AccountAdmin';

/**
 * The one option set. Change it only together with every adapter that reads the decoded messages.
 * - keepCase: field names stay snake_case as in the protos and the JSON API (`body_json`, `created_at`).
 * - longs: Number. The only int64 fields are epoch-millisecond timestamps, which stay far below 2^53,
 *   so a plain number is exact and matches the domain's `created_at: number`.
 * - enums: String, so values read as their names (`FIELD_TYPE_MONEY`), not as wire numbers.
 * - defaults: unset scalars decode to their defaults ('' / 0 / false / []), so absent never means undefined.
 * - oneofs: virtual oneof fields are set (none are used yet; harmless and future-proof).
 */
export const PROTO_LOADER_OPTIONS: Readonly<Options> = Object.freeze({
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
});

/** The proto-loader package definition of both services and their messages. */
export function loadPushbasePackageDefinition(): PackageDefinition {
  return loadSync([...PROTO_FILES], { ...PROTO_LOADER_OPTIONS, includeDirs: [PROTO_DIR] });
}

/** The gRPC package object: `loadPushbaseProtos().pushbase.v1.SchemaService` and so on. */
export function loadPushbaseProtos(): GrpcObject {
  return loadPackageDefinition(loadPushbasePackageDefinition());
}

const isServiceConstructor = (v: unknown): v is ServiceClientConstructor =>
  typeof v === 'function' && 'service' in v && typeof (v as { service: unknown }).service === 'object';

export interface PushbaseServices {
  readonly SchemaService: ServiceClientConstructor;
  readonly RecordService: ServiceClientConstructor;
  readonly AccountAdmin: ServiceClientConstructor;
}

/** The two client constructors (each with its `.service` definition for `server.addService`). */
export function pushbaseServices(root: GrpcObject = loadPushbaseProtos()): PushbaseServices {
  const pushbase = root.pushbase as GrpcObject | undefined;
  const v1 = pushbase?.v1 as GrpcObject | undefined;
  const schema = v1?.SchemaService;
  const records = v1?.RecordService;
  const accounts = v1?.AccountAdmin;
  if (!isServiceConstructor(schema) || !isServiceConstructor(records) || !isServiceConstructor(accounts)) {
    throw new Error(`The protos in ${PROTO_DIR} do not define ${SCHEMA_SERVICE_NAME}, ${RECORD_SERVICE_NAME} and ${ACCOUNT_ADMIN_SERVICE_NAME}`);
  }
  return { SchemaService: schema, RecordService: records, AccountAdmin: accounts };
}

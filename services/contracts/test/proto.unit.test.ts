/*
 * The gRPC contracts (proto/pushbase/v1) and the TypeScript ports (src/ports.ts) describe the same
 * services. Drift on either side fails here: the method names are read from ports.ts with the
 * TypeScript compiler API at run time, and the `Record<keyof …, true>` lists below fail `tsc` when an
 * interface gains or loses a member.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { FIELD_TYPES, TIME_UNITS, type DatasetSummary, type FieldDefinition } from '@pushbase/domain';
import {
  PROTO_DIR,
  PROTO_LOADER_OPTIONS,
  RECORD_SERVICE_NAME,
  SCHEMA_SERVICE_NAME,
  loadPushbasePackageDefinition,
  loadPushbaseProtos,
  pushbaseServices,
  type DatasetBody,
  type DatasetRef,
  type FindOrCreateResult,
  type RecordService,
  type SchemaService,
  type WriteAnswer,
} from '../src';

const PORTS = path.resolve(__dirname, '../src/ports.ts');

/** Member names of an exported interface of ports.ts, read from the source. */
function interfaceMembers(name: string): string[] {
  const source = ts.createSourceFile(PORTS, readFileSync(PORTS, 'utf8'), ts.ScriptTarget.ES2022, true);
  const decl = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
  if (decl === undefined) throw new Error(`ports.ts has no interface ${name}`);
  return decl.members.map((m) => {
    if (m.name === undefined || !ts.isIdentifier(m.name)) throw new Error(`Unexpected member in ${name}`);
    return m.name.text;
  });
}

// Compile-time mirrors of the interfaces: a missing or extra key is a type error.
const schemaMethods: Record<keyof SchemaService, true> = { findOrCreate: true, get: true, delete: true };
const recordMethods: Record<keyof RecordService, true> = { append: true, replace: true };
const refKeys: Record<keyof DatasetRef, true> = { account: true, id: true };
const bodyKeys: Record<keyof DatasetBody, true> = { account: true, id: true, body: true, idempotency: true };
const findOrCreateKeys: Record<keyof FindOrCreateResult, true> = { created: true, dataset: true, replayed: true };
const writeAnswerKeys: Record<keyof WriteAnswer, true> = { replayed: true };
const summaryKeys: Record<keyof DatasetSummary, true> = {
  account: true,
  id: true,
  incarnation: true,
  definition: true,
  created_at: true,
  updated_at: true,
};
const fieldKeys: Record<keyof FieldDefinition, true> = { type: true, name: true, optional: true, currency_code: true, time_unit: true };

const lower = (names: Iterable<string>): string[] => [...names].map((n) => n.toLowerCase()).sort();

const definition = loadPushbasePackageDefinition();
const services = pushbaseServices();

interface DescriptorField {
  name: string;
  type: string;
  label: string;
}
/** Field names and descriptor types of a message of the package. */
function messageFields(name: string): Record<string, string> {
  const def = definition[`pushbase.v1.${name}`] as { format?: string; type?: { field?: DescriptorField[] } } | undefined;
  expect(def?.format).toBe('Protocol Buffer 3 DescriptorProto');
  return Object.fromEntries((def?.type?.field ?? []).map((f) => [f.name, f.label === 'LABEL_REPEATED' ? `repeated ${f.type}` : f.type]));
}
function enumValues(name: string): string[] {
  const def = definition[`pushbase.v1.${name}`] as { format?: string; type?: { value?: { name: string }[] } } | undefined;
  expect(def?.format).toBe('Protocol Buffer 3 EnumDescriptorProto');
  return (def?.type?.value ?? []).map((v) => v.name);
}

describe('proto/pushbase/v1', () => {
  it('is found at the repository root', () => {
    expect(PROTO_DIR).toBe(path.resolve(__dirname, '../../../proto'));
    for (const file of ['common.proto', 'schema.proto', 'records.proto']) expect(existsSync(path.join(PROTO_DIR, 'pushbase/v1', file))).toBe(true);
  });

  it('loads with the one option set into a grpc package object', () => {
    expect(PROTO_LOADER_OPTIONS).toMatchObject({ keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [PROTO_DIR] });
    expect(Object.isFrozen(PROTO_LOADER_OPTIONS)).toBe(true);
    const root = loadPushbaseProtos();
    expect(typeof (root.pushbase as Record<string, Record<string, unknown>>).v1!.SchemaService).toBe('function');
    expect(Object.keys(definition[SCHEMA_SERVICE_NAME]!)).toEqual(Object.keys(services.SchemaService.service));
    expect(Object.keys(definition[RECORD_SERVICE_NAME]!)).toEqual(Object.keys(services.RecordService.service));
  });

  it('the compile-time mirrors agree with ports.ts as written', () => {
    expect(lower(interfaceMembers('SchemaService'))).toEqual(lower(Object.keys(schemaMethods)));
    expect(lower(interfaceMembers('RecordService'))).toEqual(lower(Object.keys(recordMethods)));
  });

  it.each([
    ['SchemaService', SCHEMA_SERVICE_NAME],
    ['RecordService', RECORD_SERVICE_NAME],
  ] as const)('%s has exactly the methods of the TypeScript interface, all unary', (name, fullName) => {
    const service = services[name].service;
    const fromTs = interfaceMembers(name);
    expect(fromTs.length).toBeGreaterThan(0);
    expect(lower(Object.keys(service))).toEqual(lower(fromTs));
    for (const [method, def] of Object.entries(service)) {
      expect(def.path).toBe(`/${fullName}/${method}`);
      expect(fromTs).toContain(def.originalName);
      expect({ method, requestStream: def.requestStream, responseStream: def.responseStream }).toEqual({ method, requestStream: false, responseStream: false });
    }
  });

  it('requests carry the account, the dataset id, the Idempotency-Key and, where the port takes one, the JSON body as bytes', () => {
    const withBody = { account: 'TYPE_STRING', id: 'TYPE_STRING', body_json: 'TYPE_BYTES', idempotency: 'TYPE_MESSAGE' };
    const withoutBody = { account: 'TYPE_STRING', id: 'TYPE_STRING' };
    // DatasetBody.body travels as body_json; DatasetRef as is.
    expect(lower(Object.keys(withBody))).toEqual(lower(Object.keys(bodyKeys).map((k) => (k === 'body' ? 'body_json' : k))));
    expect(lower(Object.keys(withoutBody))).toEqual(lower(Object.keys(refKeys)));
    expect(messageFields('FindOrCreateRequest')).toEqual(withBody);
    expect(messageFields('AppendRequest')).toEqual(withBody);
    expect(messageFields('ReplaceRequest')).toEqual(withBody);
    expect(messageFields('GetRequest')).toEqual(withoutBody);
    expect(messageFields('DeleteRequest')).toEqual({ ...withoutBody, idempotency: 'TYPE_MESSAGE' });
    expect(messageFields('IdempotencyKey')).toEqual({ key: 'TYPE_STRING', fingerprint: 'TYPE_STRING' });
    for (const answer of ['DeleteResponse', 'AppendResponse', 'ReplaceResponse']) expect(Object.keys(messageFields(answer))).toEqual(Object.keys(writeAnswerKeys));
    expect(messageFields('GetResponse')).toEqual({ dataset: 'TYPE_MESSAGE' });
  });

  it('responses and the dataset summary mirror the domain types', () => {
    expect(Object.keys(messageFields('FindOrCreateResponse')).sort()).toEqual(Object.keys(findOrCreateKeys).sort());
    const summary = messageFields('DatasetSummary');
    expect(Object.keys(summary).sort()).toEqual(Object.keys(summaryKeys).sort());
    expect(summary).toMatchObject({ created_at: 'TYPE_INT64', updated_at: 'TYPE_INT64', definition: 'TYPE_MESSAGE' });
    expect(messageFields('DatasetDefinition')).toEqual({ fields: 'repeated TYPE_MESSAGE', unique_by: 'repeated TYPE_STRING' });
    expect(Object.keys(messageFields('FieldDefinition')).sort()).toEqual(Object.keys(fieldKeys).sort());
  });

  it('the enums cover exactly the domain field types and time units', () => {
    const strip = (prefix: string, names: string[]): string[] =>
      names.filter((n) => n !== `${prefix}UNSPECIFIED`).map((n) => n.slice(prefix.length).toLowerCase()).sort();
    expect(enumValues('FieldType')[0]).toBe('FIELD_TYPE_UNSPECIFIED');
    expect(strip('FIELD_TYPE_', enumValues('FieldType'))).toEqual([...FIELD_TYPES].sort());
    expect(enumValues('TimeUnit')[0]).toBe('TIME_UNIT_UNSPECIFIED');
    expect(strip('TIME_UNIT_', enumValues('TimeUnit'))).toEqual([...TIME_UNITS].sort());
  });

  it('round-trips messages with numbers for int64, enum names and defaults', () => {
    const findOrCreate = services.SchemaService.service.FindOrCreate!;
    const at = 1_706_702_400_123;
    const wire = findOrCreate.responseSerialize({
      created: true,
      dataset: {
        account: 'acme',
        id: 'sales.by.day',
        incarnation: 'inc-1',
        definition: {
          fields: { amount: { type: 'FIELD_TYPE_MONEY', name: 'Amount', currency_code: 'USD' }, took: { type: 'FIELD_TYPE_DURATION', name: 'Took', optional: true, time_unit: 'TIME_UNIT_SECONDS' } },
          unique_by: ['amount'],
        },
        created_at: at,
        updated_at: at + 1,
      },
    });
    expect(findOrCreate.responseDeserialize(wire)).toEqual({
      created: true,
      dataset: {
        account: 'acme',
        id: 'sales.by.day',
        incarnation: 'inc-1',
        definition: {
          fields: {
            amount: { type: 'FIELD_TYPE_MONEY', name: 'Amount', optional: false, currency_code: 'USD', time_unit: 'TIME_UNIT_UNSPECIFIED' },
            took: { type: 'FIELD_TYPE_DURATION', name: 'Took', optional: true, currency_code: '', time_unit: 'TIME_UNIT_SECONDS' },
          },
          unique_by: ['amount'],
        },
        created_at: at,
        updated_at: at + 1,
      },
      replayed: false,
    });

    const append = services.RecordService.service.Append!;
    const body = Buffer.from(JSON.stringify({ data: [{ n: 1 }], delete_by: 'day' }));
    const decoded = append.requestDeserialize(append.requestSerialize({ account: 'acme', id: 'x', body_json: body })) as { body_json: Buffer };
    expect(JSON.parse(Buffer.from(decoded.body_json).toString('utf8'))).toEqual({ data: [{ n: 1 }], delete_by: 'day' });
    expect(append.responseDeserialize(append.responseSerialize({}))).toEqual({ replayed: false });
    expect(append.responseDeserialize(append.responseSerialize({ replayed: true }))).toEqual({ replayed: true });
    const keyed = append.requestDeserialize(append.requestSerialize({ account: 'acme', id: 'x', body_json: body, idempotency: { key: 'k 1', fingerprint: 'fp' } })) as { idempotency: unknown };
    expect(keyed.idempotency).toEqual({ key: 'k 1', fingerprint: 'fp' });
    // Unset (an older gateway, or no key): null, which the service reads as a write without a key.
    expect((append.requestDeserialize(append.requestSerialize({ account: 'acme', id: 'x', body_json: body })) as { idempotency: unknown }).idempotency).toBeNull();
  });
});

import path from 'node:path';
import { listOperations, loadOpenApiDocument, OpenApiValidator, validateSpec } from '../helpers/openapi';

/*
 * docs/read-api.yaml, the read API's own document, is valid OpenAPI 3.1, its schemas compile in Ajv's strict
 * mode, and it describes the routes the gateway serves (test/e2e/read-api.e2e.test.ts checks every answer
 * against it, in both modes).
 */
const READ_API = path.resolve(__dirname, '../../docs/read-api.yaml');
const doc = loadOpenApiDocument(READ_API);

it('is a valid OpenAPI 3.1 document', () => {
  const result = validateSpec(doc);
  expect(result.errors ?? []).toEqual([]);
  expect(result.valid).toBe(true);
});

it('compiles in strict mode and documents the four read routes, each with its errors', () => {
  expect(new OpenApiValidator(doc).compileAllSchemas().length).toBeGreaterThan(0);
  const ops = listOperations(doc).map((o) => `${o.method.toUpperCase()} ${o.path}`);
  expect(ops.sort()).toEqual([
    'GET /read/v1/accounts/{account}/datasets',
    'GET /read/v1/accounts/{account}/datasets/{id}',
    'GET /read/v1/accounts/{account}/datasets/{id}/aggregate',
    'GET /read/v1/accounts/{account}/datasets/{id}/records',
  ]);
});

it('tells a wrong answer from a right one', () => {
  const v = new OpenApiValidator(doc);
  const headers = { 'content-type': 'application/json', 'x-request-id': 'r' };
  const path = '/read/v1/accounts/acme/datasets/x/aggregate';
  expect(v.validateResponse('GET', path, 200, headers, { op: 'sum', field: 'n', group_by: null, bucket: null, value: 1 })).toEqual([]);
  expect(v.validateResponse('GET', path, 200, headers, { op: 'sum', field: 'n', group_by: null, bucket: null })).not.toEqual([]);
  expect(v.validateResponse('GET', path, 200, headers, { op: 'sum', field: 'n', group_by: 'g', bucket: null, groups: [{ key: 'a' }] })).not.toEqual([]);
});

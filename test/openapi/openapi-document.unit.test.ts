/*
 * docs/openapi.yaml is itself valid (against the official OpenAPI 3.1 JSON schema) and documents what
 * docs/api.md fixes for every operation: Basic auth, 401, 429 with Retry-After, X-Request-Id
 * everywhere, RateLimit-* on success, the one error shape.
 */
import {
  OpenApiValidator,
  deref,
  isObject,
  listOperations,
  loadOpenApiDocument,
  resolvePointer,
  validateSpec,
  type JsonObject,
} from '../helpers/openapi';

const doc = loadOpenApiDocument();
const operations = listOperations(doc);
const clone = (): JsonObject => structuredClone(doc);
const at = (d: JsonObject, pointer: string): JsonObject => {
  const node = resolvePointer(d, pointer);
  if (!isObject(node)) throw new Error(`${pointer} is not an object`);
  return node;
};

/** Every `$ref` string anywhere in the document. */
function collectRefs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) collectRefs(v, out);
  else if (isObject(node)) {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else collectRefs(v, out);
    }
  }
  return out;
}

const responseOf = (op: JsonObject, status: string): JsonObject | undefined => {
  const responses = isObject(op.responses) ? op.responses : {};
  const r = deref(doc, responses[status]);
  return isObject(r) ? r : undefined;
};
const headersOf = (response: JsonObject): Record<string, JsonObject> => {
  const out: Record<string, JsonObject> = {};
  for (const [name, h] of Object.entries(isObject(response.headers) ? response.headers : {})) {
    const header = deref(doc, h);
    if (isObject(header)) out[name] = header;
  }
  return out;
};

describe('docs/openapi.yaml', () => {
  it('is a valid OpenAPI 3.1 document', () => {
    const result = validateSpec(doc);
    expect(result.errors).toBeUndefined();
    expect(result).toMatchObject({ valid: true, version: '3.1' });
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
  });

  it('is rejected by the validator when broken (so the check above can fail)', () => {
    const noInfo = clone();
    delete noInfo.info;
    expect(validateSpec(noInfo).valid).toBe(false);

    const noDescription = clone();
    delete at(noDescription, '#/components/responses/Empty').description;
    expect(validateSpec(noDescription).valid).toBe(false);

    const badSecurity = clone();
    at(badSecurity, '#/components/securitySchemes/basicAuth').type = 'password';
    expect(validateSpec(badSecurity).valid).toBe(false);
  });

  it('describes exactly the public operations', () => {
    expect(operations.map((o) => `${o.method.toUpperCase()} ${o.path}`).sort()).toEqual(
      ['DELETE /datasets/{id}', 'GET /', 'POST /datasets/{id}/data', 'PUT /datasets/{id}', 'PUT /datasets/{id}/data'].sort(),
    );
    const ids = operations.map((o) => o.operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.servers).toEqual([expect.objectContaining({ url: 'https://localhost:8443' })]);
    expect(doc.jsonSchemaDialect).toBe('https://spec.openapis.org/oas/3.1/dialect/base');
  });

  it('resolves every $ref', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) expect(() => resolvePointer(doc, ref)).not.toThrow();
  });

  it('declares HTTP Basic authentication and requires it on every operation', () => {
    expect(at(doc, '#/components/securitySchemes/basicAuth')).toMatchObject({ type: 'http', scheme: 'basic' });
    for (const { method, path, operation } of operations) {
      const security = operation.security ?? doc.security;
      // Non-empty, and no `{}` alternative (which would make authentication optional).
      expect({ op: `${method} ${path}`, security }).toEqual({ op: `${method} ${path}`, security: [{ basicAuth: [] }] });
    }
  });

  it('documents 401 and 429 (with Retry-After) on every operation', () => {
    for (const { method, path, operation } of operations) {
      const where = `${method} ${path}`;
      const unauthorized = responseOf(operation, '401');
      const limited = responseOf(operation, '429');
      expect({ where, has401: unauthorized !== undefined, has429: limited !== undefined }).toEqual({ where, has401: true, has429: true });
      expect(headersOf(limited!)['Retry-After']).toMatchObject({ required: true, schema: { type: 'integer' } });
    }
  });

  it('documents 500 and 503, and every other error status of docs/api.md where it can occur', () => {
    const expected: Record<string, string[]> = {
      'get /': ['200', '400', '401', '403', '429', '500', '503'],
      'put /datasets/{id}': ['200', '201', '400', '401', '403', '408', '409', '413', '415', '422', '429', '500', '503'],
      'delete /datasets/{id}': ['200', '400', '401', '403', '404', '409', '422', '429', '500', '503'],
      'post /datasets/{id}/data': ['200', '400', '401', '403', '404', '408', '409', '413', '415', '422', '429', '500', '503'],
      'put /datasets/{id}/data': ['200', '400', '401', '403', '404', '408', '409', '413', '415', '422', '429', '500', '503'],
    };
    for (const { method, path, operation } of operations) {
      expect(Object.keys(operation.responses as JsonObject).sort()).toEqual(expected[`${method} ${path}`]);
    }
    const unrouted = doc['x-unrouted-responses'] as JsonObject;
    expect(Object.keys(unrouted).sort()).toEqual(['400', '401', '403', '404', '405', '429']);
    expect(headersOf(deref(doc, unrouted['405']) as JsonObject).Allow).toMatchObject({ required: true });
  });

  it('puts X-Request-Id on every response, RateLimit-* on every success, and the error shape on every error', () => {
    const all = [
      ...operations.flatMap(({ method, path, operation }) =>
        Object.keys(operation.responses as JsonObject).map((status) => ({ where: `${method} ${path} ${status}`, status, response: responseOf(operation, status)! })),
      ),
      ...Object.entries(doc['x-unrouted-responses'] as JsonObject).map(([status, r]) => ({ where: `unrouted ${status}`, status, response: deref(doc, r) as JsonObject })),
    ];
    for (const { where, status, response } of all) {
      const headers = headersOf(response);
      expect({ where, requestId: headers['X-Request-Id']?.required }).toEqual({ where, requestId: true });
      const content = response.content as JsonObject;
      expect({ where, media: Object.keys(content) }).toEqual({ where, media: ['application/json'] });
      const schema = (content['application/json'] as JsonObject).schema as JsonObject;
      if (status.startsWith('2')) {
        for (const name of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
          expect({ where, name, required: headers[name]?.required }).toEqual({ where, name, required: true });
        }
      } else {
        const target = deref(doc, schema) as JsonObject;
        const isError = schema.$ref === '#/components/schemas/Error' || collectRefs(target.allOf).includes('#/components/schemas/Error');
        expect({ where, isError }).toEqual({ where, isError: true });
      }
    }
  });

  it('has component schemas that compile under Ajv 2020 strict mode', () => {
    expect(new OpenApiValidator(doc).compileAllSchemas()).toEqual(expect.arrayContaining(['Dataset', 'Error', 'EmptyObject', 'AppendRequest']));
  });
});

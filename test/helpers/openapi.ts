/*
 * Checks real (or hand-made) HTTP exchanges against docs/openapi.yaml, so the document and the server
 * cannot drift apart unnoticed: e2e tests call `validateResponse` on every response they receive.
 *
 * How: the document's `components.schemas` become the `$defs` of one Ajv 2020 schema (with `$ref`s
 * rewritten from `#/components/schemas/X` to `<base>#/$defs/X`); response and request body schemas are
 * compiled against it. OpenAPI-level `$ref`s (responses, headers, parameters) are followed by JSON
 * pointer into the document. Ajv runs in strict mode, so a misspelt keyword in the document fails here.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

export const OPENAPI_PATH = path.resolve(__dirname, '../../docs/openapi.yaml');

/** Operation methods of an OpenAPI 3.1 path item. */
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

const SCHEMAS_BASE = 'https://pushbase.invalid/openapi/components.json';
const COMPONENT_SCHEMA_REF = '#/components/schemas/';

export type JsonObject = Record<string, unknown>;
export type HttpHeaders = Record<string, string | string[] | undefined>;

export const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

export function loadOpenApiDocument(file: string = OPENAPI_PATH): JsonObject {
  const doc: unknown = parse(readFileSync(file, 'utf8'));
  if (!isObject(doc)) throw new Error(`${file} does not hold a YAML mapping`);
  return doc;
}

/** Follows a local `$ref` (`#/a/b~1c`) into the document. */
export function resolvePointer(doc: JsonObject, ref: string): unknown {
  if (!ref.startsWith('#')) throw new Error(`Only local references are supported, not ${ref}`);
  let node: unknown = doc;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const token = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isObject(node) && !Array.isArray(node)) throw new Error(`Unresolvable reference ${ref}`);
    node = (node as JsonObject)[token];
  }
  if (node === undefined) throw new Error(`Unresolvable reference ${ref}`);
  return node;
}

/** Follows `$ref` chains of OpenAPI objects (responses, headers, parameters, request bodies). */
export function deref(doc: JsonObject, node: unknown): unknown {
  let current = node;
  for (let hops = 0; isObject(current) && typeof current.$ref === 'string'; hops++) {
    if (hops > 20) throw new Error('Reference cycle');
    current = resolvePointer(doc, current.$ref);
  }
  return current;
}

/** Deep copy of a schema with component references pointed at the Ajv `$defs` schema. */
function rewriteRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$ref' && typeof v === 'string') {
      if (!v.startsWith(COMPONENT_SCHEMA_REF)) throw new Error(`Schema reference ${v} does not point into components.schemas`);
      out[k] = `${SCHEMAS_BASE}#/$defs/${v.slice(COMPONENT_SCHEMA_REF.length)}`;
    } else {
      out[k] = rewriteRefs(v);
    }
  }
  return out;
}

export interface DocumentedOperation {
  readonly method: (typeof HTTP_METHODS)[number];
  readonly path: string;
  readonly operation: JsonObject;
}

export function listOperations(doc: JsonObject): DocumentedOperation[] {
  const out: DocumentedOperation[] = [];
  const paths = isObject(doc.paths) ? doc.paths : {};
  for (const [p, item] of Object.entries(paths)) {
    const pathItem = deref(doc, item);
    if (!isObject(pathItem)) continue;
    for (const method of HTTP_METHODS) {
      const operation = pathItem[method];
      if (isObject(operation)) out.push({ method, path: p, operation });
    }
  }
  return out;
}

function formatAjvErrors(prefix: string, errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => {
    const where = `${prefix}${e.instancePath}`;
    const extra =
      e.keyword === 'additionalProperties' || e.keyword === 'required' || e.keyword === 'const' || e.keyword === 'enum'
        ? ` ${JSON.stringify(e.params)}`
        : '';
    return `${where} ${e.message ?? e.keyword}${extra}`;
  });
}

const templateRegex = (template: string): RegExp =>
  new RegExp(`^${template.split(/\{[^}]+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^/]+')}$`);

export class OpenApiValidator {
  readonly document: JsonObject;
  private readonly bodies: Ajv2020;
  private readonly headerAjv: Ajv2020;
  private readonly cache = new Map<string, ValidateFunction>();
  private readonly templates: ReadonlyArray<{ readonly template: string; readonly regex: RegExp }>;

  constructor(document: JsonObject = loadOpenApiDocument()) {
    this.document = document;
    const components = isObject(document.components) ? document.components : {};
    const schemas = isObject(components.schemas) ? components.schemas : {};
    const defs = { $id: SCHEMAS_BASE, $defs: rewriteRefs(schemas) };
    // strict: a keyword Ajv does not know (a typo, or an OpenAPI-only keyword like `example`) is an error.
    // strictRequired is off: `if: {type: money} then: {required: [currency_code]}` names a property that
    // the enclosing schema defines, which that check cannot see.
    // allowUnionTypes: record values are `type: [string, number, 'null']`.
    const options = { strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true } as const;
    this.bodies = new Ajv2020(options);
    // Header values arrive as strings; `coerceTypes` lets an integer header be checked as an integer.
    this.headerAjv = new Ajv2020({ ...options, coerceTypes: true });
    for (const ajv of [this.bodies, this.headerAjv]) {
      addFormats(ajv);
      ajv.addSchema(defs);
    }
    const paths = isObject(document.paths) ? document.paths : {};
    this.templates = Object.keys(paths).map((template) => ({ template, regex: templateRegex(template) }));
  }

  /** Compiles every component schema (throws on a schema Ajv rejects in strict mode). */
  compileAllSchemas(): string[] {
    const components = isObject(this.document.components) ? this.document.components : {};
    const names = Object.keys(isObject(components.schemas) ? components.schemas : {});
    for (const name of names) {
      if (this.bodies.getSchema(`${SCHEMAS_BASE}#/$defs/${name}`) === undefined) throw new Error(`Schema ${name} did not compile`);
    }
    return names;
  }

  /** The path template for a template or a concrete path (`/datasets/abc/data` → `/datasets/{id}/data`). */
  matchPath(pathOrTemplate: string): string | undefined {
    const paths = isObject(this.document.paths) ? this.document.paths : {};
    if (pathOrTemplate in paths) return pathOrTemplate;
    const bare = pathOrTemplate.split('?')[0] ?? pathOrTemplate;
    return this.templates.find((t) => t.regex.test(bare))?.template;
  }

  private operation(method: string, pathOrTemplate: string): JsonObject | undefined {
    const template = this.matchPath(pathOrTemplate);
    if (template === undefined) return undefined;
    const item = deref(this.document, (this.document.paths as JsonObject)[template]);
    if (!isObject(item)) return undefined;
    const op = item[method.toLowerCase()];
    return isObject(op) ? op : undefined;
  }

  private compile(key: string, ajv: Ajv2020, schema: unknown): ValidateFunction {
    let fn = this.cache.get(key);
    if (fn === undefined) {
      fn = ajv.compile(rewriteRefs(schema) as JsonObject);
      this.cache.set(key, fn);
    }
    return fn;
  }

  /** Finds the documented response; undocumented operations fall back to `x-unrouted-responses` (404, 405). */
  private response(method: string, pathOrTemplate: string, status: number): { response?: JsonObject; where: string; error?: string } {
    const op = this.operation(method, pathOrTemplate);
    const upper = method.toUpperCase();
    let responses: unknown;
    let where: string;
    if (op !== undefined) {
      responses = op.responses;
      where = `${upper} ${this.matchPath(pathOrTemplate) ?? pathOrTemplate}`;
    } else {
      responses = this.document['x-unrouted-responses'];
      where = `unrouted ${upper} ${pathOrTemplate}`;
    }
    if (!isObject(responses)) return { where, error: `${where}: no responses documented` };
    const found = responses[String(status)] ?? responses[`${Math.floor(status / 100)}XX`] ?? responses.default;
    const response = deref(this.document, found);
    if (!isObject(response)) {
      const documented = Object.keys(responses).join(', ');
      return {
        where,
        error:
          op === undefined
            ? `${where}: no such operation in the document (only ${documented} are documented for unknown routes and methods), got ${status}`
            : `${where}: status ${status} is not documented (documented: ${documented})`,
      };
    }
    return { response, where };
  }

  validateResponse(method: string, pathOrTemplate: string, status: number, headers: HttpHeaders, body: unknown): string[] {
    const { response, where, error } = this.response(method, pathOrTemplate, status);
    if (response === undefined) return [error ?? `${where}: no response`];
    const errors: string[] = [];
    const lower = new Map<string, string[]>();
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      const values = Array.isArray(value) ? value : [value];
      lower.set(name.toLowerCase(), [...(lower.get(name.toLowerCase()) ?? []), ...values]);
    }

    // Headers: every documented `required: true` header is present, and every documented header that is
    // present matches its schema.
    const documentedHeaders = isObject(response.headers) ? response.headers : {};
    for (const [name, raw] of Object.entries(documentedHeaders)) {
      if (name.toLowerCase() === 'content-type') continue; // described by `content`, per OpenAPI
      const header = deref(this.document, raw);
      if (!isObject(header)) continue;
      const values = lower.get(name.toLowerCase());
      if (values === undefined || values.length === 0) {
        if (header.required === true) errors.push(`${where} ${status}: header ${name} is required but missing`);
        continue;
      }
      if (header.schema === undefined) continue;
      const validate = this.compile(`header ${where} ${status} ${name}`, this.headerAjv, {
        type: 'object',
        required: ['value'],
        properties: { value: header.schema },
      });
      for (const v of values) {
        if (!validate({ value: v })) {
          for (const e of validate.errors ?? []) errors.push(`${where} ${status}: header ${name} ${JSON.stringify(v)} ${e.message ?? e.keyword}`);
        }
      }
    }

    // Body: the Content-Type must be a documented media type and the body must match its schema.
    const content = isObject(response.content) ? response.content : undefined;
    if (content === undefined) {
      if (body !== undefined && body !== '') errors.push(`${where} ${status}: no body is documented, but one was sent`);
      return errors;
    }
    const contentType = lower.get('content-type')?.[0];
    const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
    const mediaTypes = Object.keys(content);
    if (mediaType === undefined) {
      errors.push(`${where} ${status}: header Content-Type is missing (documented: ${mediaTypes.join(', ')})`);
    } else if (!mediaTypes.includes(mediaType)) {
      errors.push(`${where} ${status}: Content-Type ${contentType ?? ''} is not documented (documented: ${mediaTypes.join(', ')})`);
    }
    const media = content[mediaType !== undefined && mediaType in content ? mediaType : (mediaTypes[0] ?? '')];
    if (isObject(media) && media.schema !== undefined) {
      const validate = this.compile(`body ${where} ${status} ${mediaType ?? ''}`, this.bodies, media.schema);
      if (!validate(body)) errors.push(...formatAjvErrors(`${where} ${status}: body`, validate.errors));
    }
    return errors;
  }

  /** Checks a request body against the operation's documented request body (JSON only). */
  validateRequestBody(method: string, pathOrTemplate: string, body: unknown): string[] {
    const op = this.operation(method, pathOrTemplate);
    const where = `${method.toUpperCase()} ${pathOrTemplate}`;
    if (op === undefined) return [`${where}: no such operation in the document`];
    const requestBody = deref(this.document, op.requestBody);
    if (!isObject(requestBody)) return body === undefined ? [] : [`${where}: no request body is documented`];
    const media = isObject(requestBody.content) ? requestBody.content['application/json'] : undefined;
    if (!isObject(media) || media.schema === undefined) return [`${where}: no application/json request schema`];
    const validate = this.compile(`request ${where}`, this.bodies, media.schema);
    return validate(body) ? [] : formatAjvErrors(`${where}: request body`, validate.errors);
  }
}

let shared: OpenApiValidator | undefined;
const validator = (): OpenApiValidator => (shared ??= new OpenApiValidator());

/**
 * Errors of one response against docs/openapi.yaml (empty when it conforms). `pathTemplate` is a
 * documented path (`/datasets/{id}/data`) or a concrete one (`/datasets/sales/data`); header names are
 * case-insensitive. Operations the document does not describe are checked against
 * `x-unrouted-responses` (404 unknown route, 405 wrong method).
 */
export function validateResponse(method: string, pathTemplate: string, status: number, headers: HttpHeaders, body: unknown): string[] {
  return validator().validateResponse(method, pathTemplate, status, headers, body);
}

/** Errors of a request body against the operation's documented schema (empty when it conforms). */
export function validateRequestBody(method: string, pathTemplate: string, body: unknown): string[] {
  return validator().validateRequestBody(method, pathTemplate, body);
}

export interface SpecCheck {
  valid: boolean;
  version?: string;
  errors?: unknown;
}

/**
 * Runs @seriousme/openapi-schema-validator on a document. The package is ESM only and jest runs this
 * suite as CommonJS through its own module registry (which cannot load ESM without
 * --experimental-vm-modules), so the validator runs in a child Node process that reads the document
 * as JSON on stdin and prints its verdict.
 */
export function validateSpec(spec: unknown): SpecCheck {
  const moduleUrl = pathToFileURL(require.resolve('@seriousme/openapi-schema-validator')).href;
  const script = `
    import { Validator } from ${JSON.stringify(moduleUrl)};
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(input));
    process.stdout.write(JSON.stringify({ ...result, version: validator.version }));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    input: JSON.stringify(spec),
    encoding: 'utf8',
    timeout: 30_000,
  });
  return JSON.parse(out) as SpecCheck;
}

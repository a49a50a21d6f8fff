import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { ApiError } from '../../shared/errors.js';
import type { RouteDef } from '../routes/route.js';
import { fullPath, type OpenApiDocument } from './document.js';

const addFormats = formats as unknown as typeof formats.default;
const DOC_ID = 'openapi.json';
// Keys of an OpenAPI document that are not JSON Schema keywords; declared so strict mode accepts the document.
const OPENAPI_KEYS = ['openapi', 'info', 'paths', 'components', 'servers', 'tags', 'security', 'webhooks', 'jsonSchemaDialect', 'externalDocs'];

export interface ValidationIssue {
  path: string;
  in: 'body' | 'query' | 'path';
  message: string;
}

export interface OperationValidator {
  body?: ValidateFunction;
  query?: ValidateFunction;
  params?: ValidateFunction;
}

/** Appends escaped JSON-pointer segments to an (already escaped) base pointer. */
function pointer(base: string, ...parts: (string | number)[]): string {
  return [base, ...parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1'))].join('/');
}

function newAjv(coerce: boolean): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: true, coerceTypes: coerce, useDefaults: coerce });
  addFormats(ajv);
  // ajv-formats' uuid also takes `urn:uuid:...`, which PostgreSQL's uuid type does not.
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addVocabulary(OPENAPI_KEYS);
  ajv.addKeyword({ keyword: 'x-required-scope' });
  ajv.addKeyword({ keyword: 'x-sandbox-only' });
  return ajv;
}

/** Compiles, from the document itself, a validator per operation: body strictly, query and path with string coercion. */
export function compileValidators(doc: OpenApiDocument, routes: RouteDef[]): Map<RouteDef, OperationValidator> {
  const strict = newAjv(false);
  const coercing = newAjv(true);
  strict.addSchema({ ...doc, $id: DOC_ID });
  coercing.addSchema({ ...doc, $id: DOC_ID });
  const out = new Map<RouteDef, OperationValidator>();
  for (const route of routes) {
    const opPointer = pointer('#', 'paths', fullPath(route), route.method);
    const op = doc.paths[fullPath(route)][route.method];
    const validator: OperationValidator = {};
    if (route.body) {
      validator.body = strict.compile({ $ref: `${DOC_ID}${pointer(opPointer, 'requestBody', 'content', 'application/json', 'schema')}` });
    }
    for (const where of ['query', 'path'] as const) {
      const indexed = ((op.parameters ?? []) as { in?: string; name: string; required?: boolean }[])
        .map((p, i) => ({ p, i }))
        .filter(({ p }) => p.in === where);
      if (where === 'path' && indexed.length === 0) continue;
      const schema = {
        type: 'object',
        additionalProperties: false,
        required: indexed.filter(({ p }) => p.required).map(({ p }) => p.name),
        properties: Object.fromEntries(indexed.map(({ p, i }) => [p.name, { $ref: `${DOC_ID}${pointer(opPointer, 'parameters', i, 'schema')}` }])),
      };
      validator[where === 'query' ? 'query' : 'params'] = coercing.compile(schema);
    }
    out.set(route, validator);
  }
  return out;
}

function issue(err: ErrorObject, where: ValidationIssue['in']): ValidationIssue {
  let path = err.instancePath.slice(1).split('/').filter(Boolean).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')).join('.');
  let message = err.message ?? 'is invalid';
  if (err.keyword === 'required') {
    const missing = (err.params as { missingProperty: string }).missingProperty;
    path = path ? `${path}.${missing}` : missing;
    message = 'is required';
  } else if (err.keyword === 'additionalProperties') {
    const extra = (err.params as { additionalProperty: string }).additionalProperty;
    path = path ? `${path}.${extra}` : extra;
    message = 'is not a known field';
  } else if (err.keyword === 'enum') {
    message = `must be one of: ${(err.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
  }
  return { path: path || (where === 'body' ? '(body)' : '(query)'), in: where, message };
}

/** Runs one validator; throws 400 invalid_request with a field-level list. Returns the (coerced) value. */
export function check<T>(fn: ValidateFunction | undefined, value: unknown, where: ValidationIssue['in']): T {
  if (!fn) return value as T;
  if (fn(value)) return value as T;
  const seen = new Set<string>();
  const issues = (fn.errors ?? []).map((e) => issue(e, where)).filter((i) => {
    const k = `${i.path}|${i.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const first = issues[0];
  throw ApiError.invalid(first ? `${first.path} ${first.message}` : `Invalid ${where}.`, issues);
}

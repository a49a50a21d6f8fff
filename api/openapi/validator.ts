import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { AppError, MAX_DETAIL_ITEMS } from '../../shared/errors.js';
import type { RouteDef } from '../routes/route.js';
import { fullPath, type OpenApiDocument } from './document.js';

const addFormats = formats as unknown as typeof formats.default;
const DOC_ID = 'openapi.json';
// Keys of an OpenAPI document that are not JSON Schema keywords; declared so strict mode accepts the document.
const OPENAPI_KEYS = ['openapi', 'info', 'paths', 'components', 'servers', 'tags', 'security', 'webhooks', 'jsonSchemaDialect', 'externalDocs'];

export interface ValidationIssue {
  path: string;
  in: 'body' | 'query' | 'path' | 'header';
  message: string;
}

export interface OperationValidator {
  body?: ValidateFunction;
  query?: ValidateFunction;
  params?: ValidateFunction;
  /** Query and path parameters that are not strings, by name: their text is converted before validation. */
  paramTypes: Map<string, 'integer' | 'number' | 'boolean'>;
}

const INTEGER_TEXT = /^-?(0|[1-9][0-9]{0,14})$/;
const NUMBER_TEXT = /^-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?$/;

/**
 * Query and path values arrive as text. Only the canonical spelling becomes a number or boolean (`25`, `true`);
 * anything else (`Infinity`, `1e309`, `0x10`, ` 5`, a repeated parameter) stays as it came and fails the schema.
 */
function fromText(values: Record<string, unknown>, types: OperationValidator['paramTypes']): Record<string, unknown> {
  for (const [name, type] of types) {
    const raw = values[name];
    if (typeof raw !== 'string') continue;
    if (type === 'boolean') {
      if (raw === 'true' || raw === 'false') values[name] = raw === 'true';
    } else if ((type === 'integer' ? INTEGER_TEXT : NUMBER_TEXT).test(raw)) {
      values[name] = Number(raw);
    }
  }
  return values;
}

/** The schema a (possibly `$ref`) schema stands for, within the document. */
function resolve(doc: OpenApiDocument, schema: Record<string, any>): Record<string, any> {
  let s = schema;
  for (let i = 0; i < 10 && typeof s.$ref === 'string' && s.$ref.startsWith('#/'); i++) {
    s = s.$ref.slice(2).split('/').reduce((node: any, part: string) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc) ?? {};
  }
  return s;
}

/** Appends escaped JSON-pointer segments to an (already escaped) base pointer. */
function pointer(base: string, ...parts: (string | number)[]): string {
  return [base, ...parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1'))].join('/');
}

function newAjv(useDefaults: boolean): Ajv2020 {
  // No type coercion: ajv would read `Infinity`, `0x10` or ` 5` as numbers. Query and path text is converted by
  // `fromText` below, which takes only canonical forms.
  const ajv = new Ajv2020({ allErrors: true, strict: true, useDefaults });
  addFormats(ajv);
  // ajv-formats' uuid also takes `urn:uuid:...`, which PostgreSQL's uuid type does not.
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  // The shape only: the EIP-55 checksum and the zero address are refused by the domain, with their own messages.
  ajv.addFormat('evm-address', /^0x[0-9a-fA-F]{40}$/);
  // RFC 3339 allows year 0000; PostgreSQL's timestamptz does not (it has no year zero): such a filter is a 400, not a 500.
  const rfc3339 = fullFormats['date-time'] as { validate: (s: string) => boolean };
  ajv.addFormat('date-time', { type: 'string', validate: (s: string) => rfc3339.validate(s) && !s.startsWith('0000') });
  ajv.addVocabulary(OPENAPI_KEYS);
  ajv.addKeyword({ keyword: 'x-required-scope' });
  ajv.addKeyword({ keyword: 'x-sandbox-only' });
  // OpenAPI's discriminator (response unions such as Transaction) only names the branch; `oneOf` does the validating.
  ajv.addKeyword({ keyword: 'discriminator' });
  return ajv;
}

/** Compiles, from the document itself, a validator per operation: body strictly, query and path after `fromText`. */
export function compileValidators(doc: OpenApiDocument, routes: RouteDef[]): Map<RouteDef, OperationValidator> {
  const strict = newAjv(false);
  const withDefaults = newAjv(true);
  strict.addSchema({ ...doc, $id: DOC_ID });
  withDefaults.addSchema({ ...doc, $id: DOC_ID });
  const out = new Map<RouteDef, OperationValidator>();
  for (const route of routes) {
    const opPointer = pointer('#', 'paths', fullPath(route), route.method);
    const op = doc.paths[fullPath(route)][route.method];
    const validator: OperationValidator = { paramTypes: new Map() };
    if (route.body) {
      validator.body = strict.compile({ $ref: `${DOC_ID}${pointer(opPointer, 'requestBody', 'content', 'application/json', 'schema')}` });
    }
    for (const where of ['query', 'path'] as const) {
      const indexed = ((op.parameters ?? []) as { in?: string; name: string; required?: boolean }[])
        .map((p, i) => ({ p, i }))
        .filter(({ p }) => p.in === where);
      if (where === 'path' && indexed.length === 0) continue;
      for (const { p, i } of indexed) {
        const type = resolve(doc, (op.parameters[i] as { schema: Record<string, any> }).schema).type;
        if (type === 'integer' || type === 'number' || type === 'boolean') validator.paramTypes.set(p.name, type);
      }
      const schema = {
        type: 'object',
        additionalProperties: false,
        required: indexed.filter(({ p }) => p.required).map(({ p }) => p.name),
        properties: Object.fromEntries(indexed.map(({ p, i }) => [p.name, { $ref: `${DOC_ID}${pointer(opPointer, 'parameters', i, 'schema')}` }])),
      };
      validator[where === 'query' ? 'query' : 'params'] = withDefaults.compile(schema);
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

/** Validates query or path parameters (a fresh object of their text values); returns them typed, defaults filled. */
export function checkParams<T>(validator: OperationValidator, values: Record<string, unknown>, where: 'query' | 'path'): T {
  return check(where === 'query' ? validator.query : validator.params, fromText(values, validator.paramTypes), where);
}

/** Runs one validator; throws 400 invalid_request with a field-level list. Returns the value (defaults filled). */
export function check<T>(fn: ValidateFunction | undefined, value: unknown, where: ValidationIssue['in']): T {
  if (!fn) return value as T;
  if (fn(value)) return value as T;
  const seen = new Set<string>();
  const issues: ValidationIssue[] = [];
  // The answer lists no more than MAX_DETAIL_ITEMS: 10,000 bad array elements are not worth describing.
  for (const err of fn.errors ?? []) {
    const i = issue(err, where);
    const k = `${i.path}|${i.message}`;
    if (seen.has(k)) continue;
    seen.add(k);
    issues.push(i);
    if (issues.length === MAX_DETAIL_ITEMS) break;
  }
  const first = issues[0];
  throw AppError.invalid(first ? `${first.path} ${first.message}` : `Invalid ${where}.`, issues);
}

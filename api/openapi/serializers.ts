// Answers leave through serializers fast-json-stringify compiles from each operation's OpenAPI response schema: the
// same document that validates requests says what an answer holds, only declared fields leave, and no answer walks
// its object generically. Each (operation, status) is compiled on its first answer, so a web process starts as fast.
import build from 'fast-json-stringify';
import { isDeepStrictEqual } from 'node:util';
import { fullPath, type OpenApiDocument } from './document.js';
import type { RouteDef } from '../routes/route.js';
import { logger } from '../../shared/logger.js';

/** Serializes one operation's answer of a status; a status without a declared JSON schema falls back to JSON.stringify. */
export type Serialize = (status: number, value: unknown) => string;

const kind = (v: unknown): string => (v === undefined ? 'absent' : v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`);

/** Where an answer and its schema part ways: the first path whose values differ once serialized (never the values). */
function firstDifference(sent: unknown, meant: unknown, path = '(body)'): string {
  if (isDeepStrictEqual(sent, meant)) return '';
  if (sent && meant && typeof sent === 'object' && typeof meant === 'object') {
    const keys = new Set([...Object.keys(sent), ...Object.keys(meant)]);
    for (const key of keys) {
      const found = firstDifference((sent as Record<string, unknown>)[key], (meant as Record<string, unknown>)[key], `${path}.${key}`);
      if (found) return found;
    }
  }
  return `${path} (serialized: ${kind(sent)}; the handler's: ${kind(meant)}${kind(sent) === kind(meant) ? ', another value' : ''})`;
}

/**
 * The document's schemas as fast-json-stringify reads them: a union told apart by a discriminator (OpenAPI's
 * `oneOf` + `discriminator.mapping`, as Transaction) becomes `if`/`then`/`else` on the discriminating property, so an
 * answer picks its shape by one constant instead of being validated against every branch; an object the document
 * leaves free-form (no properties named, as a settlement's `execution`) is sent whole, as JSON Schema reads it.
 */
const serializable = new WeakMap<OpenApiDocument, Record<string, unknown>>();
function serializableSchemas(doc: OpenApiDocument): Record<string, unknown> {
  let schemas = serializable.get(doc);
  if (!schemas) {
    schemas = forSerializing(doc.components.schemas) as Record<string, unknown>;
    serializable.set(doc, schemas);
  }
  return schemas;
}

function forSerializing(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(forSerializing);
  if (!node || typeof node !== 'object') return node;
  const s = node as Record<string, any>;
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, forSerializing(v)]));
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if (types.includes('object') && !s.properties && !s.additionalProperties && !s.patternProperties) out.additionalProperties = true;
  const mapping = s.discriminator?.mapping as Record<string, string> | undefined;
  if (Array.isArray(s.oneOf) && mapping) {
    const property = s.discriminator.propertyName as string;
    const branches = Object.entries(mapping);
    const chain = branches.reduceRight<unknown>((otherwise, [value, ref], i) => (i === branches.length - 1
      ? { $ref: ref }
      : { if: { type: 'object', required: [property], properties: { [property]: { const: value } } }, then: { $ref: ref }, else: otherwise }), null);
    delete out.oneOf;
    delete out.discriminator;
    Object.assign(out, chain);
  }
  return out;
}

/** fast-json-stringify's serializer of one schema of the document (its $refs resolved in the document's components). */
function compiled(doc: OpenApiDocument, schema: object): (value: unknown) => string {
  return build({ ...(forSerializing(schema) as object), components: { schemas: serializableSchemas(doc) } } as never, { ajv: { strictSchema: false } }) as unknown as (value: unknown) => string;
}

/**
 * `fn` with its failures handled as every answer's are: in `check` mode (tests) its text is also compared with
 * JSON.stringify's, so a field the schema does not declare, or declares otherwise, fails loudly instead of silently
 * leaving the answer; an answer its schema cannot express (a value no branch of a union takes) fails a test, and a
 * client still gets it, never a 500 for a row the schema did not foresee.
 */
function guarded(fn: (value: unknown) => string, check: boolean, what: string): (value: unknown) => string {
  return (value) => {
    let text: string;
    try {
      text = fn(value);
    } catch (err) {
      if (check) throw err;
      logger().error({ schema: what, err: (err as Error).message }, 'an answer did not match its OpenAPI schema; sent as it is');
      return JSON.stringify(value);
    }
    if (check) {
      const difference = firstDifference(JSON.parse(text), JSON.parse(JSON.stringify(value)));
      if (difference) throw new Error(`${what}: the answer does not match its OpenAPI schema at ${difference}`);
    }
    return text;
  };
}

/**
 * The serializer of one component schema (`Transaction`): an item rendered on its own, as a page's rows are once per
 * row version (api/rendered.ts), with the same guarantee as an operation's (only declared fields leave).
 */
export function componentSerializer(doc: OpenApiDocument, name: string, check: boolean): (value: unknown) => string {
  if (!doc.components.schemas[name]) throw new Error(`no component schema ${name}`);
  return guarded(compiled(doc, { $ref: `#/components/schemas/${name}` }), check, name);
}

/**
 * The serializer of one operation. `check` (tests): every answer is also serialized by JSON.stringify and compared,
 * so a field the schema does not declare, or declares otherwise, fails loudly instead of silently leaving the answer.
 */
export function serializerFor(doc: OpenApiDocument, route: RouteDef, check: boolean): Serialize {
  const responses = doc.paths[fullPath(route)][route.method].responses as Record<string, { content?: Record<string, { schema?: object }> }>;
  const byStatus = new Map<number, (value: unknown) => string>();
  const compile = (status: number): ((value: unknown) => string) => {
    const schema = responses[status]?.content?.['application/json']?.schema;
    // Errors keep their envelope's own serialization (api/http-errors.ts); only declared answers are compiled.
    const fn = schema && status < 400
      ? guarded(compiled(doc, schema), check, `${route.operationId} ${status}`)
      : JSON.stringify;
    byStatus.set(status, fn);
    return fn;
  };
  return (status, value) => (byStatus.get(status) ?? compile(status))(value);
}

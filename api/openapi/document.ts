import { BUSINESS_BASE, type JsonSchema, type ParamSpec, type RouteDef } from '../routes/route.js';
import { sharedSchemas } from './components.js';
import { errorCodesByStatus, errorCodeSchemas, errorSchemaName, pascal } from './error-codes.js';
import { HEADERS, SHARED_ERROR_RESPONSES, STATUS_TEXT, errorHeaders, successHeaders } from './headers.js';
import { accessNote, guideDescription, TAG_DESCRIPTIONS } from './descriptions.js';

export const CONTRACT_VERSION = '1.0.0';

export type OpenApiDocument = Record<string, any> & { paths: Record<string, Record<string, any>> };

export function fullPath(route: RouteDef): string {
  return BUSINESS_BASE + route.path;
}

function parameters(where: 'path' | 'query', specs: Record<string, ParamSpec> | undefined): object[] {
  return Object.entries(specs ?? {}).map(([name, spec]) => ({
    name,
    in: where,
    required: where === 'path' ? true : Boolean(spec.required),
    ...(spec.description ? { description: spec.description } : {}),
    schema: spec.schema,
    ...(spec.example !== undefined ? { example: spec.example } : {}),
  }));
}

/** The error object of one or several codes: one code's schema, or a union the `code` constant tells apart. */
function errorBody(codes: string[]): JsonSchema {
  const refs = codes.map((c) => ({ $ref: `#/components/schemas/${errorSchemaName(c as never)}` }));
  return { type: 'object', required: ['error'], properties: { error: refs.length === 1 ? refs[0] : { oneOf: refs } } };
}

type ResponseRegistry = Map<string, { name: string; response: object }>;

/**
 * Per status, the codes this operation can answer (derived: see error-codes.ts), as a shared response: operations that
 * answer the same codes refer to the same one (`Conflict_IdempotencyKeyInUse_InvalidState`), so the document stays small.
 */
function errorResponses(route: RouteDef, registry: ResponseRegistry): Record<string, object> {
  const out: Record<string, object> = {};
  for (const [status, codes] of errorCodesByStatus(route)) {
    const key = `${status}:${codes.join()}`;
    let entry = registry.get(key);
    if (!entry) {
      const shared = SHARED_ERROR_RESPONSES[status];
      const isShared = shared && shared.codes.join() === codes.join();
      entry = {
        name: isShared ? shared.name : [pascal(STATUS_TEXT[status]!.toLowerCase().replace(/ /g, '_')), ...codes.map(pascal)].join('_'),
        response: {
          description: `${STATUS_TEXT[status]}: ${codes.map((c) => `\`${c}\``).join(', ')}.${isShared ? ` ${shared.when}` : ''}`,
          headers: errorHeaders(status),
          content: { 'application/json': { schema: errorBody(codes) } },
        },
      };
      registry.set(key, entry);
    }
    out[status] = { $ref: `#/components/responses/${entry.name}` };
  }
  return out;
}

function operation(route: RouteDef, registry: ResponseRegistry): object {
  const mutating = route.method !== 'get';
  const params = [
    ...parameters('path', route.pathParams),
    ...parameters('query', route.query),
    ...(mutating ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : []),
  ];
  const responses: Record<string, object> = {};
  for (const [status, spec] of Object.entries(route.responses)) {
    responses[status] = {
      description: spec.description,
      headers: successHeaders(mutating),
      ...(spec.schema ? { content: { 'application/json': { schema: spec.schema }, ...(spec.csv ? { 'text/csv': { schema: { type: 'string', description: spec.csv } } } : {}) } } : {}),
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: [route.description, accessNote(route)].filter(Boolean).join('\n\n'),
    tags: [route.tag],
    'x-required-scope': route.scope ?? 'any',
    ...(route.sandboxOnly ? { 'x-sandbox-only': true } : {}),
    ...(params.length ? { parameters: params } : {}),
    ...(route.body
      ? {
          requestBody: {
            required: route.body.required !== false,
            ...(route.body.description ? { description: route.body.description } : {}),
            content: { 'application/json': { schema: route.body.schema, ...(route.body.examples ? { examples: route.body.examples } : {}) } },
          },
        }
      : {}),
    responses: { ...responses, ...errorResponses(route, registry) },
  };
}

const INT32_MAX = 2_147_483_647;
// What a format already bounds, written as the maxLength clients and linters read (uuid 36, EVM address 42).
const FORMAT_MAX_LENGTH: Record<string, number> = { uuid: 36, 'date-time': 64, 'evm-address': 42, email: 254, uri: 2048 };

/** Adds the bounds a schema's format already implies, everywhere in the document (routes added later included). */
function boundByFormat(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(boundByFormat);
  if (!node || typeof node !== 'object') return;
  const s = node as Record<string, any>;
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if (types.includes('string') && typeof s.format === 'string' && FORMAT_MAX_LENGTH[s.format] && s.maxLength === undefined) s.maxLength = FORMAT_MAX_LENGTH[s.format];
  if (types.includes('integer') && s.format === undefined && (s.maximum === undefined || s.maximum <= INT32_MAX)) s.format = 'int32';
  Object.values(s).forEach(boundByFormat);
}

/** The single OpenAPI 3.1 document: served at /openapi.json and compiled by ajv for request validation. */
export function buildDocument(routes: RouteDef[], schemas: Record<string, JsonSchema>): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const registry: ResponseRegistry = new Map();
  for (const route of routes) {
    const path = fullPath(route);
    paths[path] ??= {};
    if (paths[path][route.method]) throw new Error(`duplicate route ${route.method.toUpperCase()} ${path}`);
    paths[path][route.method] = operation(route, registry);
  }
  const tags = [...new Set(routes.map((r) => r.tag))].map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? `${name} operations.` }));
  const document: OpenApiDocument = {
    openapi: '3.1.0',
    info: {
      title: 'Rampway Business API',
      version: CONTRACT_VERSION,
      description: guideDescription(),
      contact: { name: 'Rampway API support', email: 'api@rampway.example' },
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [
      {
        url: '/',
        description: 'This deployment, sandbox and production alike: the API key (`svc_test_` or `svc_live_`) chooses the environment, not the URL.',
        'x-internal': false,
      },
    ],
    security: [{ bearerAuth: [] }],
    tags,
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: '`svc_test_...` (sandbox) or `svc_live_...` (live).' } },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          description: 'Identifies one logical write; 8..255 printable ASCII characters; remembered 24 hours. Resend the same key to retry the same request.',
          schema: { type: 'string', minLength: 8, maxLength: 255, pattern: '^[\\x20-\\x7e]{8,255}$' },
        },
      },
      headers: HEADERS,
      responses: Object.fromEntries([...registry.values()].map((e) => [e.name, e.response])),
      schemas: { ...sharedSchemas, ...errorCodeSchemas(), ...schemas },
    },
  };
  // A copy: route modules' schema objects stay as written.
  const bounded = structuredClone(document);
  boundByFormat(bounded);
  return bounded;
}

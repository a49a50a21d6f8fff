import { BUSINESS_BASE, type JsonSchema, type ParamSpec, type RouteDef } from '../routes/route.js';
import { ERROR_STATUSES, sharedSchemas } from './components.js';

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

const RETRY_AFTER = { description: 'Whole seconds to wait before retrying (at least 1).', schema: { type: 'integer', minimum: 1 } };
const REPLAYED = { description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } };

function errorResponses(route: RouteDef): Record<string, object> {
  const out: Record<string, object> = {};
  for (const [status, description] of Object.entries(ERROR_STATUSES)) {
    // 404: an {id} in the path, or an id named in the body (customer_id, wallet_id, ...).
    if (status === '404' && !route.path.includes('{') && !route.sandboxOnly && !route.body) continue;
    // Every write reads its body (to refuse one it does not take), so every write can meet an oversized one.
    if (status === '413' && route.method === 'get') continue;
    const headers = { ...RATE_HEADERS, ...(['409', '429', '503'].includes(status) ? { 'Retry-After': RETRY_AFTER } : {}) };
    out[status] = { description, headers, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } } };
  }
  return out;
}

const RATE_HEADERS = {
  'X-RateLimit-Limit': { description: 'Requests allowed per window.', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in this window.', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'Whole seconds until the window resets (at least 1).', schema: { type: 'integer' } },
  'X-Request-Id': { description: 'This request\'s id; equals error.requestId on errors.', schema: { type: 'string', format: 'uuid' } },
};

function operation(route: RouteDef): object {
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
      headers: mutating ? { ...RATE_HEADERS, 'Idempotent-Replayed': REPLAYED } : RATE_HEADERS,
      ...(spec.schema ? { content: { 'application/json': { schema: spec.schema } } } : {}),
    };
  }
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
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
    responses: { ...responses, ...errorResponses(route) },
  };
}

/** The single OpenAPI 3.1 document: served at /openapi.json and compiled by ajv for request validation. */
export function buildDocument(routes: RouteDef[], schemas: Record<string, JsonSchema>): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const route of routes) {
    const path = fullPath(route);
    paths[path] ??= {};
    if (paths[path][route.method]) throw new Error(`duplicate route ${route.method.toUpperCase()} ${path}`);
    paths[path][route.method] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Rampway Business API',
      version: CONTRACT_VERSION,
      description:
        'Business stablecoin payments: customers with managed USDC wallets, external wallets, beneficiaries, quotes, on-ramps, off-ramps, payment intents and treasury. ' +
        'Sandbox keys (`svc_test_`) simulate everything; live keys (`svc_live_`) move real funds once enabled.',
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: '/' }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: '`svc_test_...` (sandbox) or `svc_live_...` (live).' } },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          description: 'Identifies one logical write; 8..255 characters; remembered 24 hours.',
          schema: { type: 'string', minLength: 8, maxLength: 255 },
        },
      },
      schemas: { ...sharedSchemas, ...schemas },
    },
  };
}

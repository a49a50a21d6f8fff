import type { AuthContext } from '../context.js';
import { ref, type JsonSchema, type RouteDef } from './route.js';

export const schemas: Record<string, JsonSchema> = {
  BusinessAccount: {
    type: 'object',
    required: ['id', 'name', 'environment', 'status', 'live_enabled', 'api_key', 'fees', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      name: { type: 'string' },
      environment: ref('Environment'),
      status: { type: 'string', enum: ['active'] },
      live_enabled: { type: 'boolean' },
      api_key: {
        type: 'object',
        required: ['id', 'prefix', 'scopes', 'allowed_ips', 'rate_limit'],
        properties: {
          id: ref('Uuid'),
          prefix: { type: 'string', description: 'Display prefix of the key; the key itself is never shown again.' },
          scopes: { type: 'array', items: { type: 'string' } },
          allowed_ips: { type: 'array', items: { type: 'string' } },
          rate_limit: {
            type: 'object',
            required: ['limit', 'window_seconds'],
            properties: { limit: { type: 'integer' }, window_seconds: { type: 'integer' } },
          },
        },
      },
      fees: {
        type: 'object',
        required: ['platform_bps', 'platform_min'],
        description: 'The platform fee on each quote: `platform_bps` basis points of the source amount, at least `platform_min` USDC (converted for on-ramps).',
        properties: {
          platform_bps: { type: 'integer', minimum: 0, maximum: 10000 },
          platform_min: { ...ref('DecimalAmount'), description: 'USDC at exactly 6 decimals.' },
        },
      },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
};

export function accountView(auth: AuthContext): Record<string, unknown> {
  return {
    id: auth.businessId,
    name: auth.businessName,
    environment: auth.environment,
    status: auth.businessStatus,
    live_enabled: auth.liveEnabled,
    api_key: {
      id: auth.keyId,
      prefix: auth.keyPrefix,
      scopes: [...auth.scopes],
      allowed_ips: [...auth.allowedIps],
      rate_limit: { limit: auth.rateLimit, window_seconds: auth.rateWindowSeconds },
    },
    fees: { platform_bps: auth.platformFee.bps, platform_min: auth.platformFee.min },
    created_at: auth.businessCreatedAt.toISOString(),
    updated_at: auth.businessUpdatedAt.toISOString(),
  };
}

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/account',
    operationId: 'getAccount',
    summary: 'The authenticated business, environment and API key.',
    tag: 'Account',
    scope: null,
    responses: { '200': { description: 'The business account as seen through this key.', schema: ref('BusinessAccount') } },
    // Served from the authenticated key's cached context: no query beyond authentication.
    handler: async ({ auth }) => ({ status: 200, body: accountView(auth) }),
  },
];

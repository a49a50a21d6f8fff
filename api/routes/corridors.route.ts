import type { Config } from '../../shared/config.js';
import { listCorridors, type Corridor } from '../../shared/domain/corridors.js';
import { liveAvailable, liveNetworks } from '../../shared/providers/live-rails.js';
import { formatAmount, scaleOf } from '../../shared/domain/money.js';
import { listOf } from '../openapi/components.js';
import { ref, type JsonSchema, type RouteDef } from './route.js';

export const schemas: Record<string, JsonSchema> = {
  Corridor: {
    type: 'object',
    required: ['currency', 'payment_method', 'currency_scale', 'min_amount', 'max_amount', 'live_available', 'directions'],
    properties: {
      currency: { type: 'string', description: 'ISO 4217 code of the fiat side.' },
      payment_method: ref('PaymentMethod'),
      currency_scale: { type: 'integer', minimum: 0, description: 'Fractional digits of the currency (ISO 4217 minor units).' },
      min_amount: { ...ref('DecimalAmount'), description: 'Smallest fiat side of a quote, in the currency at its scale.' },
      max_amount: { ...ref('DecimalAmount'), description: 'Largest fiat side of a quote, in the currency at its scale.' },
      live_available: { type: 'boolean', description: 'A live provider serves this corridor; otherwise only sandbox keys can use it.' },
      directions: {
        type: 'array',
        items: { type: 'string', enum: ['offramp', 'onramp'] },
        description: '`offramp`: we pay out to it; `onramp`: we also collect from it.',
      },
      networks: { type: 'array', items: { type: 'string' }, description: 'Mobile money networks (`mobile_network` values), for mobile money corridors only.' },
      live_networks: {
        type: 'array', items: { type: 'string' },
        description: 'The networks live keys can use, for mobile money corridors only (M-Pesa Daraja: every KES network; MTN MoMo: `mtn` in the currencies this deployment serves). Another network answers 422 `unsupported_corridor` with `details.reason = "no_live_provider"`.',
      },
    },
  },
  CorridorList: { ...listOf('Corridor'), description: 'Every corridor, in one page (`has_more` is always false).' },
};

function corridorView(c: Corridor, config: Config): Record<string, unknown> {
  const networks = c.fields.find((f) => f.name === 'mobile_network')?.enum;
  const scale = scaleOf(c.currency);
  return {
    currency: c.currency,
    payment_method: c.payment_method,
    currency_scale: scale,
    min_amount: formatAmount(c.min_amount, scale),
    max_amount: formatAmount(c.max_amount, scale),
    live_available: liveAvailable(config, c),
    directions: [...c.directions],
    ...(networks ? { networks: [...networks], live_networks: liveNetworks(config, c) } : {}),
  };
}

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/corridors',
    operationId: 'listCorridors',
    summary: 'Every currency and payment method we serve, with amount limits and whether live keys can use it.',
    description: 'The corridor registry that quotes, beneficiaries and payouts read, so a client discovers corridors without guessing pairs. ' +
      'Details each corridor needs: GET /beneficiaries/requirements.',
    tag: 'Corridors',
    scope: null,
    responses: { '200': { description: 'Every corridor.', schema: ref('CorridorList') } },
    handler: async ({ deps }) => ({ status: 200, body: { data: listCorridors().map((c) => corridorView(c, deps.config)), has_more: false, next_cursor: null } }),
  },
];

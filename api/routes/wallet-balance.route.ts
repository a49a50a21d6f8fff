import type { Chain } from '../../shared/domain/chains.js';
import { walletBalance } from '../../shared/domain/wallet-balances.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

export const schemas: Record<string, JsonSchema> = {
  WalletBalance: {
    type: 'object',
    required: ['wallet_id', 'chain', 'asset', 'available', 'simulated', 'checked_at', 'token_address'],
    properties: {
      wallet_id: ref('Uuid'),
      chain: ref('Chain'),
      asset: { type: 'string', enum: ['USDC'] },
      available: { ...ref('DecimalAmount'), description: 'USDC at exactly 6 decimals.' },
      simulated: { type: 'boolean', description: 'True in sandbox: the balance comes from the service\'s ledger, not from a chain.' },
      checked_at: { ...ref('Timestamp'), description: 'When the balance was read (live reads are reused for a few seconds).' },
      token_address: { type: 'string', description: 'The USDC contract on this chain.' },
    },
  },
};

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/wallets/{id}/balance',
    operationId: 'getWalletBalance',
    summary: 'USDC balance of a wallet on one chain.',
    description:
      '`chain` is required for managed wallets (one address on every chain) and defaults to the chain of an external wallet. ' +
      'Sandbox answers the simulated ledger balance (`simulated: true`); live reads `balanceOf` on the chain\'s canonical USDC contract, ' +
      'cached for a few seconds, and answers 503 `service_unavailable` with Retry-After when the chain cannot be read.',
    tag: 'Wallets',
    scope: 'wallets:read',
    pathParams: { id: uuidParam },
    query: { chain: { schema: ref('Chain'), description: 'Required for managed wallets.' } },
    responses: { '200': { description: 'The balance.', schema: ref('WalletBalance') } },
    handler: async ({ deps, auth, params, query }) => ({
      status: 200,
      body: await walletBalance(deps.ds, deps.config, auth, (params as { id: string }).id, (query as { chain?: Chain }).chain),
    }),
  },
];

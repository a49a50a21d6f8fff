import type { Chain } from '../../shared/domain/chains.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { fundSandboxWallet } from '../../shared/domain/wallet-balances.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

export const schemas: Record<string, JsonSchema> = {
  SandboxFundWalletRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['chain', 'amount'],
    properties: {
      chain: { ...ref('Chain'), description: 'Any chain for a managed wallet; the registered chain for an external one.' },
      amount: { ...ref('DecimalAmount'), description: 'USDC, more than 0, at most 6 decimals and 1000000000.' },
    },
  },
  SandboxFunding: {
    type: 'object',
    required: ['id', 'wallet_id', 'chain', 'asset', 'amount', 'balance'],
    properties: {
      id: { ...ref('Uuid'), description: 'The ledger entry that credited the wallet.' },
      wallet_id: ref('Uuid'),
      chain: ref('Chain'),
      asset: { type: 'string', enum: ['USDC'] },
      amount: ref('DecimalAmount'),
      balance: ref('WalletBalance'),
    },
  },
};

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/sandbox/wallets/{id}/fund',
    operationId: 'sandboxFundWallet',
    summary: 'Credit simulated USDC to a wallet (sandbox only).',
    description: 'Posts a ledger entry from the sandbox faucet to the wallet on that chain. Archived wallets cannot be funded (409 `resource_archived`). A live key gets 404.',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('SandboxFundWalletRequest'), examples: { fund: { summary: 'Credit 250 simulated USDC on Base', value: { chain: 'base', amount: '250.00' } } }  },
    responses: { '200': { description: 'The funding entry and the new balance.', schema: ref('SandboxFunding') } },
    handler: async ({ deps, auth, params, body }) => ({
      status: 200,
      body: await inUnit(deps, (unit) => fundSandboxWallet(unit.em, deps.config, auth, (params as { id: string }).id, body as { chain: Chain; amount: string })),
    }),
  },
];

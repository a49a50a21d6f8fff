import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { assertSomeProvider } from '../../shared/providers/providers.js';
import type { AppDeps } from '../context.js';
import { startOfframp, type StartOfframpInput } from '../../shared/domain/offramps.js';
import { startOnramp, type StartOnrampInput } from '../../shared/domain/fiat-steps.js';
import { settlementView } from '../../shared/domain/settlements.js';
import { transactionView } from '../../shared/domain/transactions.js';
import { ref, type JsonSchema, type RouteDef } from './route.js';

const EXTERNAL_REFERENCE = { type: 'string', minLength: 1, maxLength: 128, description: 'Your own reference; unique per environment.' };
const EXAMPLE_ID = '00000000-0000-4000-8000-000000000000';

/**
 * A live ramp needs its rails: refused (503) before the quote is read while the chain or every provider adapter is
 * missing; the provider of the quote's corridor and network is checked with the quote.
 */
function assertRails(deps: AppDeps, environment: 'sandbox' | 'live'): void {
  chainFor(environment, deps.config);
  assertSomeProvider(environment, deps.config);
}

export const schemas: Record<string, JsonSchema> = {
  CreateOfframpRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['quote_id', 'funding_source'],
    properties: {
      quote_id: { ...ref('Uuid'), description: 'An `available` off-ramp quote; it is consumed.' },
      funding_source: {
        type: 'object',
        additionalProperties: false,
        required: ['wallet_id'],
        properties: { wallet_id: { ...ref('Uuid'), description: 'A managed wallet (the platform sends for you) or a verified external wallet (you send).' } },
      },
      external_reference: EXTERNAL_REFERENCE,
      refund_address: {
        type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', maxLength: 42,
        description: 'External funding wallets only (else 400): where USDC that is not paid out goes back (an excess, an underpaid or late deposit, a failed payout). Default: `settlement.from_address`.',
      },
    },
  },
  CreateOnrampRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['quote_id', 'payment_method'],
    properties: {
      quote_id: { ...ref('Uuid'), description: 'An `available` on-ramp quote; it is consumed.' },
      payment_method: ref('MobileMoneyPayer'),
      external_reference: EXTERNAL_REFERENCE,
    },
  },
  MobileMoneyPayer: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'phone_number', 'mobile_network'],
    description: 'Who pays by mobile money; the number must fit the currency\'s corridor.',
    properties: {
      type: { type: 'string', enum: ['mobile_money'] },
      phone_number: { type: 'string', minLength: 8, maxLength: 20, description: 'The payer, E.164 (`+2547...`): stored encrypted, shown redacted (`payment_source.phone_number`, `+254*****3344`). Sandbox: ending in 0001 is declined.' },
      mobile_network: { type: 'string', minLength: 1, maxLength: 40 },
    },
  },
};

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/offramps',
    operationId: 'createOfframp',
    errors: ['quote_already_used', 'invalid_state', 'resource_archived', 'quote_expired', 'quote_not_available', 'quote_direction_mismatch', 'wallet_not_verified', 'unsupported_corridor'],
    summary: 'Start an off-ramp: USDC in, fiat paid out to the quote\'s beneficiary.',
    description:
      'Consumes the quote (409 `quote_already_used`; 422 `quote_expired`, `quote_not_available`, `quote_direction_mismatch`) and answers 201 with the transaction (`created`) and its ' +
      '`settlement`: send `total_required` USDC to `settlement.to_address` (ready-made calldata in `settlement.execution`) before `expires_at`. ' +
      'From a managed wallet the platform signs and sends for you (`signing`, `submitting`). The funding wallet must be active (409 `resource_archived`) and, if external, verified (422 `wallet_not_verified`).',
    tag: 'Transactions',
    scope: 'transactions:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreateOfframpRequest'),
      examples: { managed: { summary: 'Fund from a customer\'s managed wallet', value: { quote_id: EXAMPLE_ID, funding_source: { wallet_id: EXAMPLE_ID }, external_reference: 'payout-1042' } } },
    },
    responses: { '201': { description: 'The transaction with its settlement instructions.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, body, reply }) => {
      assertRails(deps, auth.environment);
      return reply(async (unit) => {
        const { transaction, settlement } = await startOfframp(unit, deps.config, auth, body as StartOfframpInput);
        return { status: 201, body: transactionView(transaction, { settlement: settlementView(settlement) }) };
      });
    },
  },
  {
    method: 'post',
    path: '/onramps',
    operationId: 'createOnramp',
    errors: ['quote_already_used', 'invalid_state', 'resource_archived', 'quote_expired', 'quote_not_available', 'quote_direction_mismatch', 'requirements_not_met', 'unsupported_corridor'],
    summary: 'Start an on-ramp: mobile money in, USDC delivered to the quote\'s wallet.',
    description:
      'Consumes the quote (same refusals as off-ramps) and answers 201 with the transaction (`created`); the payer is then prompted to pay `source.total_required`. ' +
      'The payer\'s number must fit the corridor (422 `requirements_not_met`).',
    tag: 'Transactions',
    scope: 'transactions:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreateOnrampRequest'),
      examples: { mpesa: { summary: 'Collect by M-Pesa', value: { quote_id: EXAMPLE_ID, payment_method: { type: 'mobile_money', phone_number: '+254712345678', mobile_network: 'safaricom' } } } },
    },
    responses: { '201': { description: 'The transaction.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, body, reply }) => {
      assertRails(deps, auth.environment);
      return reply(async (unit) => ({ status: 201, body: transactionView(await startOnramp(unit, deps.config, auth, body as StartOnrampInput)) }));
    },
  },
];

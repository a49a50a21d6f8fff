import type { Chain } from '../../shared/domain/chains.js';
import { fundSandboxWallet, sandboxWalletTransfer } from '../../shared/domain/wallet-balances.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';
import { randomUUID } from 'node:crypto';
import { AppError } from '../../shared/errors.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { AmountError, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { settlementOf, settlementView } from '../../shared/domain/settlements.js';
import { simulateOutcome, type SimulateInput } from '../../shared/domain/transaction-actions.js';
import { findTransaction, transactionView } from '../../shared/domain/transactions.js';
import { MAX_SANDBOX_FUNDING_MINOR } from '../../shared/domain/wallet-balances.js';
import { findPaymentIntent, intentJobs, paymentIntentView, type IntentPaymentMethod } from '../../shared/domain/payment-intents.js';

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
  SandboxTransferRequest: {
    type: 'object',
    additionalProperties: false,
    properties: { amount: { ...ref('DecimalAmount'), description: 'USDC sent; default: what is still missing of total_required. Less is a partial payment, more an overpayment.' } },
  },
  SandboxSimulateRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['outcome'],
    properties: {
      outcome: { type: 'string', enum: ['completed', 'failed', 'action_required'] },
      failure_code: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$', maxLength: 64, description: 'Becomes failure.code (snake_case).' },
    },
  },
  SandboxPayRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['method'],
    properties: {
      method: { type: 'string', enum: ['mobile_money', 'stablecoin'], description: '`stablecoin` sends what is still missing of the USDC amount to the deposit address.' },
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
    errors: ['resource_archived'],
    summary: 'Credit simulated USDC to a wallet (sandbox only).',
    description: 'Posts a ledger entry from the sandbox faucet to the wallet on that chain. Archived wallets cannot be funded (409 `resource_archived`). A live key gets 404.',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('SandboxFundWalletRequest'), examples: { fund: { summary: 'Credit 250 simulated USDC on Base', value: { chain: 'base', amount: '250.00' } } }  },
    responses: { '200': { description: 'The funding entry and the new balance.', schema: ref('SandboxFunding') } },
    handler: async ({ deps, auth, params, body, reply }) => reply(async (unit) => ({
      status: 200,
      body: await fundSandboxWallet(unit.em, deps.config, auth, (params as { id: string }).id, body as { chain: Chain; amount: string }),
    })),
  },
  {
    method: 'post',
    path: '/sandbox/settlements/{transaction_id}/transfer',
    operationId: 'sandboxTransfer',
    errors: ['invalid_state'],
    summary: 'Play your on-chain transfer to an off-ramp\'s deposit address (sandbox only).',
    description:
      'Answers 202 with the settlement; the transfer is observed a step later and confirmations rise one per step. Only for an external-wallet off-ramp whose settlement is ' +
      '`awaiting_transfer`, `underpaid` or `expired` (a late deposit: the transaction goes to `action_required` `late_deposit`); else 409 `invalid_state` ' +
      '(a managed wallet\'s transfer is sent by the platform).',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { transaction_id: uuidParam },
    body: { schema: ref('SandboxTransferRequest'), required: false, examples: { full: { summary: 'Send exactly what is required', value: {} }, partial: { summary: 'Send 10 USDC', value: { amount: '10' } } } },
    responses: { '202': { description: 'The settlement as it stands; the transfer lands a step later.', schema: ref('Settlement') } },
    handler: async ({ deps, auth, params, body, reply }) => {
      const given = (body as { amount?: string } | undefined)?.amount;
      // The body first: a bad amount is 400 whatever state the settlement is in.
      let requested: bigint | undefined;
      try {
        requested = given !== undefined ? toMinor(given, USDC_SCALE) : undefined;
      } catch (err) {
        if (err instanceof AmountError) throw AppError.invalid('amount must be USDC with at most 6 decimals.', [{ path: 'amount', in: 'body', message: err.message }]);
        throw err;
      }
      if (requested !== undefined && (requested <= 0n || requested > MAX_SANDBOX_FUNDING_MINOR)) {
        throw AppError.invalid('amount must be more than 0 and at most 1000000000 USDC.', [{ path: 'amount', in: 'body', message: 'is out of range' }]);
      }
      const tx = await findTransaction(deps.ds, auth, (params as { transaction_id: string }).transaction_id);
      const settlement = tx.direction === 'offramp' ? await settlementOf(deps.ds, tx.id) : undefined;
      if (!settlement) throw AppError.invalidState('An on-ramp has no deposit address.');
      if (tx.funding_type !== 'external_wallet') throw AppError.invalidState('The platform sends the transfer of a managed-wallet off-ramp itself.');
      // An expired settlement still takes a transfer: that is how a late deposit is played.
      if (!['awaiting_transfer', 'underpaid', 'expired'].includes(settlement.status)) throw AppError.invalidState(`This settlement is ${settlement.status}.`, { status: settlement.status });
      const missing = toMinor(settlement.total_required, USDC_SCALE) - toMinor(settlement.received_amount, USDC_SCALE);
      const amount = requested ?? (missing > 0n ? missing : toMinor(settlement.total_required, USDC_SCALE));
      // The transfer leaves the external wallet's simulated balance now (the domain books it); the chain sees it a step later.
      return reply(async (unit) => {
        await sandboxWalletTransfer(unit, deps.config, auth, { settlementId: settlement.id, walletId: tx.wallet_id!, chain: settlement.chain, amount });
        return { status: 202, body: settlementView(settlement) };
      });
    },
  },
  {
    method: 'post',
    path: '/sandbox/transactions/{id}/simulate',
    operationId: 'sandboxSimulateTransaction',
    errors: ['invalid_state'],
    summary: 'Force the next outcome of a transaction (sandbox only).',
    description:
      '`failed` and `action_required` happen now (a failure returns what arrived); `completed` makes the next provider decision succeed whatever the magic values say. ' +
      'A transaction already completed or failed: 409 `invalid_state`.',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('SandboxSimulateRequest'), examples: { fail: { summary: 'Fail it with your own code', value: { outcome: 'failed', failure_code: 'beneficiary_bank_closed' } } } },
    responses: { '200': { description: 'The transaction as it now stands.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, params, body, reply }) => reply(async (unit) => ({
      status: 200,
      body: transactionView(await simulateOutcome(unit, chainFor('sandbox', deps.config), auth, (params as { id: string }).id, body as SimulateInput)),
    })),
  },
  {
    method: 'post',
    path: '/sandbox/payment-intents/{id}/pay',
    operationId: 'sandboxPayPaymentIntent',
    errors: ['invalid_state'],
    summary: 'Play the payer of a payment intent (sandbox only).',
    description:
      'Answers 202 with the intent; a step later the payment arrives as the live rails would report it: a mobile-money receipt (confirmed at once) or a USDC transfer ' +
      '(confirmations rise one per step). Only for an intent `awaiting_payment` that accepts the method, else 409 `invalid_state` and nothing changes.',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('SandboxPayRequest'), examples: { mpesa: { summary: 'Pay by mobile money', value: { method: 'mobile_money' } }, usdc: { summary: 'Pay in USDC', value: { method: 'stablecoin' } } } },
    responses: { '202': { description: 'The intent as it stands; the payment lands a step later.', schema: ref('PaymentIntent') } },
    handler: async ({ deps, auth, params, body, reply }) => {
      const { method } = body as { method: IntentPaymentMethod };
      return reply(async (unit) => {
        const found = await findPaymentIntent(unit.em, auth, (params as { id: string }).id, true);
        if (found.status !== 'awaiting_payment') throw AppError.invalidState(`This payment intent is ${found.status}.`, { status: found.status });
        if (!found.accepted_payment_methods.includes(method)) throw AppError.invalidState(`This payment intent does not accept ${method}.`, { accepted_payment_methods: found.accepted_payment_methods });
        await unit.stage(intentJobs.sandboxPay(found.id, method, randomUUID(), deps.config.sandboxStepMs), auth);
        return { status: 202, body: paymentIntentView(found) };
      });
    },
  },
];


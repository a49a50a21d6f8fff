import { AppError } from '../../shared/errors.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { SETTLEMENT_STATUSES, TRANSACTION_STATUSES } from '../../shared/domain/machines.js';
import { settlementOf, settlementView } from '../../shared/domain/settlements.js';
import { findTransaction, TRANSACTION_COLUMNS, transactionView, type TransactionRow } from '../../shared/domain/transactions.js';
import { retryTransaction } from '../../shared/domain/transaction-actions.js';
import { requestRefund, type RefundRequest } from '../../shared/domain/refunds.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { receiptJob } from '../../shared/chain/scanner.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { allRows, listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

const NULLABLE_STRING = { type: ['string', 'null'] };
const NULLABLE_TIME = { type: ['string', 'null'], format: 'date-time' };
const MONEY_SIDE = {
  type: 'object',
  required: ['amount'],
  properties: {
    asset: { type: 'string', enum: ['USDC'], description: 'Present on the USDC side (an off-ramp\'s source, an on-ramp\'s destination).' },
    currency: { type: 'string', description: 'Present on the fiat side (an off-ramp\'s destination, an on-ramp\'s source).', examples: ['KES'] },
    amount: { type: 'string', description: 'Decimal string at the side\'s scale (USDC 6 decimals, KES 2).', examples: ['50.000000'] },
    total_required: { type: 'string', description: 'Source side: the amount plus fees, what must arrive.', examples: ['50.750000'] },
    chain: ref('Chain'),
    wallet_address: { type: 'string' },
    transaction_hash: NULLABLE_STRING,
  },
};

export const schemas: Record<string, JsonSchema> = {
  Settlement: {
    type: 'object',
    required: ['id', 'transaction_id', 'status', 'chain', 'asset', 'token_address', 'from_address', 'to_address', 'amount', 'fee_address', 'fee_amount', 'total_required',
      'received_amount', 'overpaid_amount', 'confirmations', 'required_confirmations', 'execution', 'transaction_hash', 'expires_at', 'detected_at', 'confirmed_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      transaction_id: ref('Uuid'),
      status: { type: 'string', enum: [...SETTLEMENT_STATUSES] },
      chain: ref('Chain'),
      asset: { type: 'string', enum: ['USDC'] },
      token_address: { type: 'string' },
      from_address: { type: 'string', description: 'The funding wallet.' },
      to_address: { type: 'string', description: 'This settlement\'s own deposit address.' },
      amount: { type: 'string' },
      fee_address: { type: 'string', description: 'The platform\'s treasury, where the swept deposit (and so the fee) ends up.' },
      fee_amount: { type: 'string' },
      total_required: { type: 'string', description: 'amount + fee_amount: send exactly this, in one transfer or several.' },
      received_amount: { type: 'string' },
      overpaid_amount: NULLABLE_STRING,
      confirmations: { type: 'integer' },
      required_confirmations: { type: 'integer' },
      execution: { type: 'object', description: '`{ method: "erc20_transfer", to, data, value }` ready to sign; for managed wallets also `submitted { transaction_hash, nonce }`.' },
      transaction_hash: NULLABLE_STRING,
      expires_at: ref('Timestamp'),
      detected_at: NULLABLE_TIME,
      confirmed_at: NULLABLE_TIME,
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  Transaction: {
    type: 'object',
    required: ['id', 'direction', 'quote_id', 'status', 'source', 'destination', 'fees', 'exchange_rate', 'external_reference', 'beneficiary_id', 'wallet_id', 'customer_id',
      'payment_intent_id', 'payout_batch_id', 'funding_source', 'payment_source', 'provider_reference', 'failure', 'refund', 'refund_address', 'completed_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      direction: { type: 'string', enum: ['offramp', 'onramp'] },
      quote_id: ref('Uuid'),
      status: { type: 'string', enum: [...TRANSACTION_STATUSES] },
      source: MONEY_SIDE,
      destination: MONEY_SIDE,
      fees: { type: 'object', required: ['provider', 'platform', 'currency'], properties: { provider: { type: 'string' }, platform: { type: 'string' }, currency: { type: 'string' } } },
      exchange_rate: { type: 'string' },
      external_reference: NULLABLE_STRING,
      beneficiary_id: { type: ['string', 'null'], format: 'uuid' },
      wallet_id: { type: ['string', 'null'], format: 'uuid', description: 'Null for a payout funded from the treasury.' },
      customer_id: { type: ['string', 'null'], format: 'uuid' },
      payment_intent_id: { type: ['string', 'null'], format: 'uuid', description: 'The payment intent whose payment a treasury-funded payout spends.' },
      payout_batch_id: { type: ['string', 'null'], format: 'uuid', description: 'The payout batch a treasury-funded payout is an item of.' },
      funding_source: {
        type: ['object', 'null'],
        description: 'Off-ramps: where the USDC comes from; `reference` is the wallet id, or for `treasury` the payment intent id or the payout batch id.',
        properties: { type: { type: 'string', enum: ['managed_wallet', 'external_wallet', 'treasury'] }, reference: NULLABLE_STRING, address: NULLABLE_STRING },
      },
      payment_source: { type: ['object', 'null'], properties: { type: { type: 'string', enum: ['mobile_money'] }, reference: NULLABLE_STRING, phone_number: { type: 'string', description: 'The payer, redacted: country code and last 4 digits (`+254*****3344`).' }, mobile_network: NULLABLE_STRING } },
      provider_reference: { ...NULLABLE_STRING, description: 'The provider\'s receipt for the money it moved, once known: M-Pesa\'s MpesaReceiptNumber for a collection, its TransactionID for a payout (sandbox makes one up: 10 upper-case letters and digits starting with S).' },
      failure: { type: ['object', 'null'], required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} } },
      refund: {
        type: ['object', 'null'],
        description: 'Money given back (CONTRACT: every unit of money has an exit). Off-ramps: USDC; `amount`: everything returned so far; `to_address`: where (null: the treasury\'s balance); ' +
          '`transaction_hash`: null while pending, and for a sandbox refund credited to a managed wallet\'s balance. On-ramps whose delivery failed (`delivery_failed`): the fiat collected, ' +
          'paid back to the payer\'s phone (`currency`, `phone_number` redacted as `payment_source`\'s, `provider_reference` the provider\'s receipt once paid, `failure` when the provider refused it).',
        required: ['status', 'amount', 'to_address', 'transaction_hash'],
        properties: {
          status: { type: 'string', enum: ['pending', 'completed', 'failed'] }, amount: { type: 'string' }, to_address: NULLABLE_STRING, transaction_hash: NULLABLE_STRING,
          currency: { type: 'string' }, phone_number: NULLABLE_STRING, provider_reference: NULLABLE_STRING,
          failure: { type: ['object', 'null'], properties: { code: { type: 'string' }, message: { type: 'string' } } },
        },
      },
      refund_address: { type: ['string', 'null'], description: 'External-wallet off-ramps: where refunds go (null: back to `settlement.from_address`).' },
      settlement: ref('Settlement'),
      completed_at: NULLABLE_TIME,
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  TransactionList: listOf('Transaction'),
  RefundTransactionRequest: {
    type: 'object',
    additionalProperties: false,
    properties: {
      refund_address: {
        type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', maxLength: 42,
        description: 'External-wallet off-ramps only (else 400): where to send the USDC instead of the off-ramp\'s refund destination; it becomes that destination.',
      },
    },
  },
  ConfirmTransactionRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['transaction_hash'],
    properties: { transaction_hash: { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$', maxLength: 66, description: 'The hash of your transfer to the deposit address.' } },
  },
};

const TAG = 'Transactions';
const byId = (params: unknown) => (params as { id: string }).id;
const TIME = { type: 'string', format: 'date-time' };

interface ListQuery extends PageQuery {
  direction?: string;
  status?: string;
  wallet_id?: string;
  beneficiary_id?: string;
  customer_id?: string;
  payout_batch_id?: string;
  external_reference?: string;
  created_gte?: string;
  created_lte?: string;
}

const FILTERS: [keyof ListQuery, string][] = [
  ['direction', 't.direction = $'], ['status', 't.status = $'], ['wallet_id', 't.wallet_id = $'], ['beneficiary_id', 't.beneficiary_id = $'],
  ['customer_id', 't.customer_id = $'], ['payout_batch_id', 't.payout_batch_id = $'], ['external_reference', 't.external_reference = $'], ['created_gte', 't.created_at >= $'], ['created_lte', 't.created_at <= $'],
];

/** The columns of a transactions export (CONTRACT 16). */
const CSV_COLUMNS = [
  'id', 'direction', 'status', 'created_at', 'completed_at', 'source_amount', 'source_currency_or_asset', 'destination_amount', 'destination_currency_or_asset',
  'fee_provider', 'fee_platform', 'exchange_rate', 'beneficiary_id', 'wallet_id', 'external_reference', 'provider_reference', 'settlement_transaction_hash',
  'destination_transaction_hash',
] as const;

function csvRow(row: TransactionRow & { settlement_transaction_hash: string | null }): Record<string, unknown> {
  const view = transactionView(row) as Record<string, any>;
  return {
    id: row.id, direction: row.direction, status: row.status, created_at: view.created_at, completed_at: view.completed_at,
    source_amount: view.source.amount, source_currency_or_asset: view.source.currency ?? view.source.asset,
    destination_amount: view.destination.amount, destination_currency_or_asset: view.destination.currency ?? view.destination.asset,
    fee_provider: view.fees?.provider, fee_platform: view.fees?.platform, exchange_rate: view.exchange_rate, beneficiary_id: row.beneficiary_id, wallet_id: row.wallet_id,
    external_reference: row.external_reference, provider_reference: view.provider_reference, settlement_transaction_hash: row.settlement_transaction_hash,
    destination_transaction_hash: row.destination_transaction_hash,
  };
}

export const routes: RouteDef[] = [
  {
    method: 'get',
    path: '/transactions',
    operationId: 'listTransactions',
    summary: 'List transactions, newest first.',
    tag: TAG,
    scope: 'transactions:read',
    query: {
      ...paginationQuery,
      direction: { schema: { type: 'string', enum: ['offramp', 'onramp'] } },
      status: { schema: { type: 'string', enum: [...TRANSACTION_STATUSES] } },
      wallet_id: { schema: ref('Uuid') },
      beneficiary_id: { schema: ref('Uuid') },
      customer_id: { schema: ref('Uuid') },
      payout_batch_id: { schema: ref('Uuid'), description: 'The items of one payout batch.' },
      external_reference: { schema: { type: 'string', minLength: 1, maxLength: 128 } },
      created_gte: { schema: TIME, description: 'Created at or after this instant.' },
      created_lte: { schema: TIME, description: 'Created at or before this instant.' },
    },
    responses: {
      '200': {
        description: 'A page of transactions; with `Accept: text/csv`, every transaction the filters match (at most 100,000, newest first), streamed as CSV.',
        schema: ref('TransactionList'),
        csv: `RFC 4180, a header row, one transaction per row: ${CSV_COLUMNS.join(', ')}. A null value is an empty field.`,
      },
    },
    handler: async ({ deps, auth, query }) => {
      const q = query as ListQuery;
      const { where, params } = scopedWhere('t', auth, q as Record<string, unknown>, FILTERS);
      const page = await listPage<TransactionRow & { cursor_ts: string }, unknown>(deps.ds, { columns: TRANSACTION_COLUMNS, from: 'transactions t', alias: 't', where, params }, q, (row) => transactionView(row));
      return { status: 200, body: page };
    },
    csv: {
      columns: CSV_COLUMNS,
      rows: ({ deps, auth, query }) => {
        const { where, params } = scopedWhere('t', auth, query as Record<string, unknown>, FILTERS);
        const columns = `${TRANSACTION_COLUMNS}, (SELECT s.transaction_hash FROM settlements s WHERE s.transaction_id = t.id) AS settlement_transaction_hash`;
        return allRows<TransactionRow & { cursor_ts: string; settlement_transaction_hash: string | null }, Record<string, unknown>>(
          deps.ds, { columns, from: 'transactions t', alias: 't', where, params }, (rows) => rows.map(csvRow));
      },
    },
  },
  {
    method: 'get',
    path: '/transactions/{id}',
    operationId: 'getTransaction',
    summary: 'Retrieve a transaction.',
    tag: TAG,
    scope: 'transactions:read',
    pathParams: { id: uuidParam },
    description: 'An off-ramp embeds its `settlement`, as its creation answer does (the object `GET /transactions/{id}/settlement` returns).',
    responses: { '200': { description: 'The transaction.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, params }) => {
      const tx = await findTransaction(deps.ds, auth, byId(params));
      const settlement = tx.direction === 'offramp' ? await settlementOf(deps.ds, tx.id) : undefined;
      return { status: 200, body: transactionView(tx, settlement ? { settlement: settlementView(settlement) } : {}) };
    },
  },
  {
    method: 'get',
    path: '/transactions/{id}/settlement',
    operationId: 'getTransactionSettlement',
    summary: 'Retrieve an off-ramp\'s settlement (404 for an on-ramp).',
    tag: TAG,
    scope: 'transactions:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The settlement.', schema: ref('Settlement') } },
    handler: async ({ deps, auth, params }) => {
      const tx = await findTransaction(deps.ds, auth, byId(params));
      const settlement = tx.direction === 'offramp' ? await settlementOf(deps.ds, tx.id) : undefined;
      if (!settlement) throw new AppError('not_found', 'An on-ramp has no settlement.');
      return { status: 200, body: settlementView(settlement) };
    },
  },
  {
    method: 'post',
    path: '/transactions/{id}/confirm',
    operationId: 'confirmTransaction',
    errors: ['invalid_state'],
    summary: 'Tell us the hash of your transfer to the deposit address.',
    description:
      'Answers 202. Live: the settlement pool reads that transaction\'s receipt at once and records its USDC transfers to the deposit address (a hash that pays ' +
      'nothing of ours changes nothing; the chain scan would find the transfer anyway). Sandbox: the hash is noted; play the transfer with the sandbox control. ' +
      'Only for an off-ramp still waiting for its funds (else 409 `invalid_state`).',
    tag: TAG,
    scope: 'transactions:write',
    requiresLiveEnabled: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('ConfirmTransactionRequest') },
    responses: { '202': { description: 'Noted; the transaction as it stands.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, params, body }) => {
      const tx = await inUnit(deps, async (unit) => {
        const found = await findTransaction(unit.em, auth, byId(params), true);
        if (found.direction !== 'offramp' || !['created', 'awaiting_funds', 'action_required'].includes(found.status)) {
          throw AppError.invalidState(`An ${found.direction === 'offramp' ? 'off-ramp' : 'on-ramp'} that is ${found.status} does not wait for a transfer.`, { status: found.status });
        }
        if (found.funding_type === 'managed_wallet') throw AppError.invalidState('The platform sends the transfer of a managed-wallet off-ramp itself.');
        const hash = (body as { transaction_hash: string }).transaction_hash.toLowerCase();
        await unit.em.query(`UPDATE settlements SET execution = execution || $2::jsonb, updated_at = now() WHERE transaction_id = $1`, [
          found.id, JSON.stringify({ claimed: { transaction_hash: hash } }),
        ]);
        // Live: the settlement pool reads that receipt at once. Sandbox transfers are played with the sandbox control.
        if (auth.environment === 'live') await unit.stage(receiptJob('live', found.chain, hash), auth);
        return found;
      });
      return { status: 202, body: transactionView(tx) };
    },
  },
  {
    method: 'post',
    path: '/transactions/{id}/retry',
    operationId: 'retryTransaction',
    errors: ['transaction_not_retryable'],
    summary: 'Retry a transaction in action_required whose stalled step can run again.',
    description: 'Answers 202 and resumes the step it stalled in (fund the wallet first after `insufficient_funds`): a managed-wallet or treasury-funded step, ' +
      'a payout stalled on a temporary provider failure (any funding; sent again only once the provider says the earlier request did not pay), ' +
      'a confirmation count whose job ran out, an on-ramp\'s USDC delivery. Anything else (an on-ramp\'s collection included): 409 `transaction_not_retryable`; ' +
      '`underpaid` and `late_deposit` are refunded, never retried (`details.reason`; see POST /transactions/{id}/refund).',
    tag: TAG,
    scope: 'transactions:write',
    requiresLiveEnabled: true,
    pathParams: { id: uuidParam },
    responses: { '202': { description: 'Accepted; the transaction as it now stands.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, params }) => ({
      status: 202,
      body: transactionView(await inUnit(deps, (unit) => retryTransaction(unit, deps.config, auth, byId(params)))),
    }),
  },
  {
    method: 'post',
    path: '/transactions/{id}/refund',
    operationId: 'refundTransaction',
    errors: ['transaction_not_refundable'],
    summary: 'Give back the USDC an off-ramp holds (action_required or failed).',
    description:
      'Answers 202 with the transaction: every USDC it received and neither paid out nor returned goes back to its refund destination (`refund_address` here or at creation, ' +
      'else `settlement.from_address`; a managed wallet\'s funds back to it). An `action_required` off-ramp ends `failed` (`failure.code = "refund_requested"`). ' +
      '`refund.status` is `pending` until the transfer is mined (sandbox: `completed` at once). An off-ramp left waiting on `underpaid` or `late_deposit` is refunded ' +
      'on its own after `AUTO_REFUND_AFTER_SECONDS` (default 900). Otherwise 409 `transaction_not_refundable`, `details.reason`: `nothing_to_refund`, ' +
      '`not_refundable_status`, `payout_outcome_unknown` (a payout request has no final answer yet) or `onramp`.',
    tag: TAG,
    scope: 'transactions:write',
    requiresLiveEnabled: true,
    pathParams: { id: uuidParam },
    body: {
      schema: ref('RefundTransactionRequest'),
      required: false,
      examples: { origin: { summary: 'Back to the refund destination', value: {} }, elsewhere: { summary: 'To another address', value: { refund_address: '0x52908400098527886E0F7030069857D2E4169EE7' } } },
    },
    responses: { '202': { description: 'Accepted; the transaction with its `refund`.', schema: ref('Transaction') } },
    handler: async ({ deps, auth, params, body }) => ({
      status: 202,
      body: transactionView(await inUnit(deps, (unit) => requestRefund(unit, chainFor(auth.environment, deps.config), auth, byId(params), (body ?? {}) as RefundRequest))),
    }),
  },
];

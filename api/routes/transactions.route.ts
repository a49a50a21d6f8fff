import { AppError } from '../../shared/errors.js';
import { TRANSACTION_STATUSES } from '../../shared/domain/machines.js';
import { settlementView } from '../../shared/domain/settlements.js';
import { findTransaction, findTransactionWithSettlement, TRANSACTION_COLUMNS, TRANSACTION_VIEW_COLUMNS, transactionView, type TransactionRow, type TransactionViewRow } from '../../shared/domain/transactions.js';
import { retryTransaction } from '../../shared/domain/transaction-actions.js';
import { requestRefund, type RefundRequest } from '../../shared/domain/refunds.js';
import { chainFor } from '../../shared/chain/sandbox-chain.js';
import { receiptJob } from '../../shared/chain/scanner.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { allRows, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';
import { Rendered, renderedPage } from '../rendered.js';
import { schemas as transactionSchemas } from './transactions.schemas.js';

export const schemas: Record<string, JsonSchema> = {
  ...transactionSchemas,
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
        csv: `RFC 4180, a header row, one transaction per row: ${CSV_COLUMNS.join(', ')}. A null value is an empty field. A reference that begins with \`=\`, \`+\`, \`-\`, \`@\`, a tab or a carriage return is written with a \`'\` before it, so a spreadsheet shows it as text; amounts and ids are written as they are.`,
      },
    },
    handler: async ({ deps, auth, query, rendered }) => {
      const q = query as ListQuery;
      const { where, params } = scopedWhere('t', auth, q as Record<string, unknown>, FILTERS);
      const list = { columns: TRANSACTION_VIEW_COLUMNS, from: 'transactions t', table: 'transactions t', alias: 't', where, params, view: transactionView };
      return { status: 200, body: await renderedPage<TransactionViewRow>(deps.ds, list, q, rendered('a page\'s transactions', 'Transaction')) };
    },
    csv: {
      columns: CSV_COLUMNS,
      text: ['external_reference', 'provider_reference'],
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
    handler: async ({ deps, auth, params, rendered }) => {
      const { tx, settlement, version } = await findTransactionWithSettlement(deps.ds, auth, byId(params));
      const view = (row: TransactionViewRow) => transactionView(row, row.direction === 'offramp' && settlement ? { settlement: settlementView(settlement) } : {});
      return { status: 200, body: new Rendered(rendered('a transaction with its settlement', 'Transaction').bytes(tx, version, view)) };
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
      const { tx, settlement } = await findTransactionWithSettlement(deps.ds, auth, byId(params));
      if (tx.direction !== 'offramp' || !settlement) throw new AppError('not_found', 'An on-ramp has no settlement.');
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
    handler: async ({ auth, params, body, reply }) =>
      reply(async (unit) => {
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
        return { status: 202, body: transactionView(found) };
      }),
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
    handler: async ({ deps, auth, params, reply }) => reply(async (unit) => ({
      status: 202,
      body: transactionView(await retryTransaction(unit, deps.config, auth, byId(params))),
    })),
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
      '`refund.status` is `pending` until the transfer is mined (sandbox: `completed` at once); a refund the chain refused (`failed`) counts nothing in `refund.amount` ' +
      'and is sent again by this request (to a new `refund_address` if given). An off-ramp left waiting on `underpaid` or `late_deposit` is refunded ' +
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
    handler: async ({ deps, auth, params, body, reply }) => reply(async (unit) => ({
      status: 202,
      body: transactionView(await requestRefund(unit, chainFor(auth.environment, deps.config), auth, byId(params), (body ?? {}) as RefundRequest)),
    })),
  },
];

import { randomUUID } from 'node:crypto';
import { listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { TREASURY_WITHDRAWAL_STATUSES } from '../../shared/domain/machines.js';
import {
  createWithdrawal, findWithdrawal, WITHDRAWAL_COLUMNS, withdrawalView, type CreateWithdrawalInput, type WithdrawalRow,
} from '../../shared/domain/treasury-withdrawals.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

// Treasury withdrawals (CONTRACT section 14): treasury USDC sent to a verified external wallet of the business.

const EXAMPLE_ID = '00000000-0000-4000-8000-000000000000';

export const schemas: Record<string, JsonSchema> = {
  CreateTreasuryWithdrawalRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['wallet_id', 'amount'],
    properties: {
      wallet_id: { ...ref('Uuid'), description: 'A verified external wallet of yours (422 `wallet_not_verified` until its ownership is proven).' },
      chain: { ...ref('Chain'), description: 'Optional: the wallet\'s own chain (400 if it names another).' },
      amount: { ...ref('DecimalAmount'), description: 'USDC, at most 6 decimals, more than zero.' },
      external_reference: { type: 'string', minLength: 1, maxLength: 128, description: 'Your reference, shown on the withdrawal and its events.' },
    },
  },
  TreasuryWithdrawal: {
    type: 'object',
    required: ['id', 'wallet_id', 'chain', 'amount', 'status', 'transaction_hash', 'external_reference', 'failure', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      wallet_id: ref('Uuid'),
      chain: ref('Chain'),
      amount: { ...ref('DecimalAmount'), description: 'USDC, at exactly 6 decimals.' },
      status: {
        type: 'string', enum: [...TREASURY_WITHDRAWAL_STATUSES],
        description: '`pending`: debited from the treasury\'s `available`, being sent. `completed`: sent (`transaction_hash`). `failed`: nothing was sent, and the amount is back in `available`.',
      },
      transaction_hash: { type: ['string', 'null'], pattern: '^0x[0-9a-f]{64}$', description: 'The transfer\'s hash once completed (simulated, in the same format, in sandbox).' },
      external_reference: { type: ['string', 'null'] },
      failure: {
        type: ['object', 'null'], required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } },
        description: 'Why it failed: `wallet_archived` (archived before the send), `send_reverted` (the transfer reverted on chain).',
      },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  TreasuryWithdrawalList: listOf('TreasuryWithdrawal'),
};

interface WithdrawalListQuery extends PageQuery {
  status?: string;
}

const FILTERS = [['status', 'w.status = $']] as const;
const TAG = 'Treasury';

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/treasury/withdrawals',
    operationId: 'createTreasuryWithdrawal',
    errors: ['wallet_not_verified', 'resource_archived', 'insufficient_funds'],
    summary: 'Send treasury USDC to a verified external wallet of yours.',
    description:
      'Answers 201 `pending`: the amount leaves the treasury\'s `available` balance at once (409 `insufficient_funds` when it holds less, and nothing changes). ' +
      'Live, the treasury hot wallet sends it on chain (sent once, however often the send is retried); sandbox credits the wallet\'s simulated balance. ' +
      'It then becomes `completed` with its `transaction_hash`, or `failed` with the amount back in `available`; each step is a `treasury_withdrawal.<status>` event. ' +
      'The wallet must be an active external wallet of yours whose ownership is verified (422 `wallet_not_verified`; another business\'s wallet: 404).',
    tag: TAG,
    scope: 'treasury:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreateTreasuryWithdrawalRequest'),
      examples: { withdraw: { summary: 'Withdraw 250 USDC', value: { wallet_id: EXAMPLE_ID, amount: '250.00', external_reference: 'sweep-2026-11' } } },
    },
    responses: { '201': { description: 'The withdrawal, pending.', schema: ref('TreasuryWithdrawal') } },
    handler: async ({ deps, auth, body, reply }) =>
      reply(async (unit) => ({ status: 201, body: withdrawalView(await createWithdrawal(unit, deps.config, auth, randomUUID(), body as CreateWithdrawalInput)) })),
  },
  {
    method: 'get',
    path: '/treasury/withdrawals',
    operationId: 'listTreasuryWithdrawals',
    summary: 'List treasury withdrawals, newest first.',
    tag: TAG,
    scope: 'treasury:read',
    query: { ...paginationQuery, status: { schema: { type: 'string', enum: [...TREASURY_WITHDRAWAL_STATUSES] } } },
    responses: { '200': { description: 'A page of treasury withdrawals.', schema: ref('TreasuryWithdrawalList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as WithdrawalListQuery;
      const { where, params } = scopedWhere('w', auth, q as Record<string, unknown>, FILTERS);
      const page = await listPage<WithdrawalRow & { cursor_ts: string }, unknown>(deps.ds, { columns: WITHDRAWAL_COLUMNS, from: 'treasury_withdrawals w', alias: 'w', where, params }, q, withdrawalView);
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/treasury/withdrawals/{id}',
    operationId: 'getTreasuryWithdrawal',
    summary: 'Retrieve a treasury withdrawal.',
    tag: TAG,
    scope: 'treasury:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The treasury withdrawal.', schema: ref('TreasuryWithdrawal') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: withdrawalView(await findWithdrawal(deps.ds, auth, (params as { id: string }).id)) }),
  },
];

import { randomUUID } from 'node:crypto';
import { listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { PAYOUT_BATCH_STATUSES, TRANSACTION_STATUSES } from '../../shared/domain/machines.js';
import {
  BATCH_COLUMNS, batchView, currenciesToPrice, findBatchView, MAX_BATCH_ITEMS, type BatchRow, type CreatePayoutBatchInput,
} from '../../shared/domain/payout-batches.js';
import { createPayoutBatch } from '../../shared/domain/payout-batch-create.js';
import { freshRate } from '../fresh-rate.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

// Payout batches (CONTRACT section 16): one request pays up to 500 beneficiaries from the treasury.

const EXAMPLE_ID = '00000000-0000-4000-8000-000000000000';
const REFERENCE = { type: 'string', minLength: 1, maxLength: 128 };
const VALUE = { ...ref('DecimalAmount'), description: 'At most the unit\'s scale of decimals (USDC 6, KES 2), more than zero.' };

export const schemas: Record<string, JsonSchema> = {
  CreatePayoutBatchRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['items'],
    properties: {
      items: {
        type: 'array',
        minItems: 1,
        maxItems: MAX_BATCH_ITEMS,
        description: 'The payouts, 1 to 500; each is named by its 0-based position (`index`) in answers and in `invalid_batch` details.',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['beneficiary_id', 'amount'],
          properties: {
            beneficiary_id: { ...ref('Uuid'), description: 'An active beneficiary of yours; it is paid in its own currency by its own payment method.' },
            amount: {
              description: 'Fiat (`currency`, the beneficiary\'s): what the beneficiary receives, priced like a quote\'s `destination_amount`. ' +
                'USDC (`asset`): the payout\'s `source.amount`, fees on top.',
              oneOf: [
                {
                  type: 'object', additionalProperties: false, required: ['currency', 'value'], title: 'Fiat amount',
                  properties: { currency: { type: 'string', pattern: '^[A-Za-z]{3}$', maxLength: 3, description: 'The beneficiary\'s currency (either case).' }, value: VALUE },
                },
                { type: 'object', additionalProperties: false, required: ['asset', 'value'], title: 'USDC amount', properties: { asset: { type: 'string', enum: ['USDC'] }, value: VALUE } },
              ],
            },
            external_reference: { ...REFERENCE, description: 'Your reference for this payout: its transaction\'s `external_reference` (unique among your transactions).' },
          },
        },
      },
      external_reference: { ...REFERENCE, description: 'Your reference for the batch (unique among your batches).' },
    },
  },
  PayoutBatchItem: {
    type: 'object',
    required: ['index', 'beneficiary_id', 'transaction_id', 'status', 'external_reference', 'failure'],
    properties: {
      index: { type: 'integer', minimum: 0, description: 'The item\'s 0-based position in the request\'s `items`.' },
      beneficiary_id: ref('Uuid'),
      transaction_id: { ...ref('Uuid'), description: 'The item\'s treasury-funded off-ramp (GET /transactions/{id}); it carries `payout_batch_id`.' },
      status: { type: 'string', enum: [...TRANSACTION_STATUSES], description: 'The transaction\'s status.' },
      external_reference: { type: ['string', 'null'] },
      failure: { type: ['object', 'null'], required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } }, description: 'Why it failed or waits (`failed`, `action_required`).' },
    },
  },
  PayoutBatch: {
    type: 'object',
    required: ['id', 'status', 'items_count', 'total_usdc', 'completed_count', 'failed_count', 'external_reference', 'completed_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      status: {
        type: 'string', enum: [...PAYOUT_BATCH_STATUSES],
        description: '`processing` while any item is under way (an item in `action_required` included); `completed` once every item is `completed` or `failed` (event `payout_batch.completed`).',
      },
      items_count: { type: 'integer', minimum: 1, maximum: MAX_BATCH_ITEMS },
      total_usdc: { ...ref('DecimalAmount'), description: 'The sum of the items\' `source.total_required`: what the treasury was debited, at once, for the batch.' },
      completed_count: { type: 'integer', minimum: 0 },
      failed_count: { type: 'integer', minimum: 0, description: 'Items that failed; each one\'s `total_required` went back to the treasury\'s `available`.' },
      external_reference: { type: ['string', 'null'] },
      items: { type: 'array', maxItems: MAX_BATCH_ITEMS, items: ref('PayoutBatchItem'), description: 'In `index` order. On creation, retrieval and the event; lists leave them out.' },
      completed_at: { type: ['string', 'null'], format: 'date-time' },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  PayoutBatchList: listOf('PayoutBatch'),
};

interface BatchListQuery extends PageQuery {
  status?: string;
  external_reference?: string;
}

const FILTERS = [['status', 'b.status = $'], ['external_reference', 'b.external_reference = $']] as const;
const TAG = 'Payout batches';

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/payout-batches',
    operationId: 'createPayoutBatch',
    errors: ['invalid_batch', 'insufficient_funds', 'invalid_state'],
    summary: 'Pay up to 500 beneficiaries from the treasury in one request.',
    description:
      'The whole batch is checked and priced before anything moves: any bad item answers 422 `invalid_batch`, `details` naming each bad item by its `index` with the ' +
      'code the same fault answers for a single payout (`not_found`, `resource_archived`, `unsupported_corridor`, `amount_out_of_range`, `invalid_request`, `invalid_state` ' +
      'for an external_reference already used), and nothing is created. Then the treasury is debited once for `total_usdc` (409 `insufficient_funds` when it holds less, and ' +
      'nothing changes) and each item becomes a treasury-funded off-ramp (`funding_source.type` `treasury`, `payout_batch_id`), `funded` and on its way to the provider. ' +
      'Answers 201 `processing`; the batch is `completed` (event `payout_batch.completed`) once every item is `completed` or `failed`; a failed item\'s USDC returns to the ' +
      'treasury. Sandbox magic values behave as for single payouts (a beneficiary ending in 0002 is rejected, 0003 stalls in `action_required`). ' +
      'A batch costs its item count against the key\'s rate limit: one with more items than the window has left answers 429 `rate_limited` (with `Retry-After`, ' +
      'counted as one request) before anything is checked or created; a replay of a batch already answered costs one.',
    tag: TAG,
    scope: 'payouts:write',
    requiresLiveEnabled: true,
    // Each item is a payout: a batch costs its item count against the key's rate limit.
    rateCost: (body) => {
      const items = (body as { items?: unknown } | null)?.items;
      return Array.isArray(items) ? Math.min(items.length, MAX_BATCH_ITEMS) : 1;
    },
    body: {
      schema: ref('CreatePayoutBatchRequest'),
      examples: {
        payroll: {
          summary: 'Pay two people: one KES 2,500 by M-Pesa, one 20 USDC worth',
          value: {
            external_reference: 'payroll-2026-11',
            items: [
              { beneficiary_id: EXAMPLE_ID, amount: { currency: 'KES', value: '2500.00' }, external_reference: 'payroll-2026-11-amina' },
              { beneficiary_id: EXAMPLE_ID, amount: { asset: 'USDC', value: '20.00' } },
            ],
          },
        },
      },
    },
    responses: { '201': { description: 'The batch, processing, with its items.', schema: ref('PayoutBatch') } },
    handler: async ({ deps, auth, body, reply }) => {
      const input = body as CreatePayoutBatchInput;
      // Rates first (the pricing pool may be asked for one), outside the unit that writes.
      const currencies = await currenciesToPrice(deps.ds, deps.config, auth, input);
      const rates = new Map(await Promise.all(currencies.map(async (c) => [c, await freshRate(deps, auth, c)] as const)));
      return reply(async (unit) => ({ status: 201, body: await createPayoutBatch(unit, deps.config, auth, randomUUID(), input, rates) }));
    },
  },
  {
    method: 'get',
    path: '/payout-batches',
    operationId: 'listPayoutBatches',
    summary: 'List payout batches, newest first (without their items).',
    tag: TAG,
    scope: 'payouts:read',
    query: {
      ...paginationQuery,
      status: { schema: { type: 'string', enum: [...PAYOUT_BATCH_STATUSES] } },
      external_reference: { schema: { type: 'string', minLength: 1, maxLength: 128 } },
    },
    responses: { '200': { description: 'A page of payout batches.', schema: ref('PayoutBatchList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as BatchListQuery;
      const { where, params } = scopedWhere('b', auth, q as Record<string, unknown>, FILTERS);
      const page = await listPage<BatchRow & { cursor_ts: string }, unknown>(deps.ds, { columns: BATCH_COLUMNS, from: 'payout_batches b', alias: 'b', where, params }, q, (row) => batchView(row));
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/payout-batches/{id}',
    operationId: 'getPayoutBatch',
    summary: 'Retrieve a payout batch with its items.',
    tag: TAG,
    scope: 'payouts:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The payout batch.', schema: ref('PayoutBatch') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: await findBatchView(deps.ds, auth, (params as { id: string }).id) }),
  },
];

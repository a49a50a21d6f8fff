import { randomUUID } from 'node:crypto';
import { listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { simulatedHash } from '../../shared/chain/adapter.js';
import { AppError } from '../../shared/errors.js';
import { jobId } from '../../shared/queues/registry.js';
import {
  archiveLiquidationAddress, createLiquidationAddress, findLiquidationAddress, LIQUIDATION_ADDRESS_COLUMNS, liquidationAddressView,
  type CreateLiquidationAddressInput, type LiquidationAddressRow,
} from '../../shared/domain/liquidation-addresses.js';
import { SANDBOX_LIQUIDATION_SENDER } from '../../shared/domain/liquidation-transfers.js';
import { AmountError, fromMinor, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { MAX_SANDBOX_FUNDING_MINOR } from '../../shared/domain/wallet-balances.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

// Liquidation addresses (CONTRACT section 16): send USDC to a permanent address, and the beneficiary is paid.

const TAG = 'Liquidation addresses';
const EXAMPLE_ID = '00000000-0000-4000-8000-000000000000';
const byId = (params: unknown) => (params as { id: string }).id;

export const schemas: Record<string, JsonSchema> = {
  LiquidationAddress: {
    type: 'object',
    required: ['id', 'chain', 'asset', 'address', 'beneficiary_id', 'customer_id', 'external_reference', 'status', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      chain: ref('Chain'),
      asset: { type: 'string', enum: ['USDC'] },
      address: { type: 'string', description: 'EIP-55 checksummed. Every confirmed USDC transfer to it becomes an off-ramp to the beneficiary (`funding_source.type` `liquidation_address`).' },
      beneficiary_id: ref('Uuid'),
      customer_id: { type: ['string', 'null'], format: 'uuid' },
      external_reference: { type: ['string', 'null'] },
      status: { type: 'string', enum: ['active', 'archived'], description: '`archived`: transfers that still arrive are returned to their senders.' },
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  LiquidationAddressList: listOf('LiquidationAddress'),
  CreateLiquidationAddressRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['chain', 'beneficiary_id'],
    properties: {
      chain: ref('Chain'),
      beneficiary_id: { ...ref('Uuid'), description: 'An active beneficiary of yours: who every transfer to the address pays.' },
      customer_id: { ...ref('Uuid'), description: 'An active customer of yours; copied onto each off-ramp.' },
      external_reference: { type: 'string', minLength: 1, maxLength: 128, description: 'Your own reference for the address.' },
    },
  },
  SandboxLiquidationTransferRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['amount'],
    properties: { amount: { ...ref('DecimalAmount'), description: 'USDC sent, more than 0, at most 6 decimals and 1000000000.' } },
  },
};

interface ListQuery extends PageQuery {
  beneficiary_id?: string;
  status?: string;
}
const FILTERS = [['beneficiary_id', 'l.beneficiary_id = $'], ['status', 'l.status = $']] as const;

/** A sandbox transfer's amount: USDC with at most 6 decimals, more than 0 and at most the sandbox's cap. */
function transferAmount(value: string): bigint {
  let amount: bigint;
  try {
    amount = toMinor(value, USDC_SCALE);
  } catch (err) {
    if (err instanceof AmountError) throw AppError.invalid('amount must be USDC with at most 6 decimals.', [{ path: 'amount', in: 'body', message: err.message }]);
    throw err;
  }
  if (amount <= 0n || amount > MAX_SANDBOX_FUNDING_MINOR) throw AppError.invalid('amount must be more than 0 and at most 1000000000 USDC.', [{ path: 'amount', in: 'body', message: 'is out of range' }]);
  return amount;
}

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/liquidation-addresses',
    operationId: 'createLiquidationAddress',
    errors: ['resource_archived', 'unsupported_corridor'],
    summary: 'Create a liquidation address: send USDC to it, and the beneficiary is paid.',
    description:
      'A permanent USDC deposit address on `chain`, tied to `beneficiary_id`. Each confirmed transfer to it becomes an off-ramp to the beneficiary priced at that moment, ' +
      'the fees taken from what arrived (`source.total_required` is exactly the amount received; the rest is converted, nothing is returned after the payout). ' +
      'A transfer whose payout would fall outside the corridor\'s limits, that arrives after the address was archived, or that no fresh rate could price within ' +
      '`AUTO_REFUND_AFTER_SECONDS` (it is priced as soon as the rate returns), is returned to its sender (the off-ramp ends `failed` with its `refund`). ' +
      'An archived beneficiary or customer: 409 `resource_archived`. Live, a beneficiary whose corridor has no live provider: 422 `unsupported_corridor` ' +
      '(`details.reason` `no_live_provider`).',
    tag: TAG,
    scope: 'liquidation_addresses:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreateLiquidationAddressRequest'),
      examples: { payroll: { summary: 'A Base address that pays one M-Pesa beneficiary', value: { chain: 'base', beneficiary_id: EXAMPLE_ID, external_reference: 'payroll-amina' } } },
    },
    responses: { '201': { description: 'The liquidation address.', schema: ref('LiquidationAddress') } },
    handler: async ({ deps, auth, body, reply }) => reply(async (unit) => ({
      status: 201,
      body: liquidationAddressView(await createLiquidationAddress(unit, deps.config, auth, body as CreateLiquidationAddressInput)),
    })),
  },
  {
    method: 'get',
    path: '/liquidation-addresses',
    operationId: 'listLiquidationAddresses',
    summary: 'List liquidation addresses, newest first.',
    tag: TAG,
    scope: 'liquidation_addresses:read',
    query: {
      ...paginationQuery,
      beneficiary_id: { schema: { type: 'string', format: 'uuid' }, description: 'Only the addresses that pay this beneficiary.' },
      status: { schema: { type: 'string', enum: ['active', 'archived'] }, description: 'Only addresses in this status.' },
    },
    responses: { '200': { description: 'A page of liquidation addresses.', schema: ref('LiquidationAddressList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as ListQuery;
      const { where, params } = scopedWhere('l', auth, q as Record<string, unknown>, FILTERS);
      const page = await listPage<LiquidationAddressRow & { cursor_ts: string }, unknown>(
        deps.ds, { columns: LIQUIDATION_ADDRESS_COLUMNS, from: 'liquidation_addresses l', alias: 'l', where, params }, q, liquidationAddressView,
      );
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/liquidation-addresses/{id}',
    operationId: 'getLiquidationAddress',
    summary: 'Retrieve a liquidation address.',
    tag: TAG,
    scope: 'liquidation_addresses:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The liquidation address.', schema: ref('LiquidationAddress') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: liquidationAddressView(await findLiquidationAddress(deps.ds, auth, byId(params))) }),
  },
  {
    method: 'post',
    path: '/liquidation-addresses/{id}/archive',
    operationId: 'archiveLiquidationAddress',
    summary: 'Archive a liquidation address.',
    description: 'For good: transfers that still arrive are returned to their senders. Archiving an archived address answers it unchanged.',
    tag: TAG,
    scope: 'liquidation_addresses:write',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The archived liquidation address.', schema: ref('LiquidationAddress') } },
    handler: async ({ auth, params, reply }) => reply(async (unit) => ({
      status: 200,
      body: liquidationAddressView(await archiveLiquidationAddress(unit, auth, byId(params))),
    })),
  },
  {
    method: 'post',
    path: '/sandbox/liquidation-addresses/{id}/transfer',
    operationId: 'sandboxLiquidationTransfer',
    summary: 'Play a USDC transfer to a liquidation address (sandbox only).',
    description:
      `Answers 202 with the address; a step later the transfer from the fixed sandbox sender \`${SANDBOX_LIQUIDATION_SENDER}\` is observed, priced into an off-ramp ` +
      'and confirmed one step at a time. An archived address takes it too: the transfer is returned to the sender.',
    tag: 'Sandbox',
    scope: 'sandbox:write',
    sandboxOnly: true,
    pathParams: { id: uuidParam },
    body: { schema: ref('SandboxLiquidationTransferRequest'), examples: { hundred: { summary: 'Send 100 USDC', value: { amount: '100' } } } },
    responses: { '202': { description: 'The liquidation address; the transfer lands a step later.', schema: ref('LiquidationAddress') } },
    handler: async ({ deps, auth, params, body, reply }) => {
      const amount = transferAmount((body as { amount: string }).amount);
      const hash = simulatedHash('sandbox', `liquidation-transfer-${byId(params)}-${randomUUID()}`);
      return reply(async (unit) => {
        const found = await findLiquidationAddress(unit.em, auth, byId(params));
        // The USDC enters our books as it reaches the address: from outside, into the settlements' clearing account.
        unit.post(auth, {
          kind: 'liquidation_deposit',
          reference: `liquidation-deposit-${found.id}-${hash}`,
          metadata: { liquidation_address_id: found.id, transaction_hash: hash },
          postings: [
            { account: { kind: 'inbound_clearing', asset: 'USDC' }, amount: -amount },
            { account: { kind: 'settlement_clearing', asset: 'USDC' }, amount },
          ],
        });
        await unit.stage({
          name: 'sandbox.liquidation_transfer', id: jobId('sandbox.liquidation_transfer', found.id, hash),
          data: { liquidationAddressId: found.id, transactionHash: hash }, delayMs: deps.config.sandboxStepMs,
        }, auth);
        return { status: 202, body: liquidationAddressView(found) };
      });
    },
  },
];

import { archiveWallet, findWallet, registerExternalWallet, WALLET_COLUMNS, WALLET_FROM, walletView, type RegisterWalletInput, type WalletRow } from '../../shared/domain/wallets.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import type { PageQuery } from '../../shared/db/pagination.js';
import { listPage } from '../../shared/db/pagination.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

const NULLABLE_TIMESTAMP = { type: ['string', 'null'], format: 'date-time' };

export const schemas: Record<string, JsonSchema> = {
  Wallet: {
    type: 'object',
    required: ['id', 'type', 'chain', 'supported_chains', 'asset', 'address', 'ownership_status', 'status', 'customer_id', 'customer_reference', 'label', 'verified_at', 'archived_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      type: { type: 'string', enum: ['managed_wallet', 'external_wallet'] },
      chain: { ...ref('Chain'), description: 'The wallet\'s own chain: `base` for managed wallets, the registered chain for external ones.' },
      supported_chains: { type: 'array', items: ref('Chain'), description: 'Managed wallets: all five chains (one address). External wallets: their chain.' },
      asset: { type: 'string', enum: ['USDC'] },
      address: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', description: 'EIP-55 checksummed.' },
      ownership_status: { type: 'string', enum: ['managed', 'unverified', 'verified'] },
      status: { type: 'string', enum: ['active', 'archived'] },
      customer_id: { type: ['string', 'null'], format: 'uuid' },
      customer_reference: { type: ['string', 'null'], description: 'The customer\'s external_reference.' },
      label: { type: ['string', 'null'] },
      verified_at: NULLABLE_TIMESTAMP,
      archived_at: NULLABLE_TIMESTAMP,
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  RegisterWalletRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['address', 'chain'],
    properties: {
      address: {
        type: 'string',
        format: 'evm-address',
        pattern: '^0x[0-9a-fA-F]{40}$',
        description: 'EVM address. All lower- or upper-case is accepted; mixed case must pass the EIP-55 checksum. Stored and returned checksummed.',
      },
      chain: ref('Chain'),
      customer_id: { ...ref('Uuid'), description: 'A customer of this environment the wallet belongs to.' },
      label: { type: 'string', maxLength: 120 },
    },
  },
  WalletList: listOf('Wallet'),
};

const walletPath = { id: uuidParam };
const walletId = (params: unknown): string => (params as { id: string }).id;

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/wallets',
    operationId: 'registerExternalWallet',
    errors: ['wallet_already_registered', 'resource_archived'],
    summary: 'Register an external EVM wallet.',
    description:
      'Answers 201 with `type: external_wallet`, `ownership_status: unverified`. The same address and chain already registered (or a managed wallet\'s address) answers 409 `wallet_already_registered` with `details.wallet_id`.',
    tag: 'Wallets',
    scope: 'wallets:write',
    body: { schema: ref('RegisterWalletRequest'), examples: {
      external: { summary: 'A customer\'s own wallet on Base', value: { address: '0x52908400098527886E0F7030069857D2E4169EE7', chain: 'base', label: 'Treasury Safe' } },
    } },
    responses: { '201': { description: 'The registered wallet.', schema: ref('Wallet') } },
    handler: async ({ auth, body, reply }) => reply(async (unit) => ({ status: 201, body: walletView(await registerExternalWallet(unit.em, auth, body as RegisterWalletInput)) })),
  },
  {
    method: 'get',
    path: '/wallets',
    operationId: 'listWallets',
    summary: 'List active wallets (managed and external), newest first.',
    tag: 'Wallets',
    scope: 'wallets:read',
    query: {
      ...paginationQuery,
      customer_id: { schema: ref('Uuid'), description: 'Only wallets of this customer.' },
      type: { schema: { type: 'string', enum: ['managed_wallet', 'external_wallet'] }, description: 'Only wallets of this type.' },
    },
    responses: { '200': { description: 'A page of active wallets.', schema: ref('WalletList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as PageQuery & { customer_id?: string; type?: string };
      const where = ['w.business_id = $1', 'w.environment = $2', `w.status = 'active'`];
      const params: unknown[] = [auth.businessId, auth.environment];
      for (const [column, value] of [['customer_id', q.customer_id], ['type', q.type]] as const) {
        if (value === undefined) continue;
        params.push(value);
        where.push(`w.${column} = $${params.length}`);
      }
      const page = await listPage<WalletRow & { cursor_ts: string }, unknown>(
        deps.ds, { columns: WALLET_COLUMNS, from: WALLET_FROM, alias: 'w', where, params }, q, walletView,
      );
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/wallets/{id}',
    operationId: 'getWallet',
    summary: 'Retrieve a wallet (archived ones too).',
    tag: 'Wallets',
    scope: 'wallets:read',
    pathParams: walletPath,
    responses: { '200': { description: 'The wallet.', schema: ref('Wallet') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: walletView(await findWallet(deps.ds, auth, walletId(params))) }),
  },
  {
    method: 'delete',
    path: '/wallets/{id}',
    operationId: 'archiveWallet',
    errors: ['invalid_state'],
    summary: 'Archive a wallet.',
    description: 'Sets `status: archived` and `archived_at`. The wallet leaves the list and can no longer be funded, challenged or used. Archiving an archived wallet returns it unchanged.',
    tag: 'Wallets',
    scope: 'wallets:write',
    pathParams: walletPath,
    responses: { '200': { description: 'The archived wallet.', schema: ref('Wallet') } },
    handler: async ({ auth, params, reply }) => reply(async (unit) => ({ status: 200, body: walletView(await archiveWallet(unit, auth, walletId(params))) })),
  },
];

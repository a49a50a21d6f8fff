// A transaction's response schemas: one shape per direction (`oneOf`, told apart by `direction`), each with an example
// taken from a real sandbox answer, so /docs shows what the API returns. Request schemas live beside their routes.
import { SETTLEMENT_STATUSES, TRANSACTION_STATUSES } from '../../shared/domain/machines.js';
import { ref, type JsonSchema } from './route.js';

const NULLABLE_STRING = { type: ['string', 'null'] };
const NULLABLE_TIME = { type: ['string', 'null'], format: 'date-time' };
const NULLABLE_UUID = { type: ['string', 'null'], format: 'uuid' };
// Fields only one direction fills stay nullable in the other, not `type: null`: openapi-fetch's response types drop a
// property whose type is only null.
const ALWAYS_NULL = 'Always null for an on-ramp.';
const USDC = { type: 'string', const: 'USDC' };
const FIAT = { type: 'string', pattern: '^[A-Z]{3}$', maxLength: 3, description: 'ISO 4217 code of the corridor\'s currency.' };
const usdcAmount = (description: string) => ({ type: 'string', description: `${description} USDC, 6 decimals.`, examples: ['100.000000'] });
const fiatAmount = (description: string) => ({ type: 'string', description: `${description} At the currency's scale (KES 2, UGX 0).`, examples: ['12935.00'] });
const fees = (unit: string, example: string) => ({
  type: 'object',
  required: ['provider', 'platform', 'currency'],
  description: `In the source's unit (${unit}).`,
  properties: { provider: { type: 'string', examples: [example] }, platform: { type: 'string', examples: [example] }, currency: unit === 'USDC' ? USDC : FIAT },
});
const REFUND_COMMON = {
  status: { type: 'string', enum: ['pending', 'completed', 'failed'] },
  to_address: NULLABLE_STRING,
  transaction_hash: NULLABLE_STRING,
};

/** Fields both directions carry with the same meaning. */
const COMMON: Record<string, JsonSchema> = {
  id: ref('Uuid'),
  quote_id: ref('Uuid'),
  status: { type: 'string', enum: [...TRANSACTION_STATUSES] },
  exchange_rate: { type: 'string', description: 'Fiat units per 1 USDC.', examples: ['129.35'] },
  external_reference: NULLABLE_STRING,
  wallet_id: { ...NULLABLE_UUID, description: 'Off-ramp: the funding wallet (null for a payout funded from the treasury). On-ramp: the wallet the USDC goes to.' },
  customer_id: NULLABLE_UUID,
  provider_reference: {
    ...NULLABLE_STRING,
    description: 'The provider\'s receipt for the money it moved, once known: M-Pesa\'s MpesaReceiptNumber for a collection, its TransactionID for a payout (sandbox makes one up: 10 upper-case letters and digits starting with S).',
  },
  failure: { type: ['object', 'null'], required: ['code', 'message'], description: 'Set in `action_required` and `failed`.', properties: { code: { type: 'string' }, message: { type: 'string' }, details: {} } },
  completed_at: NULLABLE_TIME,
  created_at: ref('Timestamp'),
  updated_at: ref('Timestamp'),
};
const REQUIRED = ['id', 'direction', 'quote_id', 'status', 'source', 'destination', 'fees', 'exchange_rate', 'external_reference', 'beneficiary_id', 'wallet_id', 'customer_id',
  'payment_intent_id', 'payout_batch_id', 'funding_source', 'liquidation_address_id', 'payment_source', 'provider_reference', 'failure', 'refund', 'refund_address', 'completed_at', 'created_at', 'updated_at'];

const SETTLEMENT_EXAMPLE = {
  id: 'b1b99056-bde2-433f-a733-73be429c34ea',
  transaction_id: 'a5bcef65-64da-4bb9-82fe-967cee728ce8',
  status: 'confirmed',
  chain: 'base',
  asset: 'USDC',
  token_address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  from_address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
  to_address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  amount: '100.000000',
  fee_address: '0x8C8d35429F74ec245F8Ef2f4Fd1e551cFF97d650',
  fee_amount: '1.500000',
  total_required: '101.500000',
  received_amount: '101.500000',
  overpaid_amount: null,
  confirmations: 12,
  required_confirmations: 12,
  execution: {
    method: 'erc20_transfer',
    to: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    data: '0xa9059cbb00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c800000000000000000000000000000000000000000000000000000000060cc460',
    value: '0',
    submitted: { nonce: 0, transaction_hash: '0xfbad307ac0df2d82685aa9231ece0661c867cf87606c1a63a3043a98e8a66a4e' },
  },
  transaction_hash: '0xfbad307ac0df2d82685aa9231ece0661c867cf87606c1a63a3043a98e8a66a4e',
  expires_at: '2026-11-26T01:35:45.959Z',
  detected_at: '2026-11-26T01:05:46.008Z',
  confirmed_at: '2026-11-26T01:05:46.080Z',
  created_at: '2026-11-26T01:05:45.959Z',
  updated_at: '2026-11-26T01:05:46.080Z',
};

/** A completed off-ramp from a managed wallet, as GET /transactions/{id} answers it (settlement embedded). */
export const OFFRAMP_EXAMPLE = {
  id: 'a5bcef65-64da-4bb9-82fe-967cee728ce8',
  direction: 'offramp',
  quote_id: 'f314909c-8002-40ee-898a-3e2366feb749',
  status: 'completed',
  source: { asset: 'USDC', amount: '100.000000', total_required: '101.500000', chain: 'base' },
  destination: { currency: 'KES', amount: '12935.00' },
  fees: { provider: '1.000000', platform: '0.500000', currency: 'USDC' },
  exchange_rate: '129.35',
  external_reference: 'payout-1042',
  beneficiary_id: 'd6a4a74e-d382-4dda-9dd9-7b27770d3405',
  wallet_id: '1502df9c-ad90-4b68-97e0-ee250b68eccc',
  customer_id: 'e68c69d0-1ab1-4464-9ba3-a689ab215f45',
  payment_intent_id: null,
  payout_batch_id: null,
  liquidation_address_id: null,
  funding_source: { type: 'managed_wallet', reference: '1502df9c-ad90-4b68-97e0-ee250b68eccc', address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266' },
  payment_source: null,
  provider_reference: 'SBA8DBE26C',
  failure: null,
  refund: null,
  refund_address: null,
  settlement: SETTLEMENT_EXAMPLE,
  completed_at: '2026-11-26T01:05:46.109Z',
  created_at: '2026-11-26T01:05:45.959Z',
  updated_at: '2026-11-26T01:05:46.109Z',
};

/** A completed M-Pesa on-ramp delivering to a managed wallet. */
export const ONRAMP_EXAMPLE = {
  id: '6d1401d8-397b-4e3b-9081-de9fa15875be',
  direction: 'onramp',
  quote_id: '7d1eae5b-07e6-4310-8e32-cabd9bf7393e',
  status: 'completed',
  source: { currency: 'KES', amount: '12935.00', total_required: '13129.03' },
  destination: {
    asset: 'USDC', amount: '100.000000', chain: 'base', wallet_address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    transaction_hash: '0xee9f98883f3d6766b43d74531644a0d1b8762e16b6d1b235b2a6a3392f238497',
  },
  fees: { provider: '129.35', platform: '64.68', currency: 'KES' },
  exchange_rate: '129.35',
  external_reference: null,
  beneficiary_id: null,
  wallet_id: '1502df9c-ad90-4b68-97e0-ee250b68eccc',
  customer_id: 'e68c69d0-1ab1-4464-9ba3-a689ab215f45',
  payment_intent_id: null,
  payout_batch_id: null,
  liquidation_address_id: null,
  funding_source: null,
  payment_source: { type: 'mobile_money', reference: 'SBX4F1B9BCB18D97581', phone_number: '+254*****5678', mobile_network: 'safaricom' },
  provider_reference: 'S4F1B9BCB1',
  failure: null,
  refund: null,
  refund_address: null,
  completed_at: '2026-11-26T01:05:45.876Z',
  created_at: '2026-11-26T01:05:45.814Z',
  updated_at: '2026-11-26T01:05:45.876Z',
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
      asset: USDC,
      token_address: { type: 'string' },
      from_address: { type: 'string', description: 'The funding wallet.' },
      to_address: { type: 'string', description: 'This settlement\'s own deposit address.' },
      amount: usdcAmount('What the payout is priced on:'),
      fee_address: { type: 'string', description: 'The platform\'s treasury, where the swept deposit (and so the fee) ends up.' },
      fee_amount: usdcAmount('The fees:'),
      total_required: usdcAmount('amount + fee_amount: send exactly this, in one transfer or several;'),
      received_amount: usdcAmount('Matching transfers so far:'),
      overpaid_amount: { ...NULLABLE_STRING, description: 'USDC received beyond `total_required` (returned on its own), else null.' },
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
    examples: [SETTLEMENT_EXAMPLE],
  },
  OfframpTransaction: {
    type: 'object',
    description: 'USDC in, fiat paid out to a beneficiary. The creation answer and GET /transactions/{id} embed the `settlement`; lists and the other actions leave it out.',
    required: REQUIRED,
    properties: {
      ...COMMON,
      direction: { type: 'string', const: 'offramp' },
      source: {
        type: 'object',
        required: ['asset', 'amount', 'total_required', 'chain'],
        properties: { asset: USDC, amount: usdcAmount('Converted to fiat:'), total_required: usdcAmount('amount plus fees, what must arrive:'), chain: ref('Chain') },
      },
      destination: { type: 'object', required: ['currency', 'amount'], properties: { currency: FIAT, amount: fiatAmount('Paid out to the beneficiary.') } },
      fees: fees('USDC', '1.000000'),
      beneficiary_id: { ...NULLABLE_UUID, description: 'Who is paid.' },
      payment_intent_id: { ...NULLABLE_UUID, description: 'The payment intent whose payment a treasury-funded payout spends.' },
      payout_batch_id: { ...NULLABLE_UUID, description: 'The payout batch a treasury-funded payout is an item of.' },
      funding_source: {
        type: 'object',
        required: ['type', 'reference', 'address'],
        description: 'Where the USDC comes from; `reference` is the wallet id, for `treasury` the payment intent id or the payout batch id, for `liquidation_address` the liquidation address id (`address` its address).',
        properties: { type: { type: 'string', enum: ['managed_wallet', 'external_wallet', 'treasury', 'liquidation_address'] }, reference: NULLABLE_STRING, address: NULLABLE_STRING },
      },
      liquidation_address_id: { ...NULLABLE_UUID, description: 'The liquidation address whose incoming transfer this off-ramp pays out.' },
      payment_source: { type: ['object', 'null'], description: 'Always null for an off-ramp (on-ramps name their payer here).' },
      refund: {
        type: ['object', 'null'],
        description: 'USDC given back (CONTRACT: every unit of money has an exit). `amount`: everything returned so far; `to_address`: where (null: the treasury\'s balance); ' +
          '`transaction_hash`: null while pending, and for a sandbox refund credited to a managed wallet\'s balance.',
        required: ['status', 'amount', 'to_address', 'transaction_hash'],
        properties: { ...REFUND_COMMON, amount: usdcAmount('Returned so far:') },
      },
      refund_address: { ...NULLABLE_STRING, description: 'External-wallet off-ramps: where refunds go (null: back to `settlement.from_address`).' },
      settlement: ref('Settlement'),
    },
    examples: [OFFRAMP_EXAMPLE],
  },
  OnrampTransaction: {
    type: 'object',
    description: 'Mobile money in, USDC delivered to a wallet.',
    required: REQUIRED,
    properties: {
      ...COMMON,
      direction: { type: 'string', const: 'onramp' },
      source: {
        type: 'object',
        required: ['currency', 'amount', 'total_required'],
        properties: { currency: FIAT, amount: fiatAmount('Converted to USDC.'), total_required: { ...fiatAmount('amount plus fees, what the payer is asked for.'), examples: ['13129.03'] } },
      },
      destination: {
        type: 'object',
        required: ['asset', 'amount', 'chain', 'wallet_address', 'transaction_hash'],
        properties: {
          asset: USDC,
          amount: usdcAmount('Delivered:'),
          chain: ref('Chain'),
          wallet_address: { type: 'string', description: 'Where the USDC goes.' },
          transaction_hash: { ...NULLABLE_STRING, description: 'The delivery transfer, once sent.' },
        },
      },
      fees: fees('the fiat currency', '129.35'),
      beneficiary_id: { ...NULLABLE_UUID, description: ALWAYS_NULL },
      payment_intent_id: { ...NULLABLE_UUID, description: ALWAYS_NULL },
      payout_batch_id: { ...NULLABLE_UUID, description: ALWAYS_NULL },
      funding_source: { type: ['object', 'null'], description: 'Always null for an on-ramp: its payer is `payment_source`.' },
      liquidation_address_id: { ...NULLABLE_UUID, description: ALWAYS_NULL },
      payment_source: {
        type: 'object',
        required: ['type', 'reference', 'phone_number', 'mobile_network'],
        properties: {
          type: { type: 'string', const: 'mobile_money' },
          reference: { ...NULLABLE_STRING, description: 'The provider\'s reference for the collection.' },
          phone_number: { type: 'string', description: 'The payer, redacted: country code and last 4 digits (`+254*****3344`).' },
          mobile_network: NULLABLE_STRING,
        },
      },
      refund: {
        type: ['object', 'null'],
        description: 'An on-ramp whose delivery failed (`delivery_failed`): the fiat collected, paid back to the payer\'s phone (`phone_number` redacted as `payment_source`\'s, ' +
          '`provider_reference` the provider\'s receipt once paid, `failure` when the provider refused it). A refused refund is `failed` ' +
          'until it is sent again, as a new request after a growing backoff (30 s doubling, at most an hour), until paid.',
        required: ['status', 'amount', 'to_address', 'transaction_hash', 'currency', 'phone_number', 'provider_reference', 'failure'],
        properties: {
          ...REFUND_COMMON,
          amount: fiatAmount('Paid back.'),
          currency: FIAT,
          phone_number: NULLABLE_STRING,
          provider_reference: NULLABLE_STRING,
          failure: { type: ['object', 'null'], properties: { code: { type: 'string' }, message: { type: 'string' } } },
        },
      },
      refund_address: { ...NULLABLE_STRING, description: ALWAYS_NULL },
    },
    examples: [ONRAMP_EXAMPLE],
  },
  Transaction: {
    description: 'An off-ramp or an on-ramp: `direction` says which shape it has.',
    oneOf: [ref('OfframpTransaction'), ref('OnrampTransaction')],
    discriminator: {
      propertyName: 'direction',
      mapping: { offramp: '#/components/schemas/OfframpTransaction', onramp: '#/components/schemas/OnrampTransaction' },
    },
  },
};

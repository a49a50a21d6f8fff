import { randomUUID } from 'node:crypto';
import { AppError } from '../../shared/errors.js';
import { assertSomeProvider } from '../../shared/providers/providers.js';
import { listPage, scopedWhere, type PageQuery } from '../../shared/db/pagination.js';
import { PAYMENT_INTENT_STATUSES, PAYOUT_STATUSES, TREASURY_DEPOSIT_STATUSES } from '../../shared/domain/machines.js';
import {
  cancelPaymentIntent, checkIntentAmount, createPaymentIntent, findPaymentIntent, INTENT_COLUMNS, paymentIntentView, PAYMENT_METHODS_ACCEPTED, startIntentCollection,
  type CollectInput, type CreatePaymentIntentInput, type PaymentIntentRow,
} from '../../shared/domain/payment-intents.js';
import { DEPOSIT_COLUMNS, depositView, findDeposit, type DepositRow } from '../../shared/domain/treasury-deposits.js';
import { listOf, paginationQuery } from '../openapi/components.js';
import { freshRate } from '../fresh-rate.js';
import { ref, uuidParam, type JsonSchema, type RouteDef } from './route.js';

const NULLABLE_STRING = { type: ['string', 'null'] };
const NULLABLE_TIME = { type: ['string', 'null'], format: 'date-time' };
const NULLABLE_UUID = { type: ['string', 'null'], format: 'uuid' };
const FAILURE = { type: ['object', 'null'], required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } };
const MONEY = { type: 'object', required: ['currency', 'value'], properties: { currency: { type: 'string' }, value: { type: 'string' } } };
const EXAMPLE_ID = '00000000-0000-4000-8000-000000000000';

export const schemas: Record<string, JsonSchema> = {
  CreatePaymentIntentRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['amount', 'settlement'],
    properties: {
      amount: {
        type: 'object',
        additionalProperties: false,
        required: ['currency', 'value'],
        properties: {
          currency: { type: 'string', pattern: '^[A-Za-z]{3}$', maxLength: 3, description: 'The fiat currency asked for (either case).' },
          value: { ...ref('DecimalAmount'), description: 'At most the currency\'s minor units.' },
        },
      },
      accepted_payment_methods: {
        type: 'array', minItems: 1, maxItems: 2, uniqueItems: true, items: { type: 'string', enum: [...PAYMENT_METHODS_ACCEPTED] },
        description: 'Default `["mobile_money"]`. `stablecoin`: the payer may send USDC to `payment_instructions.address`.',
      },
      customer: {
        type: 'object',
        additionalProperties: false,
        description: 'Who pays. `phone_number` and `email` are stored encrypted and shown redacted (`+254*****3344`, `a***@example.com`) in responses, events and webhooks.',
        properties: {
          id: { ...ref('Uuid'), description: 'One of your customers (404 if it does not exist here).' },
          name: { type: 'string', minLength: 1, maxLength: 200 },
          phone_number: { type: 'string', minLength: 1, maxLength: 32 },
          email: { type: 'string', minLength: 3, maxLength: 254 },
        },
      },
      settlement: {
        type: 'object',
        additionalProperties: false,
        required: ['mode', 'asset', 'chain'],
        properties: {
          mode: { type: 'string', enum: ['stablecoin'] },
          asset: { type: 'string', enum: ['USDC'] },
          chain: ref('Chain'),
          beneficiary_id: { ...ref('Uuid'), description: 'If set, a completed payment is paid out to this beneficiary from your treasury.' },
        },
      },
      external_reference: { type: 'string', minLength: 1, maxLength: 128 },
      metadata: ref('CustomerMetadata'),
      expires_in_seconds: { type: 'integer', minimum: 60, maximum: 86400, default: 3600 },
    },
  },
  PaymentIntent: {
    type: 'object',
    required: ['id', 'external_reference', 'amount', 'accepted_payment_methods', 'settlement', 'payment_instructions', 'status', 'amount_received', 'amount_confirmed',
      'collection', 'last_payment_error', 'customer', 'metadata', 'expires_at', 'cancelled_at', 'completed_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      external_reference: NULLABLE_STRING,
      amount: MONEY,
      accepted_payment_methods: { type: 'array', items: { type: 'string', enum: [...PAYMENT_METHODS_ACCEPTED] } },
      settlement: {
        type: 'object',
        required: ['mode', 'currency', 'asset', 'chain', 'amount', 'exchange_rate', 'beneficiary_id', 'payout_status', 'payout_transaction_id', 'payout_error'],
        properties: {
          mode: { type: 'string', enum: ['stablecoin'] },
          currency: { type: 'string' },
          asset: { type: 'string', enum: ['USDC'] },
          chain: ref('Chain'),
          amount: { type: 'string', description: 'The USDC price, fixed at creation: ceil(amount.value / exchange_rate).' },
          exchange_rate: { type: 'string', description: 'Fiat units per 1 USDC.' },
          beneficiary_id: NULLABLE_UUID,
          payout_status: { type: ['string', 'null'], enum: [...PAYOUT_STATUSES, null] },
          payout_transaction_id: NULLABLE_UUID,
          payout_error: NULLABLE_STRING,
        },
      },
      payment_instructions: {
        type: 'object',
        required: ['type', 'asset', 'chain', 'address', 'amount'],
        properties: { type: { type: 'string', enum: ['stablecoin'] }, asset: { type: 'string', enum: ['USDC'] }, chain: ref('Chain'), address: { type: 'string' }, amount: { type: 'string' } },
      },
      status: { type: 'string', enum: [...PAYMENT_INTENT_STATUSES] },
      amount_received: { type: 'string', description: 'USDC value of the payments seen so far (before confirmations).' },
      amount_confirmed: { type: 'string', description: 'USDC value of the confirmed payments.' },
      collection: {
        type: ['object', 'null'],
        description: 'The latest mobile-money prompt: the payer (stored encrypted, shown redacted: `+254*****3344`), its network, the provider\'s reference and how many prompts were sent.',
        properties: { phone_number: { type: 'string' }, mobile_network: NULLABLE_STRING, provider_reference: NULLABLE_STRING, attempts: { type: 'integer' } },
      },
      last_payment_error: { ...FAILURE, description: 'Why the latest collection brought nothing: `payer_insufficient_funds`, `collection_declined`, `collection_timeout`, `collection_failed` (the prompt ended unpaid), `provider_unavailable`.' },
      customer: {
        type: ['object', 'null'],
        description: 'The customer as given, `phone_number` and `email` redacted (`+254*****3344`, `a***@example.com`): they are stored encrypted and never shown in full.',
        properties: { id: ref('Uuid'), name: { type: 'string' }, phone_number: { type: 'string' }, email: { type: 'string' } },
      },
      metadata: { type: 'object' },
      expires_at: ref('Timestamp'),
      cancelled_at: NULLABLE_TIME,
      completed_at: NULLABLE_TIME,
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  PaymentIntentList: listOf('PaymentIntent'),
  CollectPaymentIntentRequest: {
    type: 'object',
    additionalProperties: false,
    required: ['payment_method'],
    properties: { payment_method: ref('MobileMoneyPayer') },
  },
  TreasuryDeposit: {
    type: 'object',
    required: ['id', 'payment_intent_id', 'payment_method', 'amount', 'settled_amount', 'status', 'reference', 'asset', 'chain', 'transaction_hash', 'confirmations',
      'required_confirmations', 'provider_reference', 'late_payment', 'intent_status', 'failure', 'observed_at', 'confirmed_at', 'created_at', 'updated_at'],
    properties: {
      id: ref('Uuid'),
      payment_intent_id: ref('Uuid'),
      payment_method: { type: 'string', enum: [...PAYMENT_METHODS_ACCEPTED] },
      amount: { ...MONEY, description: 'What was paid: the intent\'s currency for mobile money, USDC for a transfer.' },
      settled_amount: { type: 'string', description: 'The USDC credited to the treasury (mobile money converted at the intent\'s rate, rounded down).' },
      status: { type: 'string', enum: [...TREASURY_DEPOSIT_STATUSES] },
      reference: { ...NULLABLE_STRING, description: 'The provider\'s receipt, or the transfer\'s hash.' },
      asset: { type: 'string', enum: ['USDC'] },
      chain: ref('Chain'),
      transaction_hash: NULLABLE_STRING,
      confirmations: { type: 'integer' },
      required_confirmations: { type: 'integer' },
      provider_reference: { ...NULLABLE_STRING, description: 'M-Pesa\'s receipt (MpesaReceiptNumber) for a mobile-money payment once known; null for USDC (sandbox makes one up).' },
      late_payment: { type: 'boolean', description: 'True when the payment arrived after the intent was cancelled, expired or already paid: credited all the same, for you to settle with the payer.' },
      intent_status: { type: 'string', enum: [...PAYMENT_INTENT_STATUSES], description: 'The intent\'s status when the payment arrived.' },
      failure: FAILURE,
      observed_at: ref('Timestamp'),
      confirmed_at: NULLABLE_TIME,
      created_at: ref('Timestamp'),
      updated_at: ref('Timestamp'),
    },
  },
  TreasuryDepositList: listOf('TreasuryDeposit'),
};

const byId = (params: unknown) => (params as { id: string }).id;

interface IntentListQuery extends PageQuery {
  status?: string;
  external_reference?: string;
}

interface DepositListQuery extends PageQuery {
  payment_intent_id?: string;
  status?: string;
  payment_method?: string;
}

const INTENT_FILTERS = [['status', 'i.status = $'], ['external_reference', 'i.external_reference = $']] as const;
const DEPOSIT_FILTERS = [['payment_intent_id', 'd.payment_intent_id = $'], ['status', 'd.status = $'], ['payment_method', 'd.payment_method = $']] as const;

export const routes: RouteDef[] = [
  {
    method: 'post',
    path: '/payment-intents',
    operationId: 'createPaymentIntent',
    errors: ['resource_archived', 'unsupported_corridor', 'amount_out_of_range', 'requirements_not_met'],
    summary: 'Ask a payer for a fiat amount, paid by mobile money or in USDC.',
    description:
      'Answers 201 `awaiting_payment` with `payment_instructions` (this intent\'s own USDC deposit address and the amount to send) and `expires_at`. The USDC price is fixed now, ' +
      'from a fresh rate (`settlement.exchange_rate`). 422 `unsupported_corridor` for a currency we do not serve (or cannot collect by mobile money when it is accepted), ' +
      '422 `amount_out_of_range` outside the mobile-money corridor\'s limits; 503 when no fresh rate can be had. A payment lands as a treasury deposit; with ' +
      '`settlement.beneficiary_id`, the paid amount is then paid out to that beneficiary from your treasury.',
    tag: 'Payment intents',
    scope: 'payment_intents:write',
    requiresLiveEnabled: true,
    body: {
      schema: ref('CreatePaymentIntentRequest'),
      examples: {
        mpesa: { summary: 'Collect KES 1,500 by M-Pesa', value: { amount: { currency: 'KES', value: '1500.00' }, settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base' } } },
        payout: {
          summary: 'Collect by M-Pesa or USDC, then pay a beneficiary',
          value: {
            amount: { currency: 'KES', value: '2500' }, accepted_payment_methods: ['mobile_money', 'stablecoin'], external_reference: 'order-7731',
            settlement: { mode: 'stablecoin', asset: 'USDC', chain: 'base', beneficiary_id: EXAMPLE_ID }, expires_in_seconds: 900,
          },
        },
      },
    },
    responses: { '201': { description: 'The payment intent, awaiting payment.', schema: ref('PaymentIntent') } },
    handler: async ({ deps, auth, body, reply }) => {
      const input = body as CreatePaymentIntentInput;
      const { currency } = checkIntentAmount(input, auth.environment);
      const rate = await freshRate(deps, auth, currency);
      return reply(async (unit) => ({ status: 201, body: paymentIntentView(await createPaymentIntent(unit, deps.config, auth, randomUUID(), input, rate)) }));
    },
  },
  {
    method: 'get',
    path: '/payment-intents',
    operationId: 'listPaymentIntents',
    summary: 'List payment intents, newest first.',
    tag: 'Payment intents',
    scope: 'payment_intents:read',
    query: {
      ...paginationQuery,
      status: { schema: { type: 'string', enum: [...PAYMENT_INTENT_STATUSES] } },
      external_reference: { schema: { type: 'string', minLength: 1, maxLength: 128 } },
    },
    responses: { '200': { description: 'A page of payment intents.', schema: ref('PaymentIntentList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as IntentListQuery;
      const { where, params } = scopedWhere('i', auth, q as Record<string, unknown>, INTENT_FILTERS);
      const page = await listPage<PaymentIntentRow & { cursor_ts: string }, unknown>(deps.ds, { columns: INTENT_COLUMNS, from: 'payment_intents i', alias: 'i', where, params }, q, paymentIntentView);
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/payment-intents/{id}',
    operationId: 'getPaymentIntent',
    summary: 'Retrieve a payment intent.',
    tag: 'Payment intents',
    scope: 'payment_intents:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The payment intent.', schema: ref('PaymentIntent') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: paymentIntentView(await findPaymentIntent(deps.ds, auth, byId(params))) }),
  },
  {
    method: 'post',
    path: '/payment-intents/{id}/collect',
    operationId: 'collectPaymentIntent',
    errors: ['invalid_state', 'requirements_not_met', 'unsupported_corridor'],
    summary: 'Prompt the payer to pay by mobile money.',
    description:
      'Answers 202 with the intent `processing`; the payer is prompted (STK Push in live). Paid: a treasury deposit, and the intent completes. Declined or unanswered: the intent ' +
      'returns to `awaiting_payment` with `last_payment_error`, and you may collect again. Only an intent `awaiting_payment` that accepts `mobile_money` (else 409 `invalid_state`); ' +
      'the number must fit the currency\'s corridor (400). The number is payer data: stored encrypted, shown redacted (`collection.phone_number`, `+254*****3344`).',
    tag: 'Payment intents',
    scope: 'payment_intents:write',
    requiresLiveEnabled: true,
    pathParams: { id: uuidParam },
    body: {
      schema: ref('CollectPaymentIntentRequest'),
      examples: { mpesa: { summary: 'Prompt an M-Pesa payer', value: { payment_method: { type: 'mobile_money', phone_number: '+254712345678', mobile_network: 'safaricom' } } } },
    },
    responses: { '202': { description: 'Accepted; the intent as it now stands.', schema: ref('PaymentIntent') } },
    handler: async ({ deps, auth, params, body, reply }) => {
      assertSomeProvider(auth.environment, deps.config);
      return reply(async (unit) => ({ status: 202, body: paymentIntentView(await startIntentCollection(unit, deps.config, auth, byId(params), body as CollectInput)) }));
    },
  },
  {
    method: 'post',
    path: '/payment-intents/{id}/cancel',
    operationId: 'cancelPaymentIntent',
    errors: ['invalid_state'],
    summary: 'Cancel a payment intent that is awaiting payment.',
    description:
      'Answers 200 `cancelled`. Only from `awaiting_payment` (else 409 `invalid_state`): once a payment is being processed it completes. A payment that still arrives ' +
      'after the cancel is recorded as a treasury deposit flagged `late_payment`, never lost.',
    tag: 'Payment intents',
    scope: 'payment_intents:write',
    pathParams: { id: uuidParam },
    body: { schema: { type: 'object', additionalProperties: false, properties: {}, description: 'No fields; an empty body or `{}`.' }, required: false },
    responses: { '200': { description: 'The cancelled intent.', schema: ref('PaymentIntent') } },
    handler: async ({ auth, params, reply }) => reply(async (unit) => ({ status: 200, body: paymentIntentView(await cancelPaymentIntent(unit, auth, byId(params))) })),
  },
  {
    method: 'get',
    path: '/treasury/deposits',
    operationId: 'listTreasuryDeposits',
    summary: 'List treasury deposits (payments to your payment intents), newest first.',
    tag: 'Treasury',
    scope: 'treasury:read',
    query: {
      ...paginationQuery,
      payment_intent_id: { schema: ref('Uuid') },
      status: { schema: { type: 'string', enum: [...TREASURY_DEPOSIT_STATUSES] } },
      payment_method: { schema: { type: 'string', enum: [...PAYMENT_METHODS_ACCEPTED] } },
    },
    responses: { '200': { description: 'A page of treasury deposits.', schema: ref('TreasuryDepositList') } },
    handler: async ({ deps, auth, query }) => {
      const q = query as DepositListQuery;
      const { where, params } = scopedWhere('d', auth, q as Record<string, unknown>, DEPOSIT_FILTERS);
      const page = await listPage<DepositRow & { cursor_ts: string }, unknown>(deps.ds, { columns: DEPOSIT_COLUMNS, from: 'treasury_deposits d', alias: 'd', where, params }, q, depositView);
      return { status: 200, body: page };
    },
  },
  {
    method: 'get',
    path: '/treasury/deposits/{id}',
    operationId: 'getTreasuryDeposit',
    summary: 'Retrieve a treasury deposit.',
    tag: 'Treasury',
    scope: 'treasury:read',
    pathParams: { id: uuidParam },
    responses: { '200': { description: 'The treasury deposit.', schema: ref('TreasuryDeposit') } },
    handler: async ({ deps, auth, params }) => ({ status: 200, body: depositView(await findDeposit(deps.ds, auth, byId(params))) }),
  },
];

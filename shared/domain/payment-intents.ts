import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { walletOf } from '../chain/hd-wallet.js';
import { claimAddress } from '../chain/address-pool.js';
import { issuedBlock } from './confirmations.js';
import { type ProviderOutcome } from '../providers/provider.js';
import { assertProvider } from '../providers/providers.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { checkPayer } from './corridor-details.js';
import { redactCustomer, redactPhone, sealedPayerColumns } from './payer-data.js';
import { corridorError, getCorridor, listCorridors } from './corridors.js';
import { AmountError, Decimal, formatAmount, formatRate, fromMinor, scaleOf, toMinor, USDC_SCALE } from './money.js';
import { INTENT_PAYOUT_MACHINE, PAYMENT_INTENT_MACHINE, type Machine, type PaymentIntentStatus, type PayoutStatus } from './machines.js';
import type { RateQuote } from './rates.js';
import { wholeFiatRail } from './pricing.js';
import { insertCreated } from './transition.js';
import { decideIntent, type IntentFact, type IntentSnapshot } from '../kernel/intents.js';
import { decideAndApply, decideIn, type Flow } from '../kernel/run.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';

// Payment intents (CONTRACT section 8): a business asks for a fiat amount; its payer pays by mobile money (a
// collection the providers pool requests) or in USDC to the intent's own deposit address. The USDC price is fixed at
// creation. Payments land as treasury deposits (treasury-deposits.ts); a completed intent with a beneficiary starts
// a payout from the treasury (treasury-payouts.ts). Where the intent's status goes is decided in kernel/intents.ts,
// on the row INTENT_FLOW reads and locks; every status move here and in treasury-deposits.ts goes through decideIn.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export const PAYMENT_METHODS_ACCEPTED = ['mobile_money', 'stablecoin'] as const;
export type IntentPaymentMethod = (typeof PAYMENT_METHODS_ACCEPTED)[number];

export interface PaymentIntentRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  status: PaymentIntentStatus;
  external_reference: string | null;
  currency: string;
  amount: string;
  accepted_payment_methods: IntentPaymentMethod[];
  /** As given, its phone_number and email redacted; the customer as given is sealed (payer-data.ts). */
  customer: Record<string, string> | null;
  metadata: Record<string, string>;
  chain: Chain;
  exchange_rate: string;
  usdc_amount: string;
  deposit_address: string;
  hd_index: number;
  required_confirmations: number;
  received_amount: string;
  confirmed_amount: string;
  beneficiary_id: string | null;
  payout_status: PayoutStatus | null;
  payout_transaction_id: string | null;
  payout_error: string | null;
  collection_attempts: number;
  /** The collection's payer as shown (`+254*****3344`); the number itself is sealed (payer-data.ts). */
  payer_phone_redacted: string | null;
  payer_network: string | null;
  provider_reference: string | null;
  last_payment_error: { code: string; message: string } | null;
  expires_at: Date;
  cancelled_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const INTENT_COLUMNS = `i.id, i.business_id, i.environment, i.status, i.external_reference, i.currency, i.amount::text, i.accepted_payment_methods, i.customer, i.metadata,
  i.chain, i.exchange_rate::text, i.usdc_amount::text, i.deposit_address, i.hd_index, i.required_confirmations, i.received_amount::text, i.confirmed_amount::text,
  i.beneficiary_id, i.payout_status, i.payout_transaction_id, i.payout_error, i.collection_attempts, i.payer_phone_redacted, i.payer_network, i.provider_reference,
  i.last_payment_error, i.expires_at, i.cancelled_at, i.completed_at, i.created_at, i.updated_at`;

const usdc = (value: string) => formatAmount(value, USDC_SCALE);
const iso = (d: Date | null) => (d ? d.toISOString() : null);
export const intentScope = (row: { business_id: string; environment: 'sandbox' | 'live' }): EventScope => ({ businessId: row.business_id, environment: row.environment });

/** The payment intent as the API, events and webhooks show it. */
export function paymentIntentView(row: PaymentIntentRow): Record<string, unknown> {
  return {
    id: row.id,
    external_reference: row.external_reference,
    amount: { currency: row.currency, value: formatAmount(row.amount, scaleOf(row.currency)) },
    accepted_payment_methods: row.accepted_payment_methods,
    settlement: {
      mode: 'stablecoin',
      currency: row.currency,
      asset: 'USDC',
      chain: row.chain,
      amount: usdc(row.usdc_amount),
      exchange_rate: formatRate(new Decimal(row.exchange_rate)),
      beneficiary_id: row.beneficiary_id,
      payout_status: row.payout_status,
      payout_transaction_id: row.payout_transaction_id,
      payout_error: row.payout_error,
    },
    payment_instructions: { type: 'stablecoin', asset: 'USDC', chain: row.chain, address: row.deposit_address, amount: usdc(row.usdc_amount) },
    status: row.status,
    amount_received: usdc(row.received_amount),
    amount_confirmed: usdc(row.confirmed_amount),
    collection: row.payer_phone_redacted
      ? { phone_number: row.payer_phone_redacted, mobile_network: row.payer_network, provider_reference: row.provider_reference, attempts: row.collection_attempts }
      : null,
    last_payment_error: row.last_payment_error,
    customer: row.customer,
    metadata: row.metadata,
    expires_at: row.expires_at.toISOString(),
    cancelled_at: iso(row.cancelled_at),
    completed_at: iso(row.completed_at),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function findPaymentIntent(q: Queryable, scope: EventScope, id: string, lock = false): Promise<PaymentIntentRow> {
  return findScoped(q, { from: 'payment_intents i', columns: INTENT_COLUMNS, resource: 'payment intent' }, scope, id, lock);
}

/** For jobs, which carry ids only; `lock` holds the row until the caller's transaction ends. */
export async function loadPaymentIntent(q: Queryable, id: string, lock = false): Promise<PaymentIntentRow | undefined> {
  return ((await q.query(`SELECT ${INTENT_COLUMNS} FROM payment_intents i WHERE i.id = $1${lock ? ' FOR UPDATE' : ''}`, [id])) as PaymentIntentRow[])[0];
}

const minorUsdc = (value: string) => toMinor(usdc(value), USDC_SCALE);

/** The snapshot the kernel decides on, from the row (locked by the loader), with the clock expiry is compared with. */
function snapshotOf(row: PaymentIntentRow): IntentSnapshot {
  return {
    id: row.id, scope: intentScope(row), status: row.status, collectionAttempts: row.collection_attempts, price: minorUsdc(row.usdc_amount),
    received: minorUsdc(row.received_amount), confirmed: minorUsdc(row.confirmed_amount), hasBeneficiary: row.beneficiary_id !== null,
    payoutStatus: row.payout_status, expiresAt: row.expires_at, now: new Date(),
  };
}

/** The intent flow: every fact about an intent's status is decided on its locked row (kernel/intents.ts). */
export const INTENT_FLOW: Flow<IntentSnapshot, IntentFact> = {
  load: async (unit, id) => {
    const row = await loadPaymentIntent(unit.em, id, true);
    return row && snapshotOf(row);
  },
  decide: decideIntent,
  // payout_status is announced by no event of its own (its intent is announced again: payout-follow.ts).
  views: new Map<Machine<any>, typeof paymentIntentView>([[PAYMENT_INTENT_MACHINE, paymentIntentView], [INTENT_PAYOUT_MACHINE, paymentIntentView]]),
};

export const intentJobs = {
  expire: (intentId: string, delayMs: number): JobRequest<'intent.expire'> => ({ name: 'intent.expire', id: jobId('intent.expire', intentId), data: { intentId }, delayMs }),
  collect: (intentId: string, attempt: number, delayMs = 0): JobRequest<'intent.collect'> => ({
    name: 'intent.collect', id: jobId('intent.collect', intentId, String(attempt)), data: { intentId, attempt }, delayMs,
  }),
  payout: (intentId: string, delayMs = 0): JobRequest<'intent.payout'> => ({ name: 'intent.payout', id: jobId('intent.payout', intentId), data: { intentId }, delayMs }),
  sandboxPay: (intentId: string, method: IntentPaymentMethod, key: string, delayMs = 0): JobRequest<'sandbox.pay'> => ({
    name: 'sandbox.pay', id: jobId('sandbox.pay', intentId, key), data: { intentId, method, key }, delayMs,
  }),
};

export interface CreatePaymentIntentInput {
  amount: { currency: string; value: string };
  accepted_payment_methods?: IntentPaymentMethod[];
  customer?: { id?: string; name?: string; phone_number?: string; email?: string };
  settlement: { mode: 'stablecoin'; asset: 'USDC'; chain: Chain; beneficiary_id?: string };
  external_reference?: string;
  metadata?: Record<string, string>;
  expires_in_seconds?: number;
}

function invalid(path: string, message: string): AppError {
  return AppError.invalid(`${path} ${message}.`, [{ path, in: 'body', message }]);
}

/** The most a single intent may ask for, in USDC: a typo guard (one billion), like sandbox funding's. */
const MAX_INTENT_USDC_MINOR = 1_000_000_000n * 10n ** BigInt(USDC_SCALE);
const RATE_SCALE = 8;

/** USDC for a fiat amount at a rate (fiat per USDC): ceil for what the payer must send, floor for what a payment is worth. */
export function fiatToUsdc(amount: string, currency: string, rate: string, rounding: 'up' | 'down'): bigint {
  const scale = scaleOf(currency);
  const num = toMinor(amount, scale) * 10n ** BigInt(USDC_SCALE + RATE_SCALE);
  const den = toMinor(formatRate(new Decimal(rate)), RATE_SCALE) * 10n ** BigInt(scale);
  return rounding === 'up' ? (num + den - 1n) / den : num / den;
}

/** The currency and amount an intent may ask for, with the methods it accepts; 422 for what we cannot collect. */
export function checkIntentAmount(input: CreatePaymentIntentInput, environment: 'sandbox' | 'live'): { currency: string; amount: string; methods: IntentPaymentMethod[] } {
  const currency = input.amount.currency.toUpperCase();
  const corridors = listCorridors().filter((c) => c.currency === currency);
  if (!corridors.length) throw corridorError('unsupported_corridor', `We do not serve ${currency}.`, { currency });
  let minor: bigint;
  try {
    minor = toMinor(input.amount.value, scaleOf(currency));
  } catch (err) {
    if (err instanceof AmountError) throw invalid('amount.value', `must be a ${currency} amount with at most ${scaleOf(currency)} decimals`);
    throw err;
  }
  if (minor <= 0n) throw invalid('amount.value', 'must be more than zero');
  const methods: IntentPaymentMethod[] = [...new Set(input.accepted_payment_methods ?? ['mobile_money' as const])];
  if (methods.includes('mobile_money')) {
    const corridor = getCorridor(currency, 'mobile_money');
    if (!corridor || !corridor.directions.includes('onramp')) {
      throw corridorError('unsupported_corridor', `We do not collect ${currency} by mobile money; accept "stablecoin" only, or ask in another currency.`, {
        currency, payment_method: 'mobile_money', reason: 'collection_not_supported',
      });
    }
    const [min, max] = [toMinor(corridor.min_amount, scaleOf(currency)), toMinor(corridor.max_amount, scaleOf(currency))];
    if (minor < min || minor > max) {
      throw corridorError('amount_out_of_range', `A ${currency} mobile-money collection must be between ${corridor.min_amount} and ${corridor.max_amount} ${currency}.`, {
        min_amount: corridor.min_amount, max_amount: corridor.max_amount, currency,
      });
    }
    // Checked here, not at the prompt: an amount the live rail cannot collect is refused before anyone waits for it.
    if (wholeFiatRail(environment, currency, 'mobile_money') && minor % 10n ** BigInt(scaleOf(currency)) !== 0n) {
      throw invalid('amount.value', `must be a whole number of ${currency}: live M-Pesa collects whole units`);
    }
  }
  return { currency, amount: fromMinor(minor, scaleOf(currency)), methods };
}

/**
 * Writes the intent `awaiting_payment` with its own deposit address and its USDC price (from a fresh rate the pricing
 * pool observed), records its creation and stages its expiry, in the caller's transaction.
 */
export async function createPaymentIntent(unit: Unit, config: Config, scope: EventScope, id: string, input: CreatePaymentIntentInput, rate: RateQuote): Promise<PaymentIntentRow> {
  const { currency, amount, methods } = checkIntentAmount(input, scope.environment);
  const usdcMinor = fiatToUsdc(amount, currency, rate.rate, 'up');
  if (usdcMinor > MAX_INTENT_USDC_MINOR) {
    throw new AppError('amount_out_of_range', 'A payment intent may ask for at most the value of 1000000000 USDC.', { currency, max_usdc: '1000000000' });
  }
  if (input.customer?.id) {
    const found: unknown[] = await unit.em.query(planOnce(`SELECT 1 FROM customers WHERE ${byIdInScope()}`), [input.customer.id, scope.businessId, scope.environment]);
    if (!found.length) throw new AppError('not_found', 'No such customer.', { param: 'customer.id' });
  }
  const beneficiaryId = input.settlement.beneficiary_id ?? null;
  if (beneficiaryId) {
    const rows: { status: string }[] = await unit.em.query(planOnce(`SELECT status FROM beneficiaries WHERE ${byIdInScope()}`), [
      beneficiaryId, scope.businessId, scope.environment,
    ]);
    if (!rows[0]) throw new AppError('not_found', 'No such beneficiary.', { param: 'settlement.beneficiary_id' });
    if (rows[0].status !== 'active') throw new AppError('resource_archived', 'This beneficiary is archived and cannot be paid.', { beneficiary_id: beneficiaryId });
  }
  const { xpub } = walletOf(config, scope.environment, 'Live deposit addresses');
  const { index, address: depositAddress } = await claimAddress(unit.em, scope.environment, xpub);
  const chain = input.settlement.chain;
  const expiresIn = input.expires_in_seconds ?? 3600;
  // The customer as given is sealed; its clear copy keeps phone_number and email only redacted.
  const sealed = input.customer
    ? Object.entries(sealedPayerColumns(config, 'payment_intents', 'customer', { id, business_id: scope.businessId, environment: scope.environment }, input.customer))
    : [];
  const [row] = await insertCreated<PaymentIntentStatus, PaymentIntentRow>(unit, PAYMENT_INTENT_MACHINE, scope, 'awaiting_payment', {
    text: `INSERT INTO payment_intents AS i (id, business_id, environment, status, external_reference, currency, amount, accepted_payment_methods, customer, metadata, chain,
       exchange_rate, usdc_amount, deposit_address, hd_index, required_confirmations, beneficiary_id, expires_at, issued_block${sealed.map(([c]) => `, ${c}`).join('')})
     VALUES ($1, $2, $3, 'awaiting_payment', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, now() + make_interval(secs => $17), $18${sealed.map((_, i) => `, $${19 + i}`).join('')})
     RETURNING ${INTENT_COLUMNS}`,
    params: [id, scope.businessId, scope.environment, input.external_reference ?? null, currency, amount, methods, input.customer ? JSON.stringify(redactCustomer(input.customer)) : null,
      JSON.stringify(input.metadata ?? {}), chain, rate.rate, fromMinor(usdcMinor, USDC_SCALE), depositAddress, index,
      config.chains[chain].confirmations, beneficiaryId, expiresIn, (await issuedBlock(config, scope, chain))?.toString() ?? null, ...sealed.map(([, v]) => v)],
    prepared: false,
    ids: [id],
  }, paymentIntentView);
  await unit.stage(intentJobs.expire(id, expiresIn * 1000), scope);
  return row;
}

/** Decides a fact about the intent; answers the outcome and the intent as moved (undefined when it did not move). */
export async function decideIntentIn(unit: Unit, id: string, fact: IntentFact): Promise<{ outcome: string; row?: PaymentIntentRow }> {
  const { outcome, moved } = await decideAndApply(unit, INTENT_FLOW, id, fact);
  return { outcome, row: moved.get(id) as PaymentIntentRow | undefined };
}

/** POST /payment-intents/{id}/cancel: only from awaiting_payment (409 otherwise, from the plan that moves nothing). */
export async function cancelPaymentIntent(unit: Unit, scope: EventScope, id: string): Promise<PaymentIntentRow> {
  const intent = await findPaymentIntent(unit.em, scope, id, true);
  const { row } = await decideIntentIn(unit, intent.id, { kind: 'cancel' });
  if (!row) throw AppError.invalidState(`This payment intent is ${intent.status}; only one awaiting_payment can be cancelled.`, { status: intent.status });
  return row;
}

export interface CollectInput {
  payment_method: { type: 'mobile_money'; phone_number: string; mobile_network: string };
}

/**
 * POST /payment-intents/{id}/collect: awaiting_payment -> processing, and the providers pool prompts the payer
 * (STK Push in live). Each prompt is its own attempt, so a new prompt after a failed one is a new provider request.
 */
export async function startIntentCollection(unit: Unit, config: Config, scope: EventScope, id: string, input: CollectInput): Promise<PaymentIntentRow> {
  const intent = await findPaymentIntent(unit.em, scope, id, true);
  if (!intent.accepted_payment_methods.includes('mobile_money')) {
    throw AppError.invalidState('This payment intent does not accept mobile money.', { accepted_payment_methods: intent.accepted_payment_methods });
  }
  if (intent.status !== 'awaiting_payment') throw AppError.invalidState(`This payment intent is ${intent.status}; only one awaiting_payment can collect.`, { status: intent.status });
  if (intent.expires_at <= new Date()) throw AppError.invalidState('This payment intent has expired.', { status: 'expired', expires_at: intent.expires_at.toISOString() });
  const payer = checkPayer(getCorridor(intent.currency, 'mobile_money')!, input.payment_method);
  assertProvider(scope.environment, { db: unit.em, config }, intent.currency, 'mobile_money', payer.mobile_network);
  const attempt = intent.collection_attempts + 1;
  const { row } = await decideIntentIn(unit, intent.id, {
    kind: 'collect', attempt,
    payer: {
      payer_phone_redacted: redactPhone(payer.phone_number), payer_network: payer.mobile_network,
      ...sealedPayerColumns(config, 'payment_intents', 'payer_phone', intent, payer.phone_number),
    },
    job: intentJobs.collect(intent.id, attempt, scope.environment === 'sandbox' ? config.sandboxStepMs : 0),
  });
  return row!; // checked above under the same lock: awaiting_payment, not expired
}

/**
 * A collection did not bring the money (declined, or the provider kept failing): the intent waits for another payment,
 * or expires if its time is up. A payment seen meanwhile (a USDC transfer) keeps it processing.
 */
export function collectionCameToNothing(unit: Unit, intent: Pick<PaymentIntentRow, 'id' | 'collection_attempts'>, failure: { code: string; message: string }, providerReference: string | null): Promise<string> {
  return decideIn(unit, INTENT_FLOW, intent.id, { kind: 'prompt_ended', attempt: intent.collection_attempts, failure, providerReference });
}

/** What a collection's outcome means for the intent; the payment itself is recorded by the caller as a deposit. */
export function collectionFailure(outcome: ProviderOutcome): { code: string; message: string } {
  return { code: outcome.failure?.code ?? 'collection_declined', message: outcome.failure?.message ?? 'The payer did not complete the payment.' };
}

/** At expires_at: an intent still awaiting payment expires (one being paid finishes first). */
export function expirePaymentIntent(unit: Unit, intentId: string): Promise<string> {
  return decideIn(unit, INTENT_FLOW, intentId, { kind: 'expiry_tick' });
}

import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import type { ChainAdapter } from '../chain/adapter.js';
import type { EventScope } from './events.js';
import type { EntryInput } from './ledger.js';
import { formatAmount, fromMinor, scaleOf, toMinor, USDC_SCALE } from './money.js';
import { TREASURY_DEPOSIT_MACHINE, type PaymentIntentStatus, type TreasuryDepositStatus } from './machines.js';
import { confirmPollDelay, sweepJob } from './lifecycle-jobs.js';
import { rewindCursor } from '../chain/cursor.js';
import { decideIntentIn, fiatToUsdc, intentJobs, intentScope, loadPaymentIntent, type IntentPaymentMethod, type PaymentIntentRow } from './payment-intents.js';
import { insertCreated, NOW, transition } from './transition.js';
import { paymentDepth } from './confirmations.js';

// Treasury deposits: each payment to a payment intent, by mobile money (a provider receipt) or in USDC (a transfer log
// to the intent's deposit address), counted once (unique payment_key). A deposit is credited to the business's
// treasury as `pending`, then moves to its available balance when confirmed (mobile money at once; USDC at the
// chain's required confirmations), or back out if it fails (a transfer whose block left the chain). A payment that
// arrives after the intent was cancelled, expired or already paid is recorded and credited all the same, flagged
// `late_payment` for the business.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface DepositRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  payment_intent_id: string;
  payment_method: IntentPaymentMethod;
  status: TreasuryDepositStatus;
  payment_key: string;
  currency: string;
  amount: string;
  usdc_amount: string;
  chain: string;
  reference: string | null;
  receipt: string | null;
  transaction_hash: string | null;
  block_number: string | null;
  block_hash: string | null;
  confirmations: number;
  required_confirmations: number;
  late_payment: boolean;
  intent_status: PaymentIntentStatus;
  failure: { code: string; message: string } | null;
  observed_at: Date;
  confirmed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const DEPOSIT_COLUMNS = `d.id, d.business_id, d.environment, d.payment_intent_id, d.payment_method, d.status, d.payment_key, d.currency, d.amount::text,
  d.usdc_amount::text, d.chain, d.reference, d.receipt, d.transaction_hash, d.block_number::text, d.block_hash, d.confirmations, d.required_confirmations, d.late_payment,
  d.intent_status, d.failure, d.observed_at, d.confirmed_at, d.created_at, d.updated_at`;

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const minor = (value: string) => toMinor(formatAmount(value, USDC_SCALE), USDC_SCALE);

export function depositView(row: DepositRow): Record<string, unknown> {
  return {
    id: row.id,
    payment_intent_id: row.payment_intent_id,
    payment_method: row.payment_method,
    amount: { currency: row.currency, value: formatAmount(row.amount, scaleOf(row.currency)) },
    settled_amount: formatAmount(row.usdc_amount, USDC_SCALE),
    status: row.status,
    reference: row.reference,
    provider_reference: row.receipt,
    asset: 'USDC',
    chain: row.chain,
    transaction_hash: row.transaction_hash,
    confirmations: row.confirmations,
    required_confirmations: row.required_confirmations,
    late_payment: row.late_payment,
    intent_status: row.intent_status,
    failure: row.failure,
    observed_at: row.observed_at.toISOString(),
    confirmed_at: iso(row.confirmed_at),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function loadDeposit(q: Queryable, id: string, lock = false): Promise<DepositRow | undefined> {
  return ((await q.query(`SELECT ${DEPOSIT_COLUMNS} FROM treasury_deposits d WHERE d.id = $1${lock ? ' FOR UPDATE' : ''}`, [id])) as DepositRow[])[0];
}

export function findDeposit(q: Queryable, scope: EventScope, id: string): Promise<DepositRow> {
  return findScoped(q, { from: 'treasury_deposits d', columns: DEPOSIT_COLUMNS, resource: 'treasury deposit' }, scope, id);
}

export const depositJobs = {
  confirm: (depositId: string, round: number, delayMs = 0): JobRequest<'deposit.confirm'> => ({
    name: 'deposit.confirm', id: jobId('deposit.confirm', depositId, String(round)), data: { depositId, round }, delayMs,
  }),
};

const TREASURY = { kind: 'treasury' as const, asset: 'USDC' };
const PENDING = { kind: 'treasury_pending' as const, asset: 'USDC' };
const INBOUND = { kind: 'inbound_clearing' as const, asset: 'USDC' };

/** The ledger entry of a deposit's step: seen (pending), confirmed (available), or failed (taken back). */
function depositEntry(row: DepositRow, step: TreasuryDepositStatus): EntryInput {
  const amount = minor(row.usdc_amount);
  const [from, to] = step === 'pending' ? [INBOUND, PENDING] : step === 'confirmed' ? [PENDING, TREASURY] : [PENDING, INBOUND];
  return {
    kind: `treasury_deposit_${step}`,
    reference: `treasury-deposit-${step}-${row.id}`,
    metadata: { deposit_id: row.id, payment_intent_id: row.payment_intent_id },
    postings: [{ account: from, amount: -amount }, { account: to, amount }],
  };
}

export interface Payment {
  method: IntentPaymentMethod;
  /** Counts the payment once: the provider's receipt, or `<transaction hash>-<log index>`. */
  key: string;
  /** What was paid, in its own unit (the intent's currency for mobile money, USDC for a transfer). */
  currency: string;
  amount: string;
  /** What it is worth in USDC (minor units): the transfer itself, or the fiat converted at the intent's rate, rounded down. */
  usdcAmount: bigint;
  reference: string | null;
  /** The provider's receipt of a mobile-money payment (provider_reference). */
  receipt?: string | null;
  transactionHash?: string | null;
  blockNumber?: bigint | null;
  blockHash?: string | null;
}

/** A mobile-money payment of the intent's whole amount, worth its USDC at the intent's rate (rounded down). */
export function mobileMoneyPayment(intent: PaymentIntentRow, providerReference: string, receipt?: string): Payment {
  return {
    receipt: receipt ?? null,
    method: 'mobile_money', key: providerReference, currency: intent.currency, amount: intent.amount,
    usdcAmount: fiatToUsdc(formatAmount(intent.amount, scaleOf(intent.currency)), intent.currency, intent.exchange_rate, 'down'), reference: providerReference,
  };
}

/**
 * How much of the intent's USDC amount a payment settles: a transfer its own amount; a mobile-money payment of the
 * whole fiat amount the whole intent (its USDC value is rounded down, the intent's price up).
 */
function towardIntent(payment: { method: IntentPaymentMethod; amount: string; usdc: bigint }, intent: PaymentIntentRow): bigint {
  if (payment.method !== 'mobile_money') return payment.usdc;
  const scale = scaleOf(intent.currency);
  return toMinor(formatAmount(payment.amount, scale), scale) >= toMinor(formatAmount(intent.amount, scale), scale) ? minor(intent.usdc_amount) : payment.usdc;
}

export interface Recorded {
  deposit: DepositRow;
  isNew: boolean;
}

/**
 * A payment to an intent, recorded once and credited to the treasury as pending, in the caller's transaction. The
 * intent row is locked first, so a cancel or an expiry at the same moment either happens before (the payment is then
 * late, flagged) or after (it finds the intent processing and is refused). Mobile money is confirmed at once; a USDC
 * transfer counts its confirmations (`chain` given: now, else by the confirmation job).
 */
export async function recordPayment(unit: Unit, config: Config, intentId: string, payment: Payment, chain?: ChainAdapter, options: { late?: boolean } = {}): Promise<Recorded> {
  const intent = (await loadPaymentIntent(unit.em, intentId, true))!;
  const scope = intentScope(intent);
  // After a cancel, an expiry or a payment that already covered the price, a payment is extra: credited, flagged. So
  // is the success of a collection the intent already gave up on (`options.late`, CONTRACT §14).
  const late = options.late === true || !['awaiting_payment', 'processing'].includes(intent.status) || minor(intent.received_amount) >= minor(intent.usdc_amount);
  const required = payment.method === 'mobile_money' ? 0 : intent.required_confirmations;
  // The deposit, with its history row and event, unless this payment is already recorded (then nothing is written).
  const id = randomUUID();
  const inserted = await insertCreated<TreasuryDepositStatus, DepositRow>(unit, TREASURY_DEPOSIT_MACHINE, scope, 'pending', {
    text: `INSERT INTO treasury_deposits AS d (id, business_id, environment, payment_intent_id, payment_method, status, payment_key, currency, amount, usdc_amount, chain,
       reference, transaction_hash, block_number, block_hash, required_confirmations, late_payment, intent_status, receipt)
     VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
     ON CONFLICT (environment, payment_method, payment_key) DO NOTHING RETURNING ${DEPOSIT_COLUMNS}`,
    params: [id, scope.businessId, scope.environment, intent.id, payment.method, payment.key, payment.currency, payment.amount, fromMinor(payment.usdcAmount, USDC_SCALE),
      intent.chain, payment.reference, payment.transactionHash ?? null, payment.blockNumber?.toString() ?? null, payment.blockHash ?? null, required, late, intent.status, payment.receipt ?? null],
    prepared: true,
    ids: [id],
  }, depositView);
  if (!inserted[0]) {
    const existing: DepositRow[] = await unit.em.query(`SELECT ${DEPOSIT_COLUMNS} FROM treasury_deposits d WHERE d.environment = $1 AND d.payment_method = $2 AND d.payment_key = $3`, [
      scope.environment, payment.method, payment.key,
    ]);
    // Recorded by STK Query, which names no receipt: the receipt a later report brings is kept with it.
    if (payment.receipt && existing[0] && !existing[0].receipt) {
      await unit.em.query(`UPDATE treasury_deposits SET receipt = $2 WHERE id = $1 AND receipt IS NULL`, [existing[0].id, payment.receipt]);
      existing[0].receipt = payment.receipt;
    }
    return { deposit: existing[0], isNew: false };
  }
  const deposit = inserted[0];
  unit.post(scope, depositEntry(deposit, 'pending'));
  let current = intent;
  if (!late) {
    const rows = await updateReturning<{ received_amount: string }>(
      unit.em,
      `UPDATE payment_intents SET received_amount = received_amount + $2, updated_at = now() WHERE id = $1 RETURNING received_amount::text`,
      [intent.id, fromMinor(towardIntent({ method: payment.method, amount: payment.amount, usdc: payment.usdcAmount }, intent), USDC_SCALE)],
    );
    current = { ...intent, received_amount: rows[0].received_amount };
    // Paid in full, the intent is being processed (a collection under way already is): kernel/intents.ts decides.
    current = (await decideIntentIn(unit, intent.id, { kind: 'payment_counted', method: payment.method })).row ?? current;
  }
  if (payment.method === 'mobile_money') {
    await confirmDeposit(unit, config, deposit, current);
  } else if (chain) {
    await countConfirmations(unit, config, chain, deposit, current, 0);
  } else {
    await unit.stage(depositJobs.confirm(deposit.id, 1, stepDelay(config, scope)), scope);
  }
  return { deposit, isNew: true };
}

const stepDelay = (config: Config, scope: EventScope): number => (scope.environment === 'sandbox' ? config.sandboxStepMs : 0);

/** The confirmation job: counts a USDC deposit's confirmations; at the required number, it is confirmed. */
export async function confirmDepositStep(unit: Unit, config: Config, chain: ChainAdapter, depositId: string, round: number): Promise<string> {
  const deposit = await loadDeposit(unit.em, depositId);
  if (!deposit || deposit.status !== 'pending') return `not pending (${deposit?.status ?? 'gone'})`;
  const intent = (await loadPaymentIntent(unit.em, deposit.payment_intent_id, true))!;
  return countConfirmations(unit, config, chain, deposit, intent, round);
}

/** Counts now, by the one rule (paymentDepth): deep enough, confirmed; its block gone, failed; else a check a step later. */
async function countConfirmations(unit: Unit, config: Config, chain: ChainAdapter, deposit: DepositRow, intent: PaymentIntentRow, round: number): Promise<string> {
  const depth = await paymentDepth(chain, intent.chain, [deposit], deposit.required_confirmations, deposit.observed_at);
  if (depth.state === 'reorged') {
    // A reorg removed the payment's block: the deposit fails (its pending credit reversed); if the transfer is mined
    // again, the watcher, sent back to that block, records it anew.
    await rewindCursor(unit.em, intent.environment, intent.chain, deposit.block_number!); // reorged: it had a block
    // Its payment key is freed: the same transfer mined again in the new chain is a new deposit.
    return failDeposit(unit, deposit.id, { code: 'reorged', message: 'The block that held this transfer left the canonical chain.' }, {
      payment_key: `${deposit.payment_key}-reorged-${deposit.block_hash}`,
    });
  }
  if (depth.state === 'unknown' || !depth.deep) {
    if (depth.state === 'counted') {
      await unit.em.query(`UPDATE treasury_deposits SET confirmations = $2, updated_at = now() WHERE id = $1 AND confirmations < $2`, [deposit.id, depth.confirmations]);
    }
    const next = Math.max(confirmPollDelay(config, intent.environment), depth.state === 'counted' ? depth.nextCheckMs : 0);
    await unit.stage(depositJobs.confirm(deposit.id, round + 1, next), intentScope(intent));
    return depth.state === 'unknown' ? `unknown: ${depth.reason}` : `${depth.confirmations}/${deposit.required_confirmations}`;
  }
  await confirmDeposit(unit, config, deposit, intent);
  // Live: the intent's deposit address is swept to the hot wallet, beside whatever the payment starts.
  if (chain.live && deposit.payment_method === 'stablecoin') await unit.stage(sweepJob('payment_intent', intent.id, deposit.id), intentScope(intent));
  return 'confirmed';
}

/**
 * pending -> confirmed: the deposit moves to the treasury's available balance. An intent being processed completes
 * once its confirmed deposits cover its USDC amount, and with a beneficiary it stages the payout from the treasury.
 */
async function confirmDeposit(unit: Unit, config: Config, deposit: DepositRow, intent: PaymentIntentRow): Promise<void> {
  const moved = await transition<TreasuryDepositStatus, DepositRow>(unit, TREASURY_DEPOSIT_MACHINE, {
    scope: intentScope(intent),
    id: deposit.id,
    to: 'confirmed',
    expected: deposit.status,
    set: { confirmed_at: NOW, confirmations: deposit.required_confirmations },
    view: (row) => depositView(row),
    ledger: (row) => depositEntry(row, 'confirmed'),
  });
  if (!moved || deposit.late_payment) return;
  await unit.em.query(
    `UPDATE payment_intents SET confirmed_amount = confirmed_amount + $2, updated_at = now() WHERE id = $1`,
    [intent.id, fromMinor(towardIntent({ method: deposit.payment_method, amount: deposit.amount, usdc: minor(deposit.usdc_amount) }, intent), USDC_SCALE)],
  );
  // Covered, an intent being processed completes and its beneficiary's payout is staged: kernel/intents.ts decides.
  await decideIntentIn(unit, intent.id, { kind: 'payment_confirmed', payout: intentJobs.payout(intent.id, stepDelay(config, intentScope(intent))) });
}

/**
 * pending -> failed: a payment that did not hold (its transfer's block left the chain, the provider reversed it) is
 * taken back out of the treasury's pending balance; an intent it had paid waits for payment again (or expires).
 */
export async function failDeposit(unit: Unit, depositId: string, failure: { code: string; message: string }, set: Record<string, unknown> = {}): Promise<string> {
  const deposit = await loadDeposit(unit.em, depositId);
  if (!deposit || deposit.status !== 'pending') return `not pending (${deposit?.status ?? 'gone'})`;
  const intent = (await loadPaymentIntent(unit.em, deposit.payment_intent_id, true))!;
  const moved = await transition<TreasuryDepositStatus, DepositRow>(unit, TREASURY_DEPOSIT_MACHINE, {
    scope: intentScope(intent),
    id: deposit.id,
    to: 'failed',
    expected: deposit.status,
    set: { failure, ...set },
    reason: failure.code,
    view: (row) => depositView(row),
    ledger: (row) => depositEntry(row, 'failed'),
  });
  if (!moved || deposit.late_payment) return 'failed';
  await unit.em.query(
    `UPDATE payment_intents SET received_amount = received_amount - $2, updated_at = now() WHERE id = $1`,
    [intent.id, fromMinor(towardIntent({ method: deposit.payment_method, amount: deposit.amount, usdc: minor(deposit.usdc_amount) }, intent), USDC_SCALE)],
  );
  // No longer covered, an intent being processed waits for payment again or expires: kernel/intents.ts decides.
  await decideIntentIn(unit, intent.id, { kind: 'payment_reversed', failure });
  return 'failed';
}

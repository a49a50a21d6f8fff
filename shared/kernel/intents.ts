// A payment intent's lifecycle (CONTRACT section 8, §18) as a pure decision: what a cancel, a collection, the end of
// a prompt, the expiry, and a payment counted, confirmed or taken back do to the intent's status; and what its
// beneficiary's payout (an off-ramp funded from the treasury) starting, not starting or ending does to payout_status.
// The payments are treasury deposits (treasury-deposits.ts), the payout its transaction: this decides only the intent.
// Nothing here reads a database, a queue or a provider: the loader (payment-intents.ts) reads and locks the row.
import type { EventScope } from '../domain/events.js';
import { INTENT_PAYOUT_MACHINE, PAYMENT_INTENT_MACHINE, type PaymentIntentStatus, type PayoutStatus } from '../domain/machines.js';
import type { JobRequest } from '../queues/producer.js';
import { nothing, NOW, plan, type Move, type Plan } from './plan.js';
import { intentAfterUnpaidPrompt } from './stk-results.js';

export interface IntentSnapshot {
  id: string;
  scope: EventScope;
  status: PaymentIntentStatus;
  /** The prompts asked for so far: `<intent id>-<attempt>` names each one's collection request. */
  collectionAttempts: number;
  /** USDC minor units: the price, what counted payments brought, and what of that is confirmed. */
  price: bigint;
  received: bigint;
  confirmed: bigint;
  /** A completed intent pays its beneficiary from the treasury (settlement.payout_status). */
  hasBeneficiary: boolean;
  /** settlement.payout_status: null without a beneficiary, pending once completed, then as its transaction goes. */
  payoutStatus: PayoutStatus | null;
  expiresAt: Date;
  /** The clock the decision compares `expiresAt` with, read by the loader. */
  now: Date;
}

export interface IntentFailure {
  code: string;
  message: string;
}

export type IntentFact =
  /** POST /payment-intents/{id}/cancel. */
  | { kind: 'cancel' }
  /** POST /payment-intents/{id}/collect: prompt number `attempt` (the next one), its payer's columns, its collect job. */
  | { kind: 'collect'; attempt: number; payer: Record<string, unknown>; job: JobRequest }
  /** Prompt `attempt` ended unpaid: declined, refused, every STK code but 0, or the provider never answered. */
  | { kind: 'prompt_ended'; attempt: number; failure: IntentFailure; providerReference: string | null }
  /** The expiry job, at (or after) expires_at. */
  | { kind: 'expiry_tick' }
  /** A payment (mobile money or a USDC transfer) was counted into `received` (the snapshot already holds it). */
  | { kind: 'payment_counted'; method: 'mobile_money' | 'stablecoin' }
  /** A deposit was confirmed into `confirmed` (the snapshot already holds it); `payout` starts the beneficiary's payout. */
  | { kind: 'payment_confirmed'; payout: JobRequest }
  /** A counted payment did not hold (its block left the chain): taken back out of `received` (the snapshot holds that). */
  | { kind: 'payment_reversed'; failure: IntentFailure }
  /** The payout's transaction was written, the treasury debited and its payout staged (in the same unit). */
  | { kind: 'payout_started'; transactionId: string }
  /** The payout cannot start (the beneficiary archived, no price, the treasury spent elsewhere): the reason shown. */
  | { kind: 'payout_not_started'; message: string }
  /** The payout's transaction completed or failed (its failure, when it has one). */
  | { kind: 'payout_ended'; to: 'completed' | 'failed'; failure: { code?: string; message?: string } | null };

/** One move of the intent from the status the decision read. */
function move(i: IntentSnapshot, to: PaymentIntentStatus, set: Record<string, unknown>, reason: string): Move {
  return { machine: PAYMENT_INTENT_MACHINE, id: i.id, from: i.status, to, set, reason };
}

/** Where an intent goes when what it waited on came to nothing: waiting again, or expired once its time is up. */
const waitOrExpire = (i: IntentSnapshot): PaymentIntentStatus => (i.expiresAt <= i.now ? 'expired' : 'awaiting_payment');

const unchanged = (i: IntentSnapshot) => nothing(i.scope, `unchanged (${i.status})`);

/** One move of the intent's payout_status (its own machine on the same row). */
function payoutMove(i: IntentSnapshot, to: PayoutStatus, set: Record<string, unknown>, reason: string): Plan {
  return plan(i.scope, to, { moves: [{ machine: INTENT_PAYOUT_MACHINE, id: i.id, from: i.payoutStatus!, to, set, reason }] });
}

/** What the beneficiary's payout does to payout_status: it starts, or fails, only while pending; it ends only once started. */
function decidePayout(i: IntentSnapshot, fact: Extract<IntentFact, { kind: `payout_${string}` }>): Plan {
  const notPending = nothing(i.scope, `not pending (${i.payoutStatus})`);
  switch (fact.kind) {
    case 'payout_started':
      if (i.payoutStatus !== 'pending') return notPending;
      return payoutMove(i, 'processing', { payout_transaction_id: fact.transactionId, payout_error: null }, 'payout_started');
    case 'payout_not_started':
      if (i.payoutStatus !== 'pending') return notPending;
      return payoutMove(i, 'failed', { payout_error: fact.message }, 'payout_not_started');
    case 'payout_ended':
      if (fact.to === 'completed') {
        if (i.payoutStatus !== 'processing') return nothing(i.scope, `unchanged (${i.payoutStatus})`);
        return payoutMove(i, 'completed', { payout_error: null }, 'payout_completed');
      }
      if (i.payoutStatus !== 'pending' && i.payoutStatus !== 'processing') return nothing(i.scope, `unchanged (${i.payoutStatus})`);
      return payoutMove(i, 'failed', { payout_error: fact.failure?.message ?? 'The payout failed.' }, fact.failure?.code ?? 'payout_failed');
  }
}

export function decideIntent(i: IntentSnapshot, fact: IntentFact): Plan {
  switch (fact.kind) {
    case 'cancel':
      // Only from awaiting_payment; a payment that arrives later is still recorded (late).
      if (i.status !== 'awaiting_payment') return unchanged(i);
      return plan(i.scope, 'cancelled', { moves: [move(i, 'cancelled', { cancelled_at: NOW }, 'cancelled')] });
    case 'collect': {
      if (i.status !== 'awaiting_payment') return unchanged(i);
      if (i.expiresAt <= i.now) return nothing(i.scope, 'expired');
      // A collect decided on an older read names an attempt already taken: it prompts nobody.
      if (fact.attempt !== i.collectionAttempts + 1) return nothing(i.scope, `stale attempt (${fact.attempt})`);
      const set = { ...fact.payer, collection_attempts: fact.attempt, last_payment_error: null, provider_reference: null };
      return plan(i.scope, 'processing', { moves: [move(i, 'processing', set, 'collection_requested')], jobs: [fact.job] });
    }
    case 'prompt_ended': {
      // Only the current prompt of an intent being processed; a payment seen meanwhile keeps it processing.
      const current = i.status === 'processing' && i.collectionAttempts === fact.attempt;
      const to = intentAfterUnpaidPrompt({ status: i.status, current, fullyPaid: i.received >= i.price, expiresAt: i.expiresAt }, i.now);
      if (!to) return nothing(i.scope, current ? 'paid otherwise' : `moved on (${i.status})`);
      const set = { last_payment_error: fact.failure, provider_reference: fact.providerReference };
      return plan(i.scope, to, { moves: [move(i, to, set, fact.failure.code)] });
    }
    case 'expiry_tick':
      // One being paid finishes first: its payment's outcome decides.
      if (i.status !== 'awaiting_payment') return unchanged(i);
      if (i.expiresAt > i.now) return nothing(i.scope, 'not yet');
      return plan(i.scope, 'expired', { moves: [move(i, 'expired', {}, 'expired')] });
    case 'payment_counted':
      // Paid in full: the intent is being processed (a collection under way already is).
      if (i.status !== 'awaiting_payment' || i.received < i.price) return unchanged(i);
      return plan(i.scope, 'processing', { moves: [move(i, 'processing', { last_payment_error: null }, `paid_by_${fact.method}`)] });
    case 'payment_confirmed': {
      if (i.status !== 'processing' || i.confirmed < i.price) return unchanged(i);
      const set = { completed_at: NOW, ...(i.hasBeneficiary ? { payout_status: 'pending' } : {}) };
      return plan(i.scope, 'completed', { moves: [move(i, 'completed', set, 'paid')], jobs: i.hasBeneficiary ? [fact.payout] : [] });
    }
    case 'payment_reversed': {
      if (i.status !== 'processing' || i.received >= i.price) return unchanged(i);
      const to = waitOrExpire(i);
      return plan(i.scope, to, { moves: [move(i, to, { last_payment_error: fact.failure }, fact.failure.code)] });
    }
    default:
      return decidePayout(i, fact);
  }
}

// A transaction's refund as a state machine (REFUND_MACHINE: transactions.refund_status, its data in
// transactions.refund): what a decided refund changes over the one read, as one compare-and-set, and the on-ramp's
// fiat refund decided from the provider's answer. The off-ramp's status follows from its sends (refundSummary,
// refund-due.ts). Pure: no database; apply() or moveRecord() carries the move out, the caller announces the
// transaction with it (`transaction.<status>`).
import { REFUND_MACHINE, type RefundStatus } from '../domain/machines.js';
import { KernelInvariantError } from './invariants.js';
import { NOW, type Move } from './plan.js';
import { refundRetryDelayMs } from './refund-due.js';

/** What transactions.refund holds: the refund's data, never its status (refund_status). */
export interface RefundData {
  /** USDC for an off-ramp; an on-ramp's fiat (`currency`) paid back to its payer. */
  amount: string;
  to_address?: string | null;
  transaction_hash: string | null;
  /** On-ramps: the fiat's currency, the payer's phone (redacted), the provider's receipt of the payout, why it failed. */
  currency?: string;
  phone_number?: string;
  provider_reference?: string | null;
  failure?: { code: string; message: string };
  /** On-ramps: how often the provider refused its payout for good (the retry's backoff grows with it); never shown. */
  refusals?: number;
  /** Off-ramps: each return of USDC (amount in minor units); never shown, `amount` and the status are derived from it. */
  sends?: { reference: string; amount: string; status: 'pending' | 'completed' | 'failed'; hash: string | null; requested: boolean; to?: string; resent?: boolean }[];
}

/** A refund as decided and shown: its status with its data. */
export interface RefundState extends RefundData {
  status: RefundStatus;
}

/** The refund as read from its transaction's row. */
export interface RefundRead {
  id: string;
  refund_status: RefundStatus | null;
}

/**
 * The move that records `next` over the refund read: a creation (none read), a move of REFUND_MACHINE, or a stay
 * (the status read, only its data rewritten), each a compare-and-set from the status read, with `set` (other columns)
 * in the same UPDATE. Null when there is no refund before or after. A refund is never removed: that is a broken
 * decision, thrown; a move the machine forbids (a completed refund failed) is refused by apply()'s assertion.
 */
export function refundMove(read: RefundRead, next: RefundState | null, set: Record<string, unknown> = {}): Move | null {
  if (!next) {
    if (read.refund_status !== null) throw new KernelInvariantError('refund_kept', `the ${read.refund_status} refund of ${read.id} would be removed`);
    return null;
  }
  const { status, ...data } = next;
  return { machine: REFUND_MACHINE, id: read.id, from: read.refund_status, to: status, set: { ...set, refund: data, updated_at: NOW } };
}

/** An on-ramp's delivery failed for good: the fiat it collected is owed back to the payer, pending its payout. */
export function fiatRefundOwed(tx: { total_required: string; currency: string; payer_phone_redacted: string | null }): RefundState {
  return {
    status: 'pending', amount: tx.total_required, currency: tx.currency, to_address: null, transaction_hash: null,
    phone_number: tx.payer_phone_redacted ?? undefined, provider_reference: null,
  };
}

/** What the provider answered about the payout of a fiat refund, as far as the refund is concerned. */
export interface FiatRefundAnswer {
  /** The provider's status: succeeded, pending, temporary_failure, or a refusal. */
  status: string;
  receipt?: string;
  failure?: { code: string; message: string };
}

/**
 * The pending fiat refund once the provider answered: paid (completed, with its receipt) or refused for good (failed,
 * with why and one more refusal counted: it is sent again after fiatRefundRetryDelayMs, CONTRACT §18 "On-ramp
 * refunds", never left for an operator to pay by hand). Null while it is still running (its result or the sweeper
 * decides) or when the refund is not pending.
 */
export function fiatRefundAnswered(refund: RefundState | null, answer: FiatRefundAnswer): RefundState | null {
  if (refund?.status !== 'pending' || answer.status === 'pending' || answer.status === 'temporary_failure') return null;
  if (answer.status === 'succeeded') return { ...refund, status: 'completed', provider_reference: answer.receipt ?? null };
  return {
    ...refund, status: 'failed', provider_reference: null, refusals: (refund.refusals ?? 0) + 1,
    failure: answer.failure ?? { code: 'refund_rejected', message: 'The provider refused the refund payout.' },
  };
}

/** The backoff before a refused fiat refund is sent again, after its refusals so far: 30 s doubling, at most an hour. */
export function fiatRefundRetryDelayMs(refund: Pick<RefundState, 'refusals'>): number {
  return refundRetryDelayMs(refund.refusals ?? 1);
}

// A job that runs a moment early (timers, clocks) still counts as on time.
const DUE_TOLERANCE_MS = 1000;

/**
 * What the on-ramp's refund job does: `pay` a pending refund (its request, or the status check of one that may be
 * live, CONTRACT §18); `send_again` a refused one whose backoff has passed; else nothing (`not_due`, or `none`: no
 * refund to pay, paid, or refused before retries were scheduled: no due time, since an operator may have paid it by
 * hand as the code then said, and nothing recorded it; it goes again only once someone sets its refund_due_at).
 */
export function fiatRefundStep(read: { refund_status: RefundStatus | null; refund_due_at: Date | null }, now: number): 'pay' | 'send_again' | 'not_due' | 'none' {
  if (read.refund_status === 'pending') return 'pay';
  if (read.refund_status !== 'failed' || !read.refund_due_at) return 'none';
  return read.refund_due_at.getTime() <= now + DUE_TOLERANCE_MS ? 'send_again' : 'not_due';
}

/** A refused fiat refund sent again: pending once more, its last refusal's reason cleared (its count kept for the backoff). */
export function fiatRefundRetried(refund: RefundState): RefundState {
  if (refund.status !== 'failed' || !refund.currency) throw new KernelInvariantError('fiat_refund_retried', `a ${refund.status} refund is not a refused fiat refund`);
  const { failure: _failure, ...rest } = refund;
  return { ...rest, status: 'pending' };
}

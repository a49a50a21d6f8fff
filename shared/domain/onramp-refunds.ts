// CONTRACT §14: an on-ramp whose payer paid and whose USDC delivery failed for good keeps the fiat owed. It ends
// `failed` (`delivery_failed`) with `refund { status: "pending" }`, and the providers pool pays the collected amount
// back to the payer's phone (Daraja B2C in live, simulated in sandbox) with our transaction id as the payout's
// reference, so a retried job, a restarted worker or the sweeper never pays the payer twice. CONTRACT §18: it is sent
// again until paid; a payout the provider refused for good leaves the refund `failed` only until its backoff passes,
// then it goes again as a new request (the refusal is the final "not paid" about the one before).
// The steps are decided in shared/kernel/refund-machine.ts (fiatRefundAnswered, fiatRefundStep, fiatRefundRetried).
import type { Unit } from '../db/unit-of-work.js';
import type { ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { fiatRefundAnswered, fiatRefundRetried, fiatRefundRetryDelayMs, fiatRefundStep } from '../kernel/refund-machine.js';
import { recordRefund } from './refund-records.js';
import { refundOf, scopeOf, type TransactionRow } from './transactions.js';
import { decideOnrampAndApply } from './onramp-moves.js';

export const onrampRefundJobs = {
  /**
   * The payout of an on-ramp's fiat back to its payer (`round`: 0 first; a status check's or a resend's tag; `f<n>` after
   * its n-th refusal; the sweeper's `r<due time>` for a refused one past its backoff).
   */
  pay: (transactionId: string, round: number | string = 0): JobRequest<'onramp.refund'> => ({
    name: 'onramp.refund', id: jobId('onramp.refund', transactionId, String(round)), data: { transactionId },
  }),
};

/** Whether the payer's money reached us and no USDC left for it: the delivery step, or a stall in it. */
export function deliveryPending(tx: Pick<TransactionRow, 'direction' | 'status' | 'stalled_at'>): boolean {
  if (tx.direction !== 'onramp') return false;
  const step = tx.status === 'action_required' ? tx.stalled_at : tx.status;
  return step === 'funded' || step === 'processing';
}

/**
 * The delivery failed for good (its send reverted on chain; sandbox: forced): the on-ramp fails with the fiat refund
 * pending and its payout staged. The caller has established that no USDC left for it.
 */
export async function failDelivery(unit: Unit, tx: TransactionRow, failure: { code: string; message: string }): Promise<TransactionRow | null> {
  if (!deliveryPending(tx)) return null;
  return (await decideOnrampAndApply(unit, tx.id, { kind: 'delivery_failed', failure, pay: onrampRefundJobs.pay(tx.id) })).row ?? null;
}

/**
 * A final answer about the refund's payout (shared/kernel/payout-answers.ts): paid ends the refund; refused for good
 * fails it until its backoff passes (applyFiatRefund); not paid for now, or no record of it, sends it again after
 * `delayMs` (the request goes without asking), for as long as it is unpaid.
 */
export async function fiatRefundResult(unit: Unit, tx: TransactionRow, plan: 'complete' | 'fail' | 'resend' | 'stall', outcome: ProviderOutcome, delayMs: number, sends: number): Promise<string> {
  if (plan === 'resend' || plan === 'stall') {
    await unit.stage({ ...onrampRefundJobs.pay(tx.id, `s${sends}`), delayMs }, scopeOf(tx));
    return 'paid back again';
  }
  return applyFiatRefund(unit, tx, outcome);
}

/**
 * The provider's answer to the fiat refund: paid (completed, with its receipt), refused for good (failed, and sent
 * again after a growing, capped backoff: refund_due_at, its job staged for then, the sweeper's net behind it), or
 * still running (pending: its result or the sweeper decides).
 */
export async function applyFiatRefund(unit: Unit, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  if (tx.direction !== 'onramp' || tx.refund_status !== 'pending') return `unchanged (refund ${tx.refund_status ?? 'none'})`;
  const answered = fiatRefundAnswered(refundOf(tx), outcome);
  if (!answered) return 'pending';
  if (answered.status === 'completed') {
    await recordRefund(unit, tx, answered);
    return 'refunded';
  }
  const delayMs = fiatRefundRetryDelayMs(answered);
  const dueAt = new Date(Date.now() + delayMs);
  await unit.stage({ ...onrampRefundJobs.pay(tx.id, `f${answered.refusals}`), delayMs }, scopeOf(tx));
  await recordRefund(unit, tx, answered, { refund_due_at: dueAt });
  return `refund failed; sent again in ${delayMs} ms`;
}

/**
 * A refused fiat refund whose backoff has passed goes back to pending (a compare-and-set from failed, decided again
 * under the lock), so the job that holds it pays it as a new request. False: not due, or moved on meanwhile.
 */
export async function resendFiatRefund(unit: Unit, tx: TransactionRow): Promise<boolean> {
  if (tx.direction !== 'onramp' || fiatRefundStep(tx, Date.now()) !== 'send_again') return false;
  await recordRefund(unit, tx, fiatRefundRetried(refundOf(tx)!), { refund_due_at: null });
  return true;
}

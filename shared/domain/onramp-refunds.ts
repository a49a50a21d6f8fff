// CONTRACT §14: an on-ramp whose payer paid and whose USDC delivery failed for good keeps the fiat owed. It ends
// `failed` (`delivery_failed`) with `refund { status: "pending" }`, and the providers pool pays the collected amount
// back to the payer's phone (Daraja B2C in live, simulated in sandbox) with our transaction id as the payout's
// reference, so a retried job, a restarted worker or the sweeper never pays the payer twice.
import type { Unit } from '../db/unit-of-work.js';
import type { ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { fiatRefundAnswered, fiatRefundOwed } from '../kernel/refund-machine.js';
import { moveWithRefund, recordRefund } from './refund-records.js';
import { refundOf, scopeOf, type TransactionRow } from './transactions.js';

export const onrampRefundJobs = {
  /** The payout of an on-ramp's fiat back to its payer (`round` > 0: the sweeper's re-drive of one still pending). */
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
  const moved = await moveWithRefund(unit, tx, 'failed', fiatRefundOwed(tx), { set: { failure }, reason: failure.code });
  if (!moved) return null;
  await unit.stage(onrampRefundJobs.pay(tx.id), scopeOf(tx));
  return moved.row;
}

/**
 * A final answer about the refund's payout (shared/kernel/payout-answers.ts): paid or refused for good ends the refund;
 * not paid for now, or no record of it, sends it again after `delayMs` (the request goes without asking), for as long
 * as it is unpaid.
 */
export async function fiatRefundResult(unit: Unit, tx: TransactionRow, plan: 'complete' | 'fail' | 'resend' | 'stall', outcome: ProviderOutcome, delayMs: number, sends: number): Promise<string> {
  if (plan === 'resend' || plan === 'stall') {
    await unit.stage({ ...onrampRefundJobs.pay(tx.id, `s${sends}`), delayMs }, scopeOf(tx));
    return 'paid back again';
  }
  return applyFiatRefund(unit, tx, outcome);
}

/**
 * The provider's answer to the fiat refund: paid (completed, with its receipt), refused for good (failed: the payer's
 * number cannot receive; an operator pays by hand), or still running (pending: its result or the sweeper decides).
 */
export async function applyFiatRefund(unit: Unit, tx: TransactionRow, outcome: ProviderOutcome): Promise<string> {
  if (tx.direction !== 'onramp' || tx.refund_status !== 'pending') return `unchanged (refund ${tx.refund_status ?? 'none'})`;
  const answered = fiatRefundAnswered(refundOf(tx), outcome);
  if (!answered) return 'pending';
  await recordRefund(unit, tx, answered);
  return answered.status === 'completed' ? 'refunded' : 'refund failed';
}

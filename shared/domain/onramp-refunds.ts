// CONTRACT §14: an on-ramp whose payer paid and whose USDC delivery failed for good keeps the fiat owed. It ends
// `failed` (`delivery_failed`) with `refund { status: "pending" }`, and the providers pool pays the collected amount
// back to the payer's phone (Daraja B2C in live, simulated in sandbox) with our transaction id as the payout's
// reference, so a retried job, a restarted worker or the sweeper never pays the payer twice.
import type { Unit } from '../db/unit-of-work.js';
import type { ProviderOutcome } from '../providers/provider.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { recordRefund } from './refunds.js';
import { scopeOf, type RefundState, type TransactionRow } from './transactions.js';
import { moveTransaction } from './transaction-moves.js';

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
  const refund: RefundState = {
    status: 'pending', amount: tx.total_required, currency: tx.currency, to_address: null, transaction_hash: null,
    phone_number: tx.payer_phone_redacted ?? undefined, provider_reference: null,
  };
  const moved = await moveTransaction(unit, tx, 'failed', { set: { failure, refund }, reason: failure.code });
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
  if (tx.direction !== 'onramp' || tx.refund?.status !== 'pending') return `unchanged (refund ${tx.refund?.status ?? 'none'})`;
  if (outcome.status === 'pending' || outcome.status === 'temporary_failure') return 'pending';
  const paid = outcome.status === 'succeeded';
  await recordRefund(unit, tx, {
    ...tx.refund, status: paid ? 'completed' : 'failed', provider_reference: paid ? (outcome.receipt ?? null) : null,
    ...(paid ? {} : { failure: outcome.failure ?? { code: 'refund_rejected', message: 'The provider refused the refund payout.' } }),
  });
  return paid ? 'refunded' : 'refund failed';
}

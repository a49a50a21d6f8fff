import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { updateReturning, type Unit } from '../db/unit-of-work.js';
import type { JobRequest } from '../queues/producer.js';
import { jobId } from '../queues/registry.js';
import { toMinor, USDC_SCALE } from './money.js';
import { settlementOf, type SettlementRow } from './settlements.js';
import { scopeOf, type TransactionRow } from './transactions.js';
import { refundTally, type RefundFunds, type RefundSend } from '../kernel/refund-due.js';
import { finalAnswerOf, payoutUnpaid, type PayoutAnswer } from '../kernel/payout-answers.js';

// What an off-ramp holds for its refund (CONTRACT section 14) and when its return falls due: read by the refund
// itself (refunds.ts) and by a transaction's move to completed (transaction-moves.ts: the excess goes back). Apart
// from refunds.ts, which moves transactions, so a move's follow-up imports no module that moves one.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

const minor = (value: string) => toMinor(value, USDC_SCALE);

/**
 * What the provider did with the payout request (its reference is the transaction id): `paid`, `unpaid` (a final
 * answer saying it did not pay, for good or for now, or none made), or `unknown` (the latest request has no final
 * answer: it may have paid, so nothing goes back until the provider's status check decides).
 */
export async function payoutState(q: Queryable, tx: TransactionRow): Promise<'paid' | 'unpaid' | 'unknown'> {
  const [row]: { status: string; answer: PayoutAnswer | null }[] = await q.query(
    `SELECT status, answer FROM provider_requests WHERE environment = $1 AND kind = 'payout' AND reference = $2`, [tx.environment, tx.id],
  );
  const answer = finalAnswerOf(row ? { environment: tx.environment, status: row.status, answer: row.answer } : null);
  return answer === 'paid' ? 'paid' : payoutUnpaid(answer) ? 'unpaid' : 'unknown';
}

/** What the off-ramp received and paid out, the two facts its refund is measured against. */
export async function fundsOf(q: Queryable, tx: TransactionRow, settlement: Pick<SettlementRow, 'received_amount'> | undefined): Promise<RefundFunds> {
  const received = tx.funding_type === 'treasury' ? minor(tx.total_required) : settlement ? minor(settlement.received_amount) : 0n;
  const paidOut = tx.status === 'completed' || (await payoutState(q, tx)) === 'paid' ? minor(tx.total_required) : 0n;
  return { received, paidOut };
}

/** USDC received, paid out, already returned (completed sends only), on its way back, and what is left to return. */
export async function heldFunds(q: Queryable, tx: TransactionRow, settlement: Pick<SettlementRow, 'received_amount'> | undefined) {
  const funds = await fundsOf(q, tx, settlement);
  return { ...funds, ...refundTally(funds, sendsOf(tx)) };
}

/** The off-ramp's returns of USDC so far. */
export function sendsOf(tx: TransactionRow): RefundSend[] {
  const refund = tx.refund;
  if (!refund || refund.currency) return [];
  if (refund.sends) return refund.sends.map((s) => ({ ...s, amount: BigInt(s.amount) }));
  // Written before each send was kept: one send of the whole amount, a failed one counted as returned (as it was then).
  return [{ reference: `${tx.id}-${minor(refund.amount)}`, amount: minor(refund.amount), status: tx.refund_status === 'pending' ? 'pending' : 'completed', hash: refund.transaction_hash, requested: false }];
}

/** The job that returns what an off-ramp holds at `dueAt`; the sweeper's own attempt is a fact of its own. */
export function refundJob(transactionId: string, dueAt: Date, delayMs = 0, bySweeper = false): JobRequest<'offramp.refund'> {
  return {
    name: 'offramp.refund',
    id: jobId('offramp.refund', transactionId, String(dueAt.getTime()), ...(bySweeper ? ['sweep'] : [])),
    data: { transactionId },
    delayMs,
  };
}

/**
 * An off-ramp starts waiting on the business for `underpaid` or `late_deposit`: its refund falls due
 * AUTO_REFUND_AFTER_SECONDS from now, with its job staged for then. The columns to set with the move are returned.
 */
export async function scheduleAutoRefund(unit: Unit, config: Config, tx: TransactionRow): Promise<{ refund_due_at: Date }> {
  const dueAt = new Date(Date.now() + config.autoRefundAfterSeconds * 1000);
  await unit.stage(refundJob(tx.id, dueAt, config.autoRefundAfterSeconds * 1000), scopeOf(tx));
  return { refund_due_at: dueAt };
}

/** What an off-ramp's settlement received, read in the unit already (null: the off-ramp has no settlement). */
export type Received = Pick<SettlementRow, 'received_amount'> | null;

/**
 * A completed off-ramp received more than total_required: the excess goes back now. `received`: the settlement as
 * the caller read it in this unit (a statement earlier than this one's read, just as current: a transfer recorded
 * meanwhile waits for the off-ramp's lock, and finds it completed); else it is read here.
 */
export async function scheduleExcessReturn(unit: Unit, tx: TransactionRow, received?: Received): Promise<void> {
  const settlement = received === undefined ? await settlementOf(unit.em, tx.id) : received ?? undefined;
  if (tx.direction !== 'offramp' || tx.funding_type === 'treasury' || !settlement) return;
  if ((await heldFunds(unit.em, tx, settlement)).due <= 0n) return;
  const [{ refund_due_at: dueAt }] = await updateReturning<{ refund_due_at: Date }>(unit.em,
    `UPDATE transactions SET refund_due_at = coalesce(refund_due_at, now()) WHERE id = $1 RETURNING refund_due_at`, [tx.id]);
  await unit.stage(refundJob(tx.id, dueAt), scopeOf(tx));
}

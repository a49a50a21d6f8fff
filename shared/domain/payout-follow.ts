import type { Unit } from '../db/unit-of-work.js';
import { INTENT_PAYOUT_MACHINE, type PayoutStatus } from './machines.js';
import { intentScope, loadPaymentIntent, paymentIntentView, type PaymentIntentRow } from './payment-intents.js';
import { followBatch } from './payout-batches.js';
import type { TransactionRow } from './transactions.js';
import { transition } from './transition.js';

// What follows a treasury-funded transaction's end (CONTRACT sections 8 and 16): its intent's payout_status, or its
// payout batch's completion. Apart from treasury-payouts.ts (which starts payouts and moves transactions), so the
// move that calls these (transaction-moves.ts) imports no module that moves a transaction itself.

/**
 * payout_status moves (history row) and the intent is announced again under its own status, with the new payout
 * fields: a webhook consumer learns how the payout went without polling.
 */
export async function movePayout(unit: Unit, intent: PaymentIntentRow, to: PayoutStatus, set: Record<string, unknown>, reason: string) {
  const moved = await transition<PayoutStatus, PaymentIntentRow>(unit, INTENT_PAYOUT_MACHINE, {
    scope: intentScope(intent), id: intent.id, to, expected: intent.payout_status!, set, reason, view: (row) => paymentIntentView(row),
  });
  if (moved) unit.event(intentScope(intent), `payment_intent.${moved.row.status}`, paymentIntentView(moved.row));
  return moved;
}

/**
 * A treasury-funded transaction ended (or needs attention): its intent's payout_status follows, or its payout batch
 * completes with its last item, in the same transaction.
 */
export async function followPayout(unit: Unit, tx: TransactionRow): Promise<void> {
  if (tx.funding_type !== 'treasury') return;
  if (tx.payout_batch_id) return followBatch(unit, tx);
  if (!tx.payment_intent_id) return;
  const intent = await loadPaymentIntent(unit.em, tx.payment_intent_id, true);
  if (!intent) return;
  if (tx.status === 'completed') await movePayout(unit, intent, 'completed', { payout_error: null }, 'payout_completed');
  else if (tx.status === 'failed') await movePayout(unit, intent, 'failed', { payout_error: tx.failure?.message ?? 'The payout failed.' }, tx.failure?.code ?? 'payout_failed');
  else if (tx.status === 'action_required') {
    await unit.em.query(`UPDATE payment_intents SET payout_error = $2, updated_at = now() WHERE id = $1`, [intent.id, tx.failure?.message ?? 'The payout needs attention.']);
  }
}

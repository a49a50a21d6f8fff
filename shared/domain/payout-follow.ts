import type { Unit } from '../db/unit-of-work.js';
import type { IntentFact } from '../kernel/intents.js';
import { decideIntentIn, intentScope, paymentIntentView } from './payment-intents.js';
import { followBatch } from './payout-batches.js';
import type { TransactionRow } from './transactions.js';

// What follows a treasury-funded transaction's end (CONTRACT sections 8 and 16): its intent's payout_status, or its
// payout batch's completion. Apart from treasury-payouts.ts (which starts payouts and moves transactions), so the
// move that calls these (transaction-moves.ts) imports no module that moves a transaction itself.

/**
 * payout_status moves as kernel/intents.ts decides (history row), and the intent is announced again under its own
 * status, with the new payout fields: a webhook consumer learns how the payout went without polling. Answers the
 * plan's outcome.
 */
export async function movePayout(unit: Unit, intentId: string, fact: Extract<IntentFact, { kind: `payout_${string}` }>): Promise<string> {
  const { outcome, row } = await decideIntentIn(unit, intentId, fact);
  if (row) unit.event(intentScope(row), `payment_intent.${row.status}`, paymentIntentView(row));
  return outcome;
}

/**
 * A treasury-funded transaction ended (or needs attention): its intent's payout_status follows, or its payout batch
 * completes with its last item, in the same transaction.
 */
export async function followPayout(unit: Unit, tx: TransactionRow): Promise<void> {
  if (tx.funding_type !== 'treasury') return;
  if (tx.payout_batch_id) return followBatch(unit, tx);
  if (!tx.payment_intent_id) return;
  if (tx.status === 'completed' || tx.status === 'failed') await movePayout(unit, tx.payment_intent_id, { kind: 'payout_ended', to: tx.status, failure: tx.failure });
  else if (tx.status === 'action_required') {
    await unit.em.query(`UPDATE payment_intents SET payout_error = $2, updated_at = now() WHERE id = $1`, [tx.payment_intent_id, tx.failure?.message ?? 'The payout needs attention.']);
  }
}

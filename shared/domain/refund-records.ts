import type { Unit } from '../db/unit-of-work.js';
import { apply } from '../kernel/apply.js';
import { plan } from '../kernel/plan.js';
import { refundMove } from '../kernel/refund-machine.js';
import { decideFailure } from '../kernel/transaction-steps.js';
import { loadTransaction, scopeOf, transactionView, type RefundState, type TransactionRow } from './transactions.js';
import { TRANSACTION_VIEWS, txSnapshot } from './transaction-moves.js';

// A transaction's refund written the one way its machine allows (REFUND_MACHINE, shared/kernel/refund-machine.ts): a
// compare-and-set from the status read, carried out by apply(), with the transaction announced again with it.

/** The refund changed on a transaction whose status did not: stored, and the status announced again with it. */
export async function recordRefund(unit: Unit, tx: TransactionRow, refund: RefundState | null, set: { refund_due_at?: Date | null } = {}): Promise<TransactionRow> {
  const move = refundMove(tx, refund, set);
  if (move) await apply(unit, plan(scopeOf(tx), `refund ${move.to}`, { moves: [move] }), new Map());
  else {
    await unit.em.query(`UPDATE transactions SET refund_due_at = CASE WHEN $2::boolean THEN $3::timestamptz ELSE refund_due_at END, updated_at = now() WHERE id = $1`, [
      tx.id, 'refund_due_at' in set, set.refund_due_at ?? null,
    ]);
  }
  const now = (await loadTransaction(unit.em, tx.id))!;
  unit.event(scopeOf(tx), `transaction.${now.status}`, transactionView(now));
  return now;
}

/**
 * The transaction `tx` (read and locked in `unit`) fails with its refund as decided (shared/kernel/transaction-steps.ts
 * decideFailure): one plan, the refund's compare-and-set first, so the `failed` event shows it, then the transaction's,
 * carried out by apply(). Answers the failed row, or null when its status may not fail (nothing written); a move that
 * finds a row elsewhere than read rolls the unit back (StalePlanError).
 */
export async function failWithRefund(unit: Unit, tx: TransactionRow, refund: RefundState | null, opts: { set?: Record<string, unknown>; reason?: string } = {}): Promise<TransactionRow | null> {
  const decided = decideFailure(txSnapshot(tx), { refund: refundMove(tx, refund), ...opts });
  const moved = await apply(unit, decided, TRANSACTION_VIEWS);
  return (moved.get(tx.id) as unknown as TransactionRow | undefined) ?? null;
}

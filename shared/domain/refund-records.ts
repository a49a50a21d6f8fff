import type { Unit } from '../db/unit-of-work.js';
import { apply, StalePlanError } from '../kernel/apply.js';
import { plan } from '../kernel/plan.js';
import { refundMove } from '../kernel/refund-machine.js';
import type { TransactionStatus } from './machines.js';
import { loadTransaction, scopeOf, transactionView, type RefundState, type TransactionRow } from './transactions.js';
import { moveTransaction } from './transaction-moves.js';

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
 * The transaction moves with its refund decided: the refund's compare-and-set first, so the move's event shows it,
 * then the move. A move that finds the transaction elsewhere after the refund was written rolls the unit back
 * (StalePlanError); with no refund written it answers null, as moveTransaction() does.
 */
export async function moveWithRefund(unit: Unit, tx: TransactionRow, to: TransactionStatus, refund: RefundState | null, opts: Parameters<typeof moveTransaction>[3] = {}) {
  const move = refundMove(tx, refund);
  if (move) await apply(unit, plan(scopeOf(tx), `refund ${move.to}`, { moves: [move] }), new Map());
  const moved = await moveTransaction(unit, tx, to, opts);
  if (!moved && move) throw new StalePlanError('transaction', tx.id, tx.status);
  return moved;
}

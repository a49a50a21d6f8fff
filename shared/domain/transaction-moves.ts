import type { Unit } from '../db/unit-of-work.js';
import { TRANSACTION_MACHINE, type TransactionStatus } from './machines.js';
import { followPayout } from './payout-follow.js';
import { scheduleExcessReturn } from './refund-funds.js';
import { scopeOf, transactionView, type TransactionRow } from './transactions.js';
import { transition } from './transition.js';

// A transaction's status moves here, with what follows in the same unit (a treasury payout's intent or batch, an
// off-ramp's excess going back). Its own module, above transactions.ts (the rows) and the follow-ups' modules, which
// import no module that moves a transaction: the import graph runs one way.

/**
 * The one way a transaction's status moves (with its event and history); null when it was not in a status that may.
 * A treasury-funded payout's intent follows it (payout_status) in the same transaction.
 */
export async function moveTransaction(unit: Unit, row: TransactionRow, to: TransactionStatus, opts: Omit<Parameters<typeof transition<TransactionStatus, TransactionRow>>[2], 'scope' | 'id' | 'to' | 'view' | 'expected'> = {}) {
  // Compare-and-set on the status the caller read: a job acting on a row it read before a newer decision is a no-op.
  const moved = await transition<TransactionStatus, TransactionRow>(unit, TRANSACTION_MACHINE, {
    ...opts,
    expected: row.status,
    scope: scopeOf(row),
    id: row.id,
    to,
    view: (updated) => transactionView(updated),
  });
  if (moved) await followMove(unit, moved.row);
  return moved;
}

/**
 * What follows a transaction's move in its unit, whoever moved it (moveTransaction, or apply() for a kernel flow): a
 * treasury-funded payout's intent or batch follows its end, and a paid-out off-ramp's excess goes back.
 */
export async function followMove(unit: Unit, row: TransactionRow): Promise<void> {
  if (row.funding_type === 'treasury' && ['completed', 'failed', 'action_required'].includes(row.status)) await followPayout(unit, row);
  // Paid out: whatever arrived beyond total_required goes back (CONTRACT section 14).
  if (row.status === 'completed' && row.direction === 'offramp') await scheduleExcessReturn(unit, row);
}

/**
 * A step's job failed for good (the chain or a dependency kept failing): the transaction waits for the business or an
 * operator in action_required, never silently in its step; retry resumes the step.
 */
export async function stepFailed(unit: Unit, tx: TransactionRow, step: TransactionStatus, reason: string): Promise<void> {
  await moveTransaction(unit, tx, 'action_required', {
    set: { stalled_at: step, failure: { code: 'step_failed', message: `The ${step} step could not complete: ${reason}` } },
    reason: 'step_failed',
  });
}

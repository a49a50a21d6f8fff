import type { Unit } from '../db/unit-of-work.js';
import type { Views } from '../kernel/apply.js';
import { decideIn, type Flow } from '../kernel/run.js';
import { decideStepFailed, type TxSnapshot } from '../kernel/transaction-steps.js';
import { TRANSACTION_MACHINE, type TransactionStatus } from './machines.js';
import { followPayout } from './payout-follow.js';
import { scheduleExcessReturn, type Received } from './refund-funds.js';
import { lockTransaction, scopeOf, transactionView, type TransactionRow } from './transactions.js';

// A transaction's status moves only through apply() (shared/kernel/apply.ts), with what follows in the same unit (a
// treasury payout's intent or batch, an off-ramp's excess going back), named here in TRANSACTION_VIEWS for every plan
// that moves a transaction. Its own module, above transactions.ts (the rows) and the follow-ups' modules, which import
// no module that moves a transaction: the import graph runs one way.

/**
 * What follows a transaction's move in its unit, whoever decided it: a treasury-funded payout's intent or batch follows
 * its end, and a paid-out off-ramp's excess goes back.
 */
async function followMove(unit: Unit, row: TransactionRow, known?: KnownSettlement): Promise<void> {
  if (row.funding_type === 'treasury' && ['completed', 'failed', 'action_required'].includes(row.status)) await followPayout(unit, row);
  // Paid out: whatever arrived beyond total_required goes back (CONTRACT section 14).
  if (row.status === 'completed' && row.direction === 'offramp') await scheduleExcessReturn(unit, row, known?.transactionId === row.id ? known.received : undefined);
}

/** The views apply() needs for a plan that moves a transaction: its event's data, and what follows the move. */
export const TRANSACTION_VIEWS: Views = new Map([[TRANSACTION_MACHINE, { view: (row: TransactionRow) => transactionView(row), follow: (unit: Unit, row: TransactionRow) => followMove(unit, row) }]]);

/** An off-ramp's settlement as its caller read it in the unit: what followed its move does not read it again. */
export interface KnownSettlement {
  transactionId: string;
  received: Received;
}

/** TRANSACTION_VIEWS, for a plan whose caller read the off-ramp's settlement in this unit already. */
export function transactionViewsKnowing(known: KnownSettlement | undefined): Views {
  if (!known) return TRANSACTION_VIEWS;
  return new Map([[TRANSACTION_MACHINE, { view: (row: TransactionRow) => transactionView(row), follow: (unit: Unit, row: TransactionRow) => followMove(unit, row, known) }]]);
}

/** What the decisions of shared/kernel/transaction-steps.ts read, from the row. */
export function txSnapshot(row: TransactionRow): TxSnapshot {
  return {
    id: row.id, scope: scopeOf(row), status: row.status, direction: row.direction, funding_type: row.funding_type, stalled_at: row.stalled_at,
    failure: row.failure, retry_count: row.retry_count,
  };
}

/** A step's job failing for good, decided on the transaction read and locked in the unit. */
const STEP_FAILED_FLOW: Flow<TxSnapshot, Parameters<typeof decideStepFailed>[1]> = {
  load: async (unit, id) => {
    const row = await lockTransaction(unit, id);
    return row && txSnapshot(row);
  },
  decide: decideStepFailed,
  views: TRANSACTION_VIEWS,
};

/**
 * A step's job failed for good (the chain or a dependency kept failing): the transaction waits for the business or an
 * operator in action_required, never silently in its step; retry resumes the step. `tx`: the row as the job read it
 * (a row that moved on since changes nothing).
 */
export async function stepFailed(unit: Unit, tx: TransactionRow, step: TransactionStatus, reason: string): Promise<string> {
  return decideIn(unit, STEP_FAILED_FLOW, tx.id, { seen: tx.status, step, reason });
}

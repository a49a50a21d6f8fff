import type { Unit } from '../../shared/db/unit-of-work.js';
import { TRANSACTION_MACHINE, type TransactionStatus } from '../../shared/domain/machines.js';
import { scopeOf, transactionView, type TransactionRow } from '../../shared/domain/transactions.js';
import { transition } from '../../shared/domain/transition.js';

/**
 * A transaction's compare-and-set from the status `row` shows, as apply() makes each move (transition(): the
 * machine's guards, history row and event), with no decision in front of it: for tests of the machine and of stale
 * moves, and to set a row up mid-lifecycle. Null when it did not move.
 */
export function moveTx(unit: Unit, row: TransactionRow, to: TransactionStatus, opts: { set?: Record<string, unknown>; reason?: string } = {}) {
  return transition<TransactionStatus, TransactionRow>(unit, TRANSACTION_MACHINE, { ...opts, expected: row.status, scope: scopeOf(row), id: row.id, to, view: (updated) => transactionView(updated) });
}

// An off-ramp's settlement decided through the kernel (shared/kernel/settlements.ts): the loader reads and locks the
// settlement and then its transaction (the watcher's order), the decision answers a plan, apply() carries it out.
import type { Config } from '../config.js';
import type { Unit } from '../db/unit-of-work.js';
import { decideAndApply, decideIn, type Flow } from '../kernel/run.js';
import { decideSettlement, type AutoRefund, type SettlementFact, type SettlementSnapshot } from '../kernel/settlements.js';
import { SETTLEMENT_MACHINE } from './machines.js';
import { toMinor, USDC_SCALE } from './money.js';
import { refundJob } from './refund-funds.js';
import { settlementOf, settlementView, type SettlementRow } from './settlements.js';
import { lockTransaction, type TransactionRow } from './transactions.js';
import { TRANSACTION_VIEWS } from './transaction-moves.js';

/** Keyed by the off-ramp's transaction id: every job and caller names the settlement by its transaction. */
export const SETTLEMENT_FLOW: Flow<SettlementSnapshot, SettlementFact> = {
  load: async (unit, transactionId) => {
    const row = await settlementOf(unit.em, transactionId, true);
    const tx = row && (await lockTransaction(unit, transactionId));
    return row && tx ? settlementSnapshot(row, tx) : undefined;
  },
  decide: decideSettlement,
  views: new Map([...TRANSACTION_VIEWS, [SETTLEMENT_MACHINE, (row: SettlementRow) => settlementView(row)]]),
};

/** Rows a unit holds locked, as they are now: the settlement and its transaction. */
export interface HeldSettlement {
  settlement: SettlementRow;
  tx: TransactionRow;
}

/** What the settlement's decision reads, from its rows as they are now. */
function settlementSnapshot(row: SettlementRow, tx: TransactionRow): SettlementSnapshot {
  const view = settlementView(row);
  return {
    id: row.id,
    scope: { businessId: row.business_id, environment: row.environment },
    status: row.status,
    received: toMinor(view.received_amount as string, USDC_SCALE),
    totalRequired: toMinor(view.total_required as string, USDC_SCALE),
    receivedShown: view.received_amount as string,
    totalRequiredShown: view.total_required as string,
    requiredConfirmations: row.required_confirmations,
    expiresAt: row.expires_at,
    now: new Date(),
    tx: { id: tx.id, status: tx.status, retryCount: tx.retry_count },
  };
}

/** The automatic refund an off-ramp left to the business schedules: AUTO_REFUND_AFTER_SECONDS from now. */
export function autoRefundOf(config: Config, transactionId: string): AutoRefund {
  const refund_due_at = new Date(Date.now() + config.autoRefundAfterSeconds * 1000);
  return { refund_due_at, job: refundJob(transactionId, refund_due_at, config.autoRefundAfterSeconds * 1000) };
}

/**
 * Decides `fact` about the settlement of off-ramp `transactionId` in `unit`; answers the outcome and the moved rows.
 * `held`: both rows, locked by the caller in this unit and as they are now (else the flow reads and locks them).
 */
export function decideSettlementIn(unit: Unit, transactionId: string, fact: SettlementFact, held?: HeldSettlement) {
  return decideAndApply(unit, SETTLEMENT_FLOW, transactionId, fact, held && settlementSnapshot(held.settlement, held.tx));
}

/** A failed or refunded transaction's deposit address is closed: a transfer that still arrives is a late deposit. */
export async function closeSettlement(unit: Unit, transactionId: string, reason: string): Promise<void> {
  await decideIn(unit, SETTLEMENT_FLOW, transactionId, { kind: 'close', reason });
}

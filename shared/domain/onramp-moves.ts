import type { Unit } from '../db/unit-of-work.js';
import { decideOnramp, type OnrampFact, type OnrampSnapshot } from '../kernel/onramp-steps.js';
import { fiatRefundOwed } from '../kernel/refund-machine.js';
import { decideAndApply, type Flow } from '../kernel/run.js';
import type { TransactionStatus } from './machines.js';
import { toMinor, USDC_SCALE } from './money.js';
import { lockTransaction, scopeOf, type TransactionRow } from './transactions.js';
import { TRANSACTION_VIEWS } from './transaction-moves.js';
import { walletUsdcAccount } from './wallet-balances.js';

// An on-ramp's fiat steps carried out as shared/kernel/onramp-steps.ts decides: the row read and locked, the
// decision, apply(), which runs what follows a transaction's move (TRANSACTION_VIEWS) in the same unit.

export const ONRAMP_FLOW: Flow<OnrampSnapshot, OnrampFact> = {
  load: async (unit, id) => {
    const row = await lockTransaction(unit, id);
    if (!row) return undefined;
    return {
      id: row.id, scope: scopeOf(row), status: row.status, stalledAt: row.stalled_at as TransactionStatus | null, providerReference: row.provider_reference,
      failureCode: row.failure?.code ?? null, refunded: row.refund !== null, refundStatus: row.refund_status, refundOwed: fiatRefundOwed(row),
      delivery: { amount: toMinor(row.destination_amount, USDC_SCALE), walletId: row.wallet_id, account: walletUsdcAccount(row.wallet_id!, row.chain) },
    };
  },
  decide: decideOnramp,
  views: TRANSACTION_VIEWS,
};

/**
 * Decides `fact` about the on-ramp `id` in `unit` and carries the plan out; answers the plan's outcome ('gone': none)
 * and the transaction as moved (undefined when nothing moved).
 */
export async function decideOnrampAndApply(unit: Unit, id: string, fact: OnrampFact): Promise<{ outcome: string; row?: TransactionRow }> {
  const { outcome, moved } = await decideAndApply(unit, ONRAMP_FLOW, id, fact);
  // The transaction's own move is its plan's last: the row apply() answers for its id.
  return { outcome, row: moved.get(id) as unknown as TransactionRow | undefined };
}

/** decideOnrampAndApply(), answering the plan's outcome. */
export async function decideOnrampIn(unit: Unit, id: string, fact: OnrampFact): Promise<string> {
  return (await decideOnrampAndApply(unit, id, fact)).outcome;
}

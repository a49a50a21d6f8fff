import type { ChainAdapter } from '../chain/adapter.js';
import type { Unit } from '../db/unit-of-work.js';
import { apply } from '../kernel/apply.js';
import { decideOfframpPayout, type PayoutFact, type PayoutPlan, type PayoutSnapshot } from '../kernel/offramp-payouts.js';
import { refundMove } from '../kernel/refund-machine.js';
import type { Flow } from '../kernel/run.js';
import { payoutEntry, refundOfframp } from './offramps.js';
import { lockTransaction, scopeOf, type TransactionRow } from './transactions.js';
import { TRANSACTION_VIEWS, transactionViewsKnowing, type KnownSettlement } from './transaction-moves.js';

// An off-ramp's payout carried out as shared/kernel/offramp-payouts.ts decides: the row read and locked, the decision,
// apply(), which runs what follows a transaction's move (TRANSACTION_VIEWS) in the same unit.

/** The snapshot the decision reads, from the locked row (kept beside it for the refund's writer). */
type Loaded = PayoutSnapshot & { row: TransactionRow };

export const OFFRAMP_PAYOUT_FLOW: Flow<Loaded, PayoutFact> = {
  load: async (unit, id) => {
    const row = await lockTransaction(unit, id);
    return row && loadedOf(row);
  },
  decide: decideOfframpPayout,
  views: TRANSACTION_VIEWS,
};

/**
 * Decides `fact` about the off-ramp `id` in `unit` and carries the plan out; answers the plan's outcome ('gone': no such
 * transaction). A refusal's refund is decided by its writer (refundOfframp) after the decision and before apply:
 * it may stage a chain send, which no loader may do before knowing the payout failed, and the refund is written
 * before the move so the `failed` event shows it (as failWithRefund does). `chain`: null only for a fact that never
 * fails the payout (`unavailable`, `stalled`).
 */
export async function decidePayoutIn(unit: Unit, chain: ChainAdapter | null, id: string, fact: PayoutFact): Promise<string> {
  return (await decideAndApplyPayout(unit, chain, id, fact)).outcome;
}

/**
 * decidePayoutIn(), answering the row as the plan left it (locked in this unit) too. `held`: the row, locked by the
 * caller in this unit as it is now, not read again.
 */
export async function decideAndApplyPayout(
  unit: Unit, chain: ChainAdapter | null, id: string, fact: PayoutFact, held?: TransactionRow, known?: KnownSettlement,
): Promise<{ outcome: string; row?: TransactionRow }> {
  const loaded = held ? loadedOf(held) : await OFFRAMP_PAYOUT_FLOW.load(unit, id);
  if (!loaded) return { outcome: 'gone' };
  const { row } = loaded;
  const decided: PayoutPlan = decideOfframpPayout(loaded, fact);
  if (decided.refund && !chain) throw new Error(`a payout refusal of ${id} decided without a chain to refund on`);
  const refund = decided.refund ? refundMove(row, await refundOfframp(unit, chain!, row)) : null;
  const moved = await apply(unit, refund ? { ...decided, moves: [refund, ...decided.moves] } : decided, transactionViewsKnowing(known));
  return { outcome: decided.outcome, row: (moved.get(id) as unknown as TransactionRow | undefined) ?? row };
}

/**
 * The provider took the request and answered at once (the sandbox, a forced outcome, a live answer in hand): `sent`,
 * then `answer`, each decided on the row as the one before leaves it, carried out as one plan (the row's path funded ->
 * processing -> completed, one statement). A refusal's refund is written against the row as it is, so a refused payout
 * goes step by step, as does a row not funded. `held`: as decideAndApplyPayout's.
 */
export async function decideAndApplyAnswered(
  unit: Unit, chain: ChainAdapter, id: string, sent: PayoutFact, answer: PayoutFact, held?: TransactionRow, known?: KnownSettlement,
): Promise<string> {
  const loaded = held ? loadedOf(held) : await OFFRAMP_PAYOUT_FLOW.load(unit, id);
  if (!loaded) return 'gone';
  const taken = decideOfframpPayout(loaded, sent);
  const [move] = taken.moves;
  if (taken.outcome === 'processing' && move && !taken.refund) {
    const answered = decideOfframpPayout(loadedOf({ ...loaded.row, status: move.to, ...move.set } as TransactionRow), answer);
    if (!answered.refund) {
      const both = { ...answered, moves: [...taken.moves, ...answered.moves], entries: [...taken.entries, ...answered.entries], jobs: [...taken.jobs, ...answered.jobs] };
      await apply(unit, both, transactionViewsKnowing(known));
      return answered.outcome;
    }
  }
  const first = await decideAndApplyPayout(unit, chain, id, sent, loaded.row, known);
  return first.outcome === 'processing' ? (await decideAndApplyPayout(unit, chain, id, answer, first.row, known)).outcome : first.outcome;
}

function loadedOf(row: TransactionRow): Loaded {
  return { id: row.id, scope: scopeOf(row), status: row.status, payoutEntry: payoutEntry(row), row };
}

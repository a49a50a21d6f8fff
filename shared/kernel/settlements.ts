// An off-ramp's settlement (CONTRACT sections 14 and 18) as a pure decision: what a transfer counted at the deposit
// address (short, exact, over, seen before, late), a confirmation count (deep, not yet, the chain unreadable, a reorg),
// the expiry tick and the settlement's closing when its transaction ends do to the settlement (SETTLEMENT_MACHINE)
// and its off-ramp (TRANSACTION_MACHINE). Nothing here reads a database, a queue or a chain: the loader
// (settlement-flow.ts) reads and locks both rows; the caller reads the chain and records what it showed beforehand.
import type { EventScope } from '../domain/events.js';
import type { EntryInput } from '../domain/ledger.js';
import { SETTLEMENT_MACHINE, sourcesOf, TRANSACTION_MACHINE, type SettlementStatus, type TransactionStatus } from '../domain/machines.js';
import type { JobRequest } from '../queues/producer.js';
import { nothing, NOW, plan, type Move, type Plan } from './plan.js';

export interface SettlementSnapshot {
  id: string;
  scope: EventScope;
  status: SettlementStatus;
  /** USDC minor units: what counted transfers brought, and what the off-ramp asks for. */
  received: bigint;
  totalRequired: bigint;
  /** As the API shows them (a failure's details). */
  receivedShown: string;
  totalRequiredShown: string;
  requiredConfirmations: number;
  expiresAt: Date;
  /** The clock the decision compares `expiresAt` with, read by the loader. */
  now: Date;
  tx: { id: string; status: TransactionStatus; retryCount: number };
}

/** An automatic refund scheduled AUTO_REFUND_AFTER_SECONDS from now: its deadline and its job. */
export interface AutoRefund {
  refund_due_at: Date;
  job: JobRequest;
}

export type SettlementFact =
  /**
   * A transfer to the deposit address, already recorded (`isNew`: counted now, the snapshot's `received` holds it;
   * else a log seen before). `deposit`: its ledger entry (live, new); `next` counts its confirmations later unless
   * `countNow` (the chain at hand: the caller counts in the same unit); `autoRefund` for a late deposit.
   */
  | {
    kind: 'transfer_counted'; isNew: boolean; deposit: EntryInput | null; countNow: boolean; next: JobRequest; autoRefund: AutoRefund;
    /** What the chain at hand already shows (countNow): recorded with the move to confirming. */
    confirmations?: number;
  }
  /** The expiry job, at (or after) expires_at; `autoRefund` is the refund an underpaid off-ramp schedules. */
  | { kind: 'expiry_tick'; autoRefund: AutoRefund }
  /** The transaction failed or is being refunded: its deposit address is closed (a later transfer is a late deposit). */
  | { kind: 'close'; reason: string }
  /**
   * Confirmations counted from the chain (every counted transfer still canonical): `deep` at the required number,
   * else `next` counts again; `sweep` (live) takes the deposit address's USDC on once confirmed.
   */
  | { kind: 'depth_counted'; confirmations: number; deep: boolean; next: JobRequest; sweep: JobRequest | null }
  /** The chain could not be read: nothing decided, `next` counts again. */
  | { kind: 'depth_unknown'; reason: string; next: JobRequest }
  /**
   * A reorg took counted transfers: already uncounted (the snapshot's `received` is what remains), `reversals` their
   * deposit entries reversed; `next` counts again what remains, `submit` (a managed wallet) sends its transfer anew.
   */
  | { kind: 'reorged'; reversals: EntryInput[]; next: JobRequest; submit: JobRequest | null };

const settlementMove = (s: SettlementSnapshot, to: SettlementStatus, set: Record<string, unknown> = {}, reason?: string): Move =>
  ({ machine: SETTLEMENT_MACHINE, id: s.id, from: s.status, to, set, reason });

/** The off-ramp's move, or none where its machine has no such move (a compare-and-set that would find nothing). */
function transactionMove(s: SettlementSnapshot, to: TransactionStatus, set: Record<string, unknown> = {}, reason?: string): Move[] {
  if (!sourcesOf(TRANSACTION_MACHINE, to).includes(s.tx.status)) return [];
  return [{ machine: TRANSACTION_MACHINE, id: s.tx.id, from: s.tx.status, to, set, reason }];
}

/** Open: a transfer still completes the payment; closed (expired, underpaid, confirmed), one is a late deposit. */
export const OPEN_SETTLEMENT: readonly SettlementStatus[] = ['awaiting_transfer', 'confirming', 'underpaid'];

/**
 * At expires_at: nothing received fails the transaction; part of the amount leaves it to the business (underpaid),
 * refunded on its own after AUTO_REFUND_AFTER_SECONDS. A managed wallet's send in flight (`signing`, `submitting`) is
 * never expired: the send decides. A transaction already ended only closes its address.
 */
function expire(s: SettlementSnapshot, autoRefund: AutoRefund): Plan {
  if (s.status !== 'awaiting_transfer' || s.expiresAt > s.now) return nothing(s.scope, `unchanged (${s.status})`);
  if (s.tx.status === 'signing' || s.tx.status === 'submitting') return nothing(s.scope, `send in flight (${s.tx.status})`);
  if (s.tx.status === 'failed' || s.tx.status === 'completed') {
    return plan(s.scope, 'closed', { moves: [settlementMove(s, 'expired', {}, `transaction_${s.tx.status}`)] });
  }
  if (s.received === 0n) {
    const failure = { code: 'settlement_expired', message: 'No transfer arrived before the settlement expired.' };
    return plan(s.scope, 'expired', { moves: [settlementMove(s, 'expired'), ...transactionMove(s, 'failed', { failure }, 'settlement_expired')] });
  }
  // Already waiting on the business: it keeps its reason and its refund deadline.
  if (s.tx.status === 'action_required') return plan(s.scope, 'underpaid', { moves: [settlementMove(s, 'underpaid')] });
  const failure = {
    code: 'underpaid',
    message: 'Less than total_required arrived before the settlement expired.',
    details: { received_amount: s.receivedShown, total_required: s.totalRequiredShown },
  };
  const moved = transactionMove(s, 'action_required', { stalled_at: s.tx.status, refund_due_at: autoRefund.refund_due_at, failure }, 'underpaid');
  return plan(s.scope, 'underpaid', { moves: [settlementMove(s, 'underpaid'), ...moved], jobs: moved.length ? [autoRefund.job] : [] });
}

/** Counted confirmations: deep enough, confirmed and funded (the caller starts the payout); else counted again. */
function counted(s: SettlementSnapshot, fact: Extract<SettlementFact, { kind: `depth_${string}` | 'reorged' }>): Plan {
  if (s.tx.status !== 'awaiting_funds') return nothing(s.scope, `not awaiting funds (${s.tx.status})`);
  if (s.status !== 'confirming') return nothing(s.scope, `settlement ${s.status}`);
  if (fact.kind === 'reorged') return reorged(s, fact);
  if (fact.kind === 'depth_unknown') return plan(s.scope, `unknown: ${fact.reason}`, { jobs: [fact.next] });
  if (!fact.deep) return plan(s.scope, `${fact.confirmations}/${s.requiredConfirmations}`, { jobs: [fact.next] });
  return plan(s.scope, 'funded', {
    moves: [settlementMove(s, 'confirmed', { confirmed_at: NOW, confirmations: fact.confirmations }), ...transactionMove(s, 'funded')],
    // Live: the deposit address's USDC goes on to the treasury hot wallet, beside the payout (never before it).
    jobs: fact.sweep ? [fact.sweep] : [],
  });
}

/**
 * Counted transfers a reorg removed: their entries reversed; still paid in full, counted again; else the settlement
 * awaits its transfer again and the off-ramp goes back to created, a step taken again (its jobs new ids: retry_count).
 */
function reorged(s: SettlementSnapshot, fact: Extract<SettlementFact, { kind: 'reorged' }>): Plan {
  const entries = fact.reversals.map((entry) => ({ entry }));
  if (s.received >= s.totalRequired) return plan(s.scope, 'reorg: still paid in full', { entries, jobs: [fact.next] });
  const back = transactionMove(s, 'created', { retry_count: s.tx.retryCount + 1 }, 'reorg');
  return plan(s.scope, 'reorg: awaiting transfer again', {
    moves: [settlementMove(s, 'awaiting_transfer', { confirmations: 0 }, 'reorg'), ...back],
    entries,
    jobs: back.length && fact.submit ? [fact.submit] : [],
  });
}

/** What decideSettlement answers for a late deposit the caller completes in the same unit (no status of its own moves). */
export const LATE_EXCESS = 'late deposit: excess returned';
export const LATE_REASON = 'late deposit: the reason it waits';
/** Paid in full with the chain at hand: the caller counts the confirmations at once, in the same unit. */
export const COUNT_NOW = 'awaiting funds: counted now';

const CLOSED: readonly SettlementStatus[] = ['expired', 'underpaid'];

/**
 * A transfer to a closed settlement (expired, underpaid, or its transaction ended): the off-ramp goes to
 * action_required `late_deposit` with what has arrived, refunded on its own after AUTO_REFUND_AFTER_SECONDS unless the
 * business asks first. On a completed one it is an excess, returned at once, and on one already waiting on the
 * business only its reason changes (no move: the caller rewrites it, LATE_EXCESS and LATE_REASON).
 */
function late(s: SettlementSnapshot, fact: Extract<SettlementFact, { kind: 'transfer_counted' }>, entries: { entry: EntryInput }[]): Plan {
  if (s.tx.status === 'completed') return plan(s.scope, LATE_EXCESS, { entries });
  if (s.tx.status === 'action_required') return plan(s.scope, LATE_REASON, { entries });
  const failure = { code: 'late_deposit', message: 'A transfer arrived after the settlement closed.', details: { received_amount: s.receivedShown, total_required: s.totalRequiredShown } };
  const moved = transactionMove(s, 'action_required', { stalled_at: 'created', failure, refund_due_at: fact.autoRefund.refund_due_at }, 'late_deposit');
  return plan(s.scope, 'late deposit', { moves: moved, entries, jobs: moved.length ? [fact.autoRefund.job] : [] });
}

/**
 * A transfer counted once: paid in full, the settlement starts confirming and the off-ramp awaits its funds (a
 * managed wallet's still signing: its submit job takes it on); less stays as it is. Seen before, only a managed
 * wallet's own submission still has a step to take.
 */
function transferCounted(s: SettlementSnapshot, fact: Extract<SettlementFact, { kind: 'transfer_counted' }>): Plan {
  const entries = fact.deposit ? [{ entry: fact.deposit }] : [];
  if (!fact.isNew) {
    // On a settlement already closed, our own submission is a late deposit like any other, never left in submitting.
    if (s.tx.status === 'submitting' && CLOSED.includes(s.status)) return late(s, fact, entries);
    if (s.tx.status !== 'submitting' || s.status !== 'confirming') return plan(s.scope, 'seen before', { entries });
  } else if (CLOSED.includes(s.status) || s.tx.status === 'failed' || s.tx.status === 'completed') return late(s, fact, entries);
  if (s.received < s.totalRequired || (s.status !== 'awaiting_transfer' && s.status !== 'confirming')) return plan(s.scope, 'counted', { entries });
  const shown = fact.confirmations ? { confirmations: Math.min(fact.confirmations, s.requiredConfirmations) } : {};
  const confirming = s.status === 'awaiting_transfer' ? [settlementMove(s, 'confirming', shown)] : [];
  if (s.tx.status === 'signing') return plan(s.scope, 'confirming', { moves: confirming, entries });
  const funds = transactionMove(s, 'awaiting_funds', s.tx.status === 'action_required' ? { failure: null, stalled_at: null } : {});
  const jobs = funds.length && !fact.countNow ? [fact.next] : [];
  return plan(s.scope, funds.length && fact.countNow ? COUNT_NOW : 'confirming', { moves: [...confirming, ...funds], entries, jobs });
}

export function decideSettlement(s: SettlementSnapshot, fact: SettlementFact): Plan {
  switch (fact.kind) {
    case 'transfer_counted':
      return transferCounted(s, fact);
    case 'expiry_tick':
      return expire(s, fact.autoRefund);
    case 'close':
      if (!OPEN_SETTLEMENT.includes(s.status)) return nothing(s.scope, `unchanged (${s.status})`);
      return plan(s.scope, 'expired', { moves: [settlementMove(s, 'expired', {}, fact.reason)] });
    default:
      return counted(s, fact);
  }
}

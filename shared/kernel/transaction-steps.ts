// A transaction's moves that no money flow of its own decides: the business's retry (CONTRACT §14), a step's job
// failing for good, the sandbox's simulate control, and a failure carried with its refund. Pure: no database, queue or
// chain; apply() carries each plan out (shared/domain/transaction-moves.ts, transaction-actions.ts, refund-records.ts)
// and runs what follows a transaction's move (followMove) after it.
import type { EventScope } from '../domain/events.js';
import { sourcesOf, TRANSACTION_MACHINE, type TransactionStatus } from '../domain/machines.js';
import type { JobRequest } from '../queues/producer.js';
import { nothing, plan, type Move, type Plan } from './plan.js';

/** Failure codes whose off-ramp is refunded on its own (never retried: the quote's price is gone). */
export const AUTO_REFUND_CODES: readonly string[] = ['underpaid', 'late_deposit'];

/** The transaction as its locked row shows it (the columns these decisions read, named as the row names them). */
export interface TxSnapshot {
  id: string;
  scope: EventScope;
  status: TransactionStatus;
  direction: string;
  funding_type: string | null;
  stalled_at: TransactionStatus | null;
  failure: { code: string } | null;
  retry_count: number;
}

export interface Failure {
  code: string;
  message: string;
  details?: unknown;
}

/** The transaction's compare-and-set from the status read. */
export function txMove(s: Pick<TxSnapshot, 'id' | 'status'>, to: TransactionStatus, set?: Record<string, unknown>, reason?: string): Move {
  return { machine: TRANSACTION_MACHINE, id: s.id, from: s.status, to, ...(set ? { set } : {}), ...(reason ? { reason } : {}) };
}

/**
 * Whether the machine lets the status read move to `to` for these decisions: a failed transaction is left only by money
 * that arrived after it failed (a late deposit, a late M-Pesa success), which none of them is.
 */
export function mayMove(from: TransactionStatus, to: TransactionStatus): boolean {
  return from !== 'failed' && sourcesOf(TRANSACTION_MACHINE, to).includes(from);
}

/**
 * Whether the step a transaction stalled in can run again (CONTRACT §14). Managed-wallet and treasury-funded: every
 * step (the platform holds the funds). External wallets: the confirmation count (the USDC is with us) and the payout
 * (the provider adapter asks whether the earlier request paid before it sends again). On-ramps: the USDC delivery
 * (the hot wallet's send is once-only by its reference), the wait for the prompt's answer (the provider is asked) and
 * the collection request itself: the adapter claims the request by our reference first and prompts again only when no
 * earlier prompt left (one that left unanswered is waited for and asked about), so the payer is never charged twice.
 */
export function canRunAgain(tx: Pick<TxSnapshot, 'direction' | 'funding_type' | 'stalled_at'>): boolean {
  if (!tx.stalled_at) return false;
  // awaiting_funds: the provider is asked what became of the prompt (STK Query); nothing is sent to the payer again.
  if (tx.direction === 'onramp') return ['created', 'awaiting_funds', 'funded', 'processing'].includes(tx.stalled_at);
  if (tx.funding_type === 'managed_wallet' || tx.funding_type === 'treasury') return true;
  return tx.stalled_at === 'awaiting_funds' || tx.stalled_at === 'funded';
}

/** A decision the business asked for and is refused (answered 409 by its caller); otherwise the plan is carried out. */
export interface RefusablePlan extends Plan {
  refused?: 'auto_refund' | 'not_retryable' | 'already_action_required';
}

/**
 * POST /transactions/{id}/retry: back from action_required to the step it stalled in, with a new retry count (so its
 * job is a new one: `resume`, the job that runs that step under the new count, staged with the move). Refused for an
 * off-ramp waiting on its automatic refund (its quote's price is gone), and for any other status or a step that cannot
 * run again.
 */
export function decideRetry(s: TxSnapshot, fact: { resume: JobRequest | null }): RefusablePlan {
  if (s.status === 'action_required' && AUTO_REFUND_CODES.includes(s.failure?.code ?? '')) return { ...nothing(s.scope, 'refunded, never retried'), refused: 'auto_refund' };
  if (s.status !== 'action_required' || !canRunAgain(s) || !mayMove(s.status, s.stalled_at!)) return { ...nothing(s.scope, 'not retryable'), refused: 'not_retryable' };
  const step = s.stalled_at!;
  const move = txMove(s, step, { retry_count: s.retry_count + 1, failure: null, stalled_at: null }, 'retry');
  return plan(s.scope, `retried (${step})`, { moves: [move], jobs: fact.resume ? [fact.resume] : [] });
}

/**
 * A step's job failed for good (the chain or a dependency kept failing): the transaction waits for the business or an
 * operator in action_required, never silently in its step; a retry resumes `step`. `seen`: the status the job read
 * when it gave up; a row that moved on since plans nothing.
 */
export function decideStepFailed(s: TxSnapshot, fact: { seen: TransactionStatus; step: TransactionStatus; reason: string }): Plan {
  if (s.status !== fact.seen) return nothing(s.scope, `moved on (${s.status})`);
  if (!mayMove(s.status, 'action_required')) return nothing(s.scope, `unchanged (${s.status})`);
  const failure = { code: 'step_failed', message: `The ${fact.step} step could not complete: ${fact.reason}` };
  return plan(s.scope, 'action_required', { moves: [txMove(s, 'action_required', { stalled_at: fact.step, failure }, 'step_failed')] });
}

/** The sandbox simulate control's `action_required`: now, stalled in the status it was in (refused when already there). */
export function decideSimulatedStall(s: TxSnapshot, failure: Failure): RefusablePlan {
  if (s.status === 'action_required') return { ...nothing(s.scope, 'already action_required'), refused: 'already_action_required' };
  if (!mayMove(s.status, 'action_required')) return nothing(s.scope, `unchanged (${s.status})`);
  return plan(s.scope, 'action_required', { moves: [txMove(s, 'action_required', { failure, stalled_at: s.status }, failure.code)] });
}

/**
 * The transaction fails with its refund as decided by the refund's writer (`refund`: its move, from refundMove, or
 * null): the refund's compare-and-set first, so the transaction's `failed` event shows it, then the transaction's.
 * A status that may not fail plans nothing (neither is written).
 */
export function decideFailure(s: Pick<TxSnapshot, 'id' | 'scope' | 'status'>, fact: { refund: Move | null; set?: Record<string, unknown>; reason?: string }): Plan {
  if (!mayMove(s.status, 'failed')) return nothing(s.scope, `unchanged (${s.status})`);
  return plan(s.scope, 'failed', { moves: [...(fact.refund ? [fact.refund] : []), txMove(s, 'failed', fact.set ?? {}, fact.reason)] });
}

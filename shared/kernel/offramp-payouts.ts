// An off-ramp's payout as a pure decision: what the provider's answers do to the transaction (funded -> processing ->
// completed, failed with its refund, or action_required). Which answer is final (a Result is only a claim, a status
// answer about the latest request decides) is payout-answers.ts's rule; this decides only the transaction's moves.
// Nothing here reads a database, a queue or a provider: the loader (shared/domain/payout-moves.ts) reads and locks.
import type { EventScope } from '../domain/events.js';
import type { EntryInput } from '../domain/ledger.js';
import { TRANSACTION_MACHINE, type TransactionStatus } from '../domain/machines.js';
import type { ProviderOutcome } from '../providers/provider.js';
import { nothing, NOW, plan, type Move, type Plan } from './plan.js';

export interface PayoutSnapshot {
  id: string;
  scope: EventScope;
  status: TransactionStatus;
  /** The payout's ledger entry (settlement clearing to provider clearing and fees), priced by the loader from the row. */
  payoutEntry: EntryInput;
}

export interface PayoutFailure {
  code: string;
  message: string;
}

export type PayoutFact =
  /** The payout request's own answer (payout.send): accepted (pending), paid, or refused; temporary changes nothing. */
  | { kind: 'sent'; outcome: ProviderOutcome }
  /** The provider paid (the send's own answer, or the status answer about the latest request). */
  | { kind: 'paid'; providerReference: string | null; receipt: string | null }
  /** The provider refused for good: failed, and the refund goes out. */
  | { kind: 'refused'; providerReference: string | null; failure: PayoutFailure }
  /**
   * Stuck in processing: not paid for now past PROVIDER_MAX_ATTEMPTS, no result after every status check, or a send
   * again that never got through. The business (or an operator) acts; retry resumes at funded.
   */
  | { kind: 'stalled'; failure: PayoutFailure }
  /** The payout job's last attempt failed before the provider took the request. */
  | { kind: 'unavailable'; reason: string };

/**
 * A plan of this flow. `refund`: the failed move carries the off-ramp's refund, which its writer (refundOfframp, which
 * may stage a chain send) decides in the same unit just before apply, so the `failed` event shows it.
 */
export interface PayoutPlan extends Plan {
  refund?: true;
}

function move(s: PayoutSnapshot, to: TransactionStatus, set: Record<string, unknown>, reason?: string): Move {
  return { machine: TRANSACTION_MACHINE, id: s.id, from: s.status, to, set, ...(reason ? { reason } : {}) };
}

const stalledAtFunded = (failure: PayoutFailure) => ({ stalled_at: 'funded', failure });

/** What a payout fact does to the off-ramp: a fact its status no longer waits for (late, repeated) plans nothing. */
export function decideOfframpPayout(s: PayoutSnapshot, fact: PayoutFact): PayoutPlan {
  switch (fact.kind) {
    case 'sent': {
      if (s.status !== 'funded') return nothing(s.scope, `not funded (${s.status})`);
      if (fact.outcome.status === 'temporary_failure') return nothing(s.scope, 'temporary');
      // The provider took the request; what it said of the money follows as its own fact (paid, refused) from processing.
      return plan(s.scope, 'processing', { moves: [move(s, 'processing', { provider_reference: fact.outcome.provider_reference })] });
    }
    case 'paid': {
      if (s.status !== 'processing') return nothing(s.scope, `unchanged (${s.status})`);
      const set = { completed_at: NOW, provider_reference: fact.providerReference, receipt: fact.receipt };
      return plan(s.scope, 'completed', { moves: [move(s, 'completed', set)], entries: [{ entry: s.payoutEntry }] });
    }
    case 'refused': {
      if (s.status !== 'processing') return nothing(s.scope, `unchanged (${s.status})`);
      const set = { failure: fact.failure, provider_reference: fact.providerReference };
      return { ...plan(s.scope, 'failed', { moves: [move(s, 'failed', set, fact.failure.code)] }), refund: true };
    }
    case 'stalled':
      if (s.status !== 'processing') return nothing(s.scope, `unchanged (${s.status})`);
      return plan(s.scope, 'action_required', { moves: [move(s, 'action_required', stalledAtFunded(fact.failure), 'provider_unavailable')] });
    case 'unavailable': {
      if (s.status !== 'funded') return nothing(s.scope, `not funded (${s.status})`);
      const failure = { code: 'provider_unavailable', message: `The payout provider did not accept the payout: ${fact.reason}` };
      return plan(s.scope, 'action_required', { moves: [move(s, 'action_required', stalledAtFunded(failure), 'provider_unavailable')] });
    }
  }
}

/**
 * The fact the send's answer is once the request is taken (processing): paid, refused, or none while pending. A
 * refusal's failure defaults to `payout_rejected`.
 */
export function answerOfSend(outcome: ProviderOutcome): PayoutFact | null {
  if (outcome.status === 'succeeded') return { kind: 'paid', providerReference: outcome.provider_reference, receipt: outcome.receipt ?? null };
  if (outcome.status === 'rejected' || outcome.status === 'declined') {
    const failure = { code: outcome.failure?.code ?? 'payout_rejected', message: outcome.failure?.message ?? 'The provider refused the payout.' };
    return { kind: 'refused', providerReference: outcome.provider_reference, failure };
  }
  return null;
}

// A managed wallet's submission: from the status the deciding unit locked, which moves it makes (each a
// compare-and-set on the status before it) and whether it may then take the wallet's USDC; the send recorded, or
// refused by the chain. Pure: no I/O; the plans are carried out by apply() (shared/domain/offramps.ts).
import type { EventScope } from '../domain/events.js';
import type { TransactionStatus } from '../domain/machines.js';
import { nothing, plan, type Plan } from './plan.js';
import { txMove, type Failure } from './transaction-steps.js';

export type SubmissionStatus = 'created' | 'signing' | 'submitting';

export type SubmissionStep =
  /** Move through `moves` in order, then send; `debits`: this unit takes the USDC (a move to submitting happened first). */
  | { kind: 'submit'; moves: SubmissionStatus[]; debits: boolean }
  | { kind: 'none'; reason: string };

/**
 * `inUnit`: the adapter debits in the same unit as the moves (the sandbox), so the move to `submitting` comes first and
 * the debit only follows a move this unit made; a row already `submitting` was debited by the unit that moved it.
 * Otherwise (live) the unit only reaches `signing`; the send happens outside it, named by its reference.
 */
export function submissionStep(status: string, inUnit: boolean): SubmissionStep {
  if (status !== 'created' && status !== 'signing' && status !== 'submitting') return { kind: 'none', reason: `not submittable (${status})` };
  if (!inUnit) return { kind: 'submit', moves: status === 'created' ? ['signing'] : [], debits: false };
  if (status === 'submitting') return { kind: 'submit', moves: [], debits: false };
  return { kind: 'submit', moves: status === 'created' ? ['signing', 'submitting'] : ['submitting'], debits: true };
}

/** The off-ramp as its row shows it to the submission. */
export interface SubmissionSnapshot {
  id: string;
  scope: EventScope;
  status: TransactionStatus;
}

export type SubmissionFact =
  /** The submit job's step, under the row's lock: `inUnit` as submissionStep reads it. */
  | { kind: 'take'; inUnit: boolean }
  /** The managed wallet's send left (live, in the unit after it): signing -> submitting. */
  | { kind: 'sent' }
  /** The chain refused the send (not enough USDC or gas): action_required, stalled at signing. */
  | { kind: 'refused'; failure: Failure };

/**
 * What the submission does: `plan`, its moves the row's path (each a compare-and-set on the status the one before
 * left, written as one statement); `submits`: the send is (or was) made and is recorded; `debits`: this unit takes the
 * managed wallet's USDC (its move to submitting came first).
 */
export interface SubmissionDecision {
  outcome: string;
  plan: Plan;
  submits: boolean;
  debits: boolean;
}

/** The row's path through `to`, in one plan. */
function steps(s: SubmissionSnapshot, to: { status: TransactionStatus; set?: Record<string, unknown>; reason?: string }[]): Plan {
  let from = s.status;
  const moves = to.map((step) => {
    const move = txMove({ id: s.id, status: from }, step.status, step.set, step.reason);
    from = step.status;
    return move;
  });
  return plan(s.scope, from, { moves });
}

export function decideSubmission(s: SubmissionSnapshot, fact: SubmissionFact): SubmissionDecision {
  switch (fact.kind) {
    case 'take': {
      const step = submissionStep(s.status, fact.inUnit);
      if (step.kind === 'none') return { outcome: step.reason, plan: nothing(s.scope, step.reason), submits: false, debits: false };
      return { outcome: 'submit', plan: steps(s, step.moves.map((status) => ({ status }))), submits: true, debits: step.debits };
    }
    case 'sent': {
      if (s.status === 'signing') return { outcome: 'submitted', plan: steps(s, [{ status: 'submitting' }]), submits: true, debits: false };
      if (s.status === 'submitting') return { outcome: 'submitted', plan: nothing(s.scope, 'submitted'), submits: true, debits: false };
      return { outcome: `moved on (${s.status})`, plan: nothing(s.scope, `moved on (${s.status})`), submits: false, debits: false };
    }
    case 'refused': {
      // Still created when the send was refused in the unit that would have moved it (the sandbox): through signing,
      // as a send refused after its own move to signing, so a retry resumes at signing either way.
      const stall = { status: 'action_required' as const, set: { stalled_at: 'signing', failure: fact.failure }, reason: fact.failure.code };
      if (s.status === 'created') return { outcome: fact.failure.code, plan: steps(s, [{ status: 'signing' }, stall]), submits: false, debits: false };
      if (s.status === 'signing') return { outcome: fact.failure.code, plan: steps(s, [stall]), submits: false, debits: false };
      return { outcome: `unchanged (${s.status})`, plan: nothing(s.scope, `unchanged (${s.status})`), submits: false, debits: false };
    }
  }
}

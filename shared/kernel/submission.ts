// A managed wallet's submission: from the status the deciding unit locked, which moves it makes (each a
// compare-and-set on the status before it) and whether it may then take the wallet's USDC. Pure: no I/O.

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

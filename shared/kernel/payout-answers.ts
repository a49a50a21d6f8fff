// What a payout request's provider has finally said, and what each later fact about it may do (CONTRACT §18 "Payouts
// that were not paid"). Pure: no database, queue or provider. The I/O code reads a request into PayoutRequestState,
// asks `decidePayout`, and carries out the plan.

/** A final answer about the latest request: it paid, failed for good, failed for now, or the provider has no record of it. */
export type PayoutAnswer = 'paid' | 'failed_permanent' | 'failed_temporary' | 'absent';
export const PAYOUT_ANSWERS: readonly PayoutAnswer[] = ['paid', 'failed_permanent', 'failed_temporary', 'absent'];

/** A payout request (provider_requests, kind payout) as the decisions need it. */
export interface PayoutRequestState {
  environment: 'sandbox' | 'live';
  /** The provider's latest word as stored: `sending` while a request is out and unanswered. */
  status: string;
  /** The typed final answer about the latest request; null while it has none. */
  answer: PayoutAnswer | null;
  /** The provider's id of the latest request (Daraja ConversationID) once it accepted it; null before. */
  conversationId: string | null;
  /** Requests that left. */
  sends: number;
  /** Status queries asked since the latest request left: only their answers are about it. */
  queries: readonly string[];
  /** A failure the provider's Result callback claimed for the latest request, waiting for the status check. */
  claimed: PayoutAnswer | null;
}

/**
 * The final answer about the latest request, or null (unknown: it may have paid). No request at all is `absent`.
 * Sandbox answers are its own last word; a stored succeeded/rejected/declined is only ever written once final.
 */
export function finalAnswerOf(request: Pick<PayoutRequestState, 'environment' | 'status' | 'answer'> | null): PayoutAnswer | null {
  if (!request) return 'absent';
  if (request.answer) return request.answer;
  if (request.status === 'succeeded') return 'paid';
  if (request.status === 'rejected' || request.status === 'declined') return 'failed_permanent';
  if (request.environment === 'sandbox' && request.status === 'temporary_failure') return 'failed_temporary';
  return null;
}

/** What a provider's outcome says of a request as an answer; `pending` (or `sending`) says nothing final. */
export function answerOfOutcome(status: string): PayoutAnswer | null {
  if (status === 'succeeded') return 'paid';
  if (status === 'rejected' || status === 'declined') return 'failed_permanent';
  return status === 'temporary_failure' ? 'failed_temporary' : null;
}

/** Whether nothing of the payout can still pay: a refund may go out at once. */
export function payoutUnpaid(answer: PayoutAnswer | null): boolean {
  return answer === 'failed_permanent' || answer === 'failed_temporary' || answer === 'absent';
}

/**
 * A fact about a payout request.
 * `result`: the provider's Result callback for one request (a claim; Daraja names it by ConversationID).
 * `queue_timeout`: the request sat too long in the provider's queue; it may still run.
 * `status`: a status check's answer (Daraja Transaction Status, named by its query id; MoMo's status GET, about the
 * request it names by `requestId`, MTN's X-Reference-Id). `failed` is "not paid" without saying whether for good.
 */
export type PayoutFact =
  | { type: 'result'; said: PayoutAnswer; conversationId: string | null }
  | { type: 'queue_timeout'; conversationId: string | null }
  | { type: 'status'; said: PayoutAnswer | 'failed' | null; queryId?: string; requestId?: string | null };

/**
 * Whether the fact allows the payout to be requested again: only a status answer about the latest request saying it
 * does not exist or did not pay for now. A Result callback alone never does.
 */
export function mayResend(request: PayoutRequestState, fact: PayoutFact): boolean {
  const plan = decidePayout(request, fact);
  return plan.do === 'resend' || plan.do === 'stall';
}

/** Whether a status answer is about the latest request (Daraja: one of the queries asked since it left; MTN: its id). */
function aboutLatest(request: PayoutRequestState, fact: { queryId?: string; requestId?: string | null }): boolean {
  if (fact.queryId !== undefined) return request.queries.includes(fact.queryId);
  return !fact.requestId || !request.conversationId || fact.requestId === request.conversationId;
}

/** A status "failed" without its reason is read by the failure the Result claimed; none claimed: failed for now. */
function statusAnswer(request: PayoutRequestState, said: PayoutAnswer | 'failed' | null): PayoutAnswer | null {
  if (said !== 'failed') return said;
  return request.claimed === 'failed_permanent' ? 'failed_permanent' : 'failed_temporary';
}

/**
 * What to do with a fact. `record`: the final answer to store on the request. `wait`: the latest request's own answer
 * is not stored yet (a Result may have overtaken it): try again later. `ignore`: about an older request, or says
 * nothing. `ask`: the status check decides (`claim` kept meanwhile). `complete`, `fail` (refund), `resend` (or, past
 * `maxSends`, stall) follow a final answer; `contradicted` marks a claim the status check denied.
 */
export type PayoutPlan =
  | { do: 'wait' }
  | { do: 'ignore'; why: string }
  | { do: 'ask'; why: 'timeout' | 'claim' | 'unmatched'; claim?: PayoutAnswer }
  | { do: 'complete'; record: 'paid'; contradicted?: string }
  | { do: 'fail'; record: 'failed_permanent'; contradicted?: string }
  | { do: 'resend'; record: 'failed_temporary' | 'absent'; contradicted?: string }
  | { do: 'stall'; record: 'failed_temporary' | 'absent'; contradicted?: string };

export function decidePayout(request: PayoutRequestState, fact: PayoutFact, maxSends = Infinity): PayoutPlan {
  const plan = planFor(request, fact, maxSends);
  // An answer for good is never replaced by another (a late or contradicting one changes nothing).
  const final = finalAnswerOf(request);
  if ('record' in plan && (final === 'paid' || final === 'failed_permanent') && plan.record !== final) return { do: 'ignore', why: `the request was answered ${final} already` };
  return plan;
}

function planFor(request: PayoutRequestState, fact: PayoutFact, maxSends: number): PayoutPlan {
  if (fact.type !== 'status') {
    if (request.conversationId === null) {
      if (request.status === 'sending') return { do: 'wait' };
      // The latest request's id was never learned (its answer lost): whatever the Result says, the status check decides.
      return fact.type === 'result' ? { do: 'ask', why: 'claim', claim: fact.said } : { do: 'ask', why: 'unmatched' };
    }
    if (fact.conversationId !== request.conversationId) return { do: 'ignore', why: 'a result about an earlier request' };
    if (fact.type === 'queue_timeout') return { do: 'ask', why: 'timeout' };
    // Whatever a Result claims, success included, the status check decides: anyone holding the callback token could
    // forge one, and a forged success must not mark unpaid money paid (the kernel simulator's payout seed 3).
    return { do: 'ask', why: 'claim', claim: fact.said };
  }
  if (!aboutLatest(request, fact)) return { do: 'ignore', why: 'a status answer from before the latest request' };
  const said = statusAnswer(request, fact.said);
  if (said === null) return { do: 'ignore', why: 'the status check gave no final answer' };
  const claimed = request.claimed;
  if (said === 'paid') return { do: 'complete', record: 'paid', ...(claimed && claimed !== 'paid' ? { contradicted: 'the status check says it paid' } : {}) };
  const deniedSuccess = claimed === 'paid' ? { contradicted: 'the status check says it did not pay' } : {};
  if (said === 'failed_permanent') return { do: 'fail', record: 'failed_permanent', ...deniedSuccess };
  const contradicted = claimed === 'failed_permanent' && said === 'absent' ? { contradicted: 'the status check has no record of it' } : deniedSuccess;
  return { do: request.sends < maxSends ? 'resend' : 'stall', record: said, ...contradicted };
}

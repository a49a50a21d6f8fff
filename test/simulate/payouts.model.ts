// A payout's requests played against the kernel's decisions (decidePayout for the requests, decideOfframpPayout for
// the off-ramp itself, its retries too): the provider settles each request in its own time (paid, failed for now,
// failed for good, or never arrived), Result callbacks come late, twice, about older requests or forged by anyone
// holding the callback token, and status answers come late or about an earlier request. The world never pays twice,
// never refunds what may still pay, and never leaves a payout waiting with nothing to move it.
import { decidePayout, finalAnswerOf, type PayoutAnswer, type PayoutFact, type PayoutRequestState } from '../../shared/kernel/payout-answers.js';
import { answerOfSend, decideOfframpPayout, type PayoutFact as TxFact } from '../../shared/kernel/offramp-payouts.js';
import type { ProviderOutcome, ProviderStatus } from '../../shared/providers/provider.js';
import type { Dice, Model } from './runner.js';

type Truth = 'pending' | PayoutAnswer;
const MAX_SENDS = 3;

interface World {
  /** The provider's truth about each request we sent, in order (absent: it never reached the provider). */
  requests: { conversationId: string; truth: Truth }[];
  state: PayoutRequestState;
  /** The off-ramp, as the kernel's payout decision moves it (funded only within a retry's step). */
  tx: 'funded' | 'processing' | 'completed' | 'failed' | 'action_required';
  /** Status queries asked and not answered yet: the query id and the request it was asked about. */
  asked: { queryId: string; about: number }[];
  queries: number;
}

type Fact =
  | { kind: 'provider_settles'; request: number; truth: Exclude<Truth, 'pending'> }
  | { kind: 'result'; request: number; said: PayoutAnswer; forged: boolean }
  | { kind: 'check_job' }
  | { kind: 'status_answer'; queryId: string; about: number; vague: boolean }
  | { kind: 'retry' };

const OUTCOME_STATUS: Record<PayoutAnswer, ProviderStatus> = { paid: 'succeeded', failed_permanent: 'rejected', failed_temporary: 'temporary_failure', absent: 'temporary_failure' };

function send(w: World): void {
  const conversationId = `AG_${w.requests.length + 1}`;
  w.requests.push({ conversationId, truth: 'pending' });
  w.state = { ...w.state, status: 'pending', answer: null, conversationId, sends: w.state.sends + 1, queries: [], claimed: null };
}

const PAYOUT_ENTRY = {
  kind: 'offramp_payout', reference: 'payout-tx', postings: [
    { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: -1n }, { account: { kind: 'provider_clearing' as const, asset: 'USDC' }, amount: 1n },
  ],
};

/** The off-ramp moves as the kernel's payout decision (offramp-payouts.ts) plans, from where the world has it. */
function moveTx(w: World, fact: TxFact): void {
  const plan = decideOfframpPayout({ id: 'tx', scope: { businessId: 'b', environment: 'live' }, status: w.tx, payoutEntry: PAYOUT_ENTRY }, fact);
  if (plan.moves.length) w.tx = plan.moves[0].to as World['tx'];
}

function carryOut(w: World, fact: PayoutFact): void {
  const plan = decidePayout(w.state, fact, MAX_SENDS);
  switch (plan.do) {
    case 'wait':
    case 'ignore':
      return;
    case 'ask':
      if (plan.claim) w.state = { ...w.state, claimed: plan.claim };
      return ask(w);
    case 'complete':
      w.state = { ...w.state, answer: 'paid', status: 'succeeded' };
      return moveTx(w, { kind: 'paid', providerReference: w.state.conversationId, receipt: 'RCP' });
    case 'fail':
      w.state = { ...w.state, answer: 'failed_permanent', status: 'rejected' };
      return moveTx(w, { kind: 'refused', providerReference: w.state.conversationId, failure: { code: 'payout_rejected', message: 'refused' } });
    case 'resend':
      w.state = { ...w.state, answer: plan.record, status: OUTCOME_STATUS[plan.record] };
      if (w.tx === 'processing') send(w);
      return;
    case 'stall':
      w.state = { ...w.state, answer: plan.record, status: OUTCOME_STATUS[plan.record] };
      return moveTx(w, { kind: 'stalled', failure: { code: 'provider_unavailable', message: 'not paid for now' } });
  }
}

function ask(w: World): void {
  const queryId = `q${++w.queries}`;
  w.state = { ...w.state, queries: [...w.state.queries, queryId] };
  w.asked.push({ queryId, about: w.requests.length - 1 });
}

/** What the provider's status answer says of a request: its truth, pending nothing final; `vague`: a failure without its reason. */
function statusSays(truth: Truth, vague: boolean): PayoutAnswer | 'failed' | null {
  if (truth === 'pending') return null;
  return vague && (truth === 'failed_temporary' || truth === 'failed_permanent') ? 'failed' : truth;
}

export const payoutsModel: Model<World, Fact> = {
  name: 'payout requests',
  budget: 30,
  init() {
    const w: World = { requests: [], state: { environment: 'live', status: 'sending', answer: null, conversationId: null, sends: 0, queries: [], claimed: null }, tx: 'processing', asked: [], queries: 0 };
    send(w);
    return w;
  },
  next(w, d, draining) {
    const options: (() => Fact)[] = [];
    const pending = w.requests.map((r, i) => [r, i] as const).filter(([r]) => r.truth === 'pending');
    if (pending.length) {
      const [, i] = d.pick(pending);
      options.push(() => ({ kind: 'provider_settles', request: i, truth: d.pick(['paid', 'failed_temporary', 'failed_permanent', 'absent'] as const) }));
    }
    const settled = w.requests.map((r, i) => [r, i] as const).filter(([r]) => r.truth !== 'pending' && r.truth !== 'absent');
    if (!draining && settled.length) {
      const [r, i] = d.pick(settled);
      options.push(() => ({ kind: 'result', request: i, said: r.truth as PayoutAnswer, forged: false }));
    }
    if (!draining && w.requests.length) options.push(() => ({ kind: 'result', request: d.int(w.requests.length), said: d.pick(['paid', 'failed_temporary', 'failed_permanent'] as const), forged: true }));
    if (w.asked.length) options.push(() => ({ kind: 'status_answer', ...w.asked.splice(d.int(w.asked.length), 1)[0], vague: d.chance(0.5) }));
    if ((w.tx === 'processing' && finalAnswerOf(w.state) === null && !w.asked.some((a) => a.about === w.requests.length - 1)) || (!draining && w.tx === 'processing')) options.push(() => ({ kind: 'check_job' }));
    if (w.tx === 'action_required') options.push(() => ({ kind: 'retry' }));
    return options.length ? d.pick(options)() : null;
  },
  step(w, fact) {
    switch (fact.kind) {
      case 'provider_settles':
        w.requests[fact.request].truth = fact.truth;
        return;
      case 'result':
        return carryOut(w, { type: 'result', said: fact.said, conversationId: w.requests[fact.request].conversationId });
      case 'check_job':
        if (w.tx === 'processing' && finalAnswerOf(w.state) === null) ask(w);
        return;
      case 'status_answer':
        return carryOut(w, { type: 'status', said: statusSays(w.requests[fact.about].truth, fact.vague), queryId: fact.queryId });
      case 'retry': {
        // POST /retry of a stalled payout: back to funded, and payout.send's adapter answers with the latest request's
        // final answer (paid, refused for good) or sends again once the status check says it did not pay.
        const answered = finalAnswerOf(w.state);
        if (answered === null) return;
        w.tx = 'funded';
        const again = answered === 'failed_temporary' || answered === 'absent';
        if (again) send(w);
        const outcome = { status: again ? 'pending' : OUTCOME_STATUS[answered], provider_reference: w.state.conversationId } as ProviderOutcome;
        moveTx(w, { kind: 'sent', outcome });
        const answer = answerOfSend(outcome);
        if (answer) moveTx(w, answer);
      }
    }
  },
  check(w, final) {
    const broken: string[] = [];
    const paid = w.requests.filter((r) => r.truth === 'paid').length;
    if (paid > 1) broken.push(`paid ${paid} times`);
    w.requests.slice(0, -1).forEach((r, i) => {
      if (r.truth === 'pending') broken.push(`request ${i + 1} may still pay, yet another was sent after it`);
    });
    if (w.tx === 'failed' && w.requests.some((r) => r.truth === 'paid' || r.truth === 'pending')) broken.push('refunded while a request paid or may still pay');
    if (w.tx === 'completed' && paid === 0 && final) broken.push('completed, but no request paid');
    if (final && w.tx === 'processing') broken.push('processing at quiescence: no exit');
    return broken;
  },
  describe(fact) {
    return JSON.stringify(fact);
  },
};

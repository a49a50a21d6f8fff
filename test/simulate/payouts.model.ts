// A payout's requests played against the kernel's decision (decidePayout): the provider settles each request in its
// own time (paid, failed for now, failed for good, or never arrived), Result callbacks come late, twice, about older
// requests or forged by anyone holding the callback token, and status answers come late or about an earlier request.
// The world never pays twice, never refunds what may still pay, and never leaves a payout waiting with nothing to move it.
import { decidePayout, finalAnswerOf, type PayoutAnswer, type PayoutFact, type PayoutRequestState } from '../../shared/kernel/payout-answers.js';
import type { Dice, Model } from './runner.js';

type Truth = 'pending' | PayoutAnswer;
const MAX_SENDS = 3;

interface World {
  /** The provider's truth about each request we sent, in order (absent: it never reached the provider). */
  requests: { conversationId: string; truth: Truth }[];
  state: PayoutRequestState;
  tx: 'processing' | 'completed' | 'failed' | 'action_required';
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

const OUTCOME_STATUS: Record<PayoutAnswer, string> = { paid: 'succeeded', failed_permanent: 'rejected', failed_temporary: 'temporary_failure', absent: 'temporary_failure' };

function send(w: World): void {
  const conversationId = `AG_${w.requests.length + 1}`;
  w.requests.push({ conversationId, truth: 'pending' });
  w.state = { ...w.state, status: 'pending', answer: null, conversationId, sends: w.state.sends + 1, queries: [], claimed: null };
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
      if (w.tx === 'processing' || w.tx === 'action_required') w.tx = 'completed';
      return;
    case 'fail':
      w.state = { ...w.state, answer: 'failed_permanent', status: 'rejected' };
      if (w.tx === 'processing' || w.tx === 'action_required') w.tx = 'failed';
      return;
    case 'resend':
      w.state = { ...w.state, answer: plan.record, status: OUTCOME_STATUS[plan.record] };
      if (w.tx === 'processing') send(w);
      return;
    case 'stall':
      w.state = { ...w.state, answer: plan.record, status: OUTCOME_STATUS[plan.record] };
      if (w.tx === 'processing') w.tx = 'action_required';
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
      case 'retry':
        // POST /retry of a stalled payout: sent again only once the status check says the latest request did not pay.
        if (finalAnswerOf(w.state) === 'failed_temporary' || finalAnswerOf(w.state) === 'absent') {
          w.tx = 'processing';
          send(w);
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

import { expect } from 'chai';
import { decideSubmission, submissionStep } from '../../../shared/kernel/submission.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import type { Plan } from '../../../shared/kernel/plan.js';
import { TRANSACTION_STATUSES, type TransactionStatus } from '../../../shared/domain/machines.js';

describe('kernel: a managed wallet submission step', () => {
  it('in the sandbox unit, the move to submitting comes before the debit', () => {
    expect(submissionStep('created', true)).to.deep.equal({ kind: 'submit', moves: ['signing', 'submitting'], debits: true });
    expect(submissionStep('signing', true)).to.deep.equal({ kind: 'submit', moves: ['submitting'], debits: true });
  });
  it('a row already submitting was debited by the unit that moved it: no debit again', () => {
    expect(submissionStep('submitting', true)).to.deep.equal({ kind: 'submit', moves: [], debits: false });
  });
  it('live: the unit only reaches signing; the send happens outside it', () => {
    expect(submissionStep('created', false)).to.deep.equal({ kind: 'submit', moves: ['signing'], debits: false });
    expect(submissionStep('signing', false)).to.deep.equal({ kind: 'submit', moves: [], debits: false });
    expect(submissionStep('submitting', false)).to.deep.equal({ kind: 'submit', moves: [], debits: false });
  });
  it('any other status (moved on) sends and debits nothing', () => {
    for (const status of ['action_required', 'awaiting_funds', 'failed', 'completed']) {
      for (const inUnit of [true, false]) expect(submissionStep(status, inUnit)).to.deep.equal({ kind: 'none', reason: `not submittable (${status})` });
    }
  });
});

describe('kernel: a managed wallet submission as a plan (decideSubmission)', () => {
  const scope = { businessId: 'b', environment: 'sandbox' as const };
  const at = (status: TransactionStatus) => ({ id: 'tx1', scope, status });
  /** The plan's moves as from -> to, the row's path (checked by assertPlan: each from where the one before left it). */
  const path = (p: Plan) => {
    assertPlan(p);
    return p.moves.map((m) => {
      expect(m.id).to.equal('tx1');
      return `${m.from}->${m.to}`;
    });
  };
  const none = (outcome: string) => ({ outcome, scope, moves: [], entries: [], jobs: [] });
  const failure = { code: 'insufficient_funds', message: 'The managed wallet holds too little USDC; fund it and retry.' };

  it('take: the moves submissionStep names, in order, in one plan; then it sends (and debits only in the sandbox unit)', () => {
    const sandbox = decideSubmission(at('created'), { kind: 'take', inUnit: true });
    expect([path(sandbox.plan), sandbox.submits, sandbox.debits]).to.deep.equal([['created->signing', 'signing->submitting'], true, true]);
    expect(path(decideSubmission(at('signing'), { kind: 'take', inUnit: true }).plan)).to.deep.equal(['signing->submitting']);
    const already = decideSubmission(at('submitting'), { kind: 'take', inUnit: true });
    expect([path(already.plan), already.submits, already.debits]).to.deep.equal([[], true, false]);
    const live = decideSubmission(at('created'), { kind: 'take', inUnit: false });
    expect([path(live.plan), live.submits, live.debits]).to.deep.equal([['created->signing'], true, false]);
  });

  it('take: a row that moved on moves, sends and debits nothing', () => {
    for (const status of TRANSACTION_STATUSES.filter((s) => !['created', 'signing', 'submitting'].includes(s))) {
      expect(decideSubmission(at(status), { kind: 'take', inUnit: true }), status).to.deep.equal({ outcome: `not submittable (${status})`, plan: none(`not submittable (${status})`), submits: false, debits: false });
    }
  });

  it('sent: signing -> submitting, a row already submitting records the send as it is, any other moved on', () => {
    expect(path(decideSubmission(at('signing'), { kind: 'sent' }).plan)).to.deep.equal(['signing->submitting']);
    expect(decideSubmission(at('submitting'), { kind: 'sent' })).to.deep.equal({ outcome: 'submitted', plan: none('submitted'), submits: true, debits: false });
    expect(decideSubmission(at('awaiting_funds'), { kind: 'sent' })).to.deep.equal({ outcome: 'moved on (awaiting_funds)', plan: none('moved on (awaiting_funds)'), submits: false, debits: false });
  });

  it('refused: action_required stalled at signing (through signing from created), so a retry resumes at signing', () => {
    const fromCreated = decideSubmission(at('created'), { kind: 'refused', failure });
    expect([path(fromCreated.plan), fromCreated.submits]).to.deep.equal([['created->signing', 'signing->action_required'], false]);
    const stall = fromCreated.plan.moves[1]!;
    expect([stall.set, stall.reason]).to.deep.equal([{ stalled_at: 'signing', failure }, 'insufficient_funds']);
    expect(path(decideSubmission(at('signing'), { kind: 'refused', failure }).plan)).to.deep.equal(['signing->action_required']);
    // Submitting: its send left and was debited; a refusal now is someone else's stale news.
    expect(path(decideSubmission(at('submitting'), { kind: 'refused', failure }).plan)).to.deep.equal([]);
  });
});

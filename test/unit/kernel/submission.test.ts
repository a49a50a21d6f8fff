import { expect } from 'chai';
import { submissionStep } from '../../../shared/kernel/submission.js';

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

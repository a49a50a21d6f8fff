import { expect } from 'chai';
import { decidePayout, finalAnswerOf, mayResend, payoutUnpaid, type PayoutRequestState } from '../../shared/kernel/payout-answers.js';

// The payout rules of CONTRACT §18 as pure decisions: no database, no provider.
const sent = (over: Partial<PayoutRequestState> = {}): PayoutRequestState => ({
  environment: 'live', status: 'pending', answer: null, conversationId: 'AG_latest', sends: 1, queries: ['q1'], claimed: null, ...over,
});

describe('payout answers (kernel)', () => {
  it('finalAnswerOf: the typed answer, a final stored word, sandbox temporary; else unknown; no request is absent', () => {
    expect(finalAnswerOf(null)).to.equal('absent');
    expect(finalAnswerOf(sent())).to.equal(null);
    expect(finalAnswerOf(sent({ status: 'sending', conversationId: null }))).to.equal(null);
    expect(finalAnswerOf(sent({ status: 'temporary_failure' }))).to.equal(null);
    expect(finalAnswerOf(sent({ status: 'temporary_failure', answer: 'failed_temporary' }))).to.equal('failed_temporary');
    expect(finalAnswerOf(sent({ status: 'temporary_failure', answer: 'absent' }))).to.equal('absent');
    expect(finalAnswerOf(sent({ status: 'succeeded' }))).to.equal('paid');
    expect(finalAnswerOf(sent({ status: 'rejected' }))).to.equal('failed_permanent');
    expect(finalAnswerOf(sent({ environment: 'sandbox', status: 'temporary_failure' }))).to.equal('failed_temporary');
    expect(payoutUnpaid('failed_temporary') && payoutUnpaid('failed_permanent') && payoutUnpaid('absent')).to.equal(true);
    expect(payoutUnpaid(null) || payoutUnpaid('paid')).to.equal(false);
  });

  it('a Result callback alone never sends again, whatever it says', () => {
    for (const said of ['failed_temporary', 'failed_permanent', 'absent', 'paid'] as const) {
      expect(mayResend(sent(), { type: 'result', said, conversationId: 'AG_latest' })).to.equal(false);
    }
    expect(decidePayout(sent(), { type: 'result', said: 'failed_temporary', conversationId: 'AG_latest' })).to.deep.equal({ do: 'ask', why: 'claim', claim: 'failed_temporary' });
  });

  it('a Result naming another ConversationID changes nothing; one before the latest request was answered waits', () => {
    expect(decidePayout(sent(), { type: 'result', said: 'paid', conversationId: 'AG_older' }).do).to.equal('ignore');
    expect(decidePayout(sent(), { type: 'queue_timeout', conversationId: 'AG_older' }).do).to.equal('ignore');
    expect(decidePayout(sent({ status: 'sending', conversationId: null }), { type: 'result', said: 'paid', conversationId: 'AG_x' }).do).to.equal('wait');
    // The latest request's answer was lost (its id never learned): a Result only makes the status check ask.
    expect(decidePayout(sent({ conversationId: null }), { type: 'result', said: 'paid', conversationId: 'AG_x' })).to.deep.equal({ do: 'ask', why: 'claim', claim: 'paid' });
  });

  it('a status answer about the latest request decides: not paid (for now, or no record) sends again, up to maxSends; then stall', () => {
    expect(mayResend(sent(), { type: 'status', said: 'absent', queryId: 'q1' })).to.equal(true);
    expect(mayResend(sent(), { type: 'status', said: 'failed_temporary', queryId: 'q1' })).to.equal(true);
    expect(mayResend(sent(), { type: 'status', said: 'failed_permanent', queryId: 'q1' })).to.equal(false);
    expect(mayResend(sent(), { type: 'status', said: 'paid', queryId: 'q1' })).to.equal(false);
    expect(mayResend(sent(), { type: 'status', said: null, queryId: 'q1' })).to.equal(false);
    expect(mayResend(sent(), { type: 'status', said: 'absent', queryId: 'q-before-the-send' })).to.equal(false);
    // MTN's status GET names the request it answers: one about an earlier X-Reference-Id says nothing of the latest.
    expect(mayResend(sent(), { type: 'status', said: 'failed_temporary', requestId: 'AG_older' })).to.equal(false);
    expect(mayResend(sent(), { type: 'status', said: 'failed_temporary', requestId: 'AG_latest' })).to.equal(true);
    expect(decidePayout(sent({ sends: 2 }), { type: 'status', said: 'failed_temporary', queryId: 'q1' }, 2)).to.deep.equal({ do: 'stall', record: 'failed_temporary' });
    expect(decidePayout(sent({ sends: 1 }), { type: 'status', said: 'failed_temporary', queryId: 'q1' }, 2)).to.deep.equal({ do: 'resend', record: 'failed_temporary' });
  });

  it('a status "Failed" without its reason is read by the claimed failure; a claim the status denies is contradicted', () => {
    expect(decidePayout(sent({ claimed: 'failed_permanent' }), { type: 'status', said: 'failed', queryId: 'q1' })).to.deep.equal({ do: 'fail', record: 'failed_permanent' });
    expect(decidePayout(sent({ claimed: 'failed_temporary' }), { type: 'status', said: 'failed', queryId: 'q1' })).to.deep.equal({ do: 'resend', record: 'failed_temporary' });
    expect(decidePayout(sent({ claimed: 'failed_permanent' }), { type: 'status', said: 'paid', queryId: 'q1' })).to.deep.include({ do: 'complete', contradicted: 'the status check says it paid' });
    expect(decidePayout(sent({ claimed: 'failed_permanent' }), { type: 'status', said: 'absent', queryId: 'q1' })).to.deep.include({ do: 'resend', contradicted: 'the status check has no record of it' });
  });

  it('a Result\'s success is a claim: the status check completes it, or denies it (a forged success pays nobody)', () => {
    expect(decidePayout(sent(), { type: 'result', said: 'paid', conversationId: 'AG_latest' })).to.deep.equal({ do: 'ask', why: 'claim', claim: 'paid' });
    expect(decidePayout(sent({ claimed: 'paid' }), { type: 'status', said: 'paid', queryId: 'q1' })).to.deep.equal({ do: 'complete', record: 'paid' });
    expect(decidePayout(sent({ claimed: 'paid' }), { type: 'status', said: 'absent', queryId: 'q1' })).to.deep.include({ do: 'resend', contradicted: 'the status check says it did not pay' });
    expect(decidePayout(sent({ claimed: 'paid' }), { type: 'status', said: 'failed_permanent', queryId: 'q1' })).to.deep.include({ do: 'fail', contradicted: 'the status check says it did not pay' });
  });

  it('an answer for good is never replaced', () => {
    expect(decidePayout(sent({ status: 'succeeded', answer: 'paid' }), { type: 'status', said: 'absent', queryId: 'q1' }).do).to.equal('ignore');
    expect(decidePayout(sent({ status: 'rejected', answer: 'failed_permanent' }), { type: 'status', said: 'paid' }).do).to.equal('ignore');
    expect(decidePayout(sent({ status: 'succeeded', answer: 'paid' }), { type: 'status', said: 'paid' }).do).to.equal('complete');
  });
});

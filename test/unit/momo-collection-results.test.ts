import { expect } from 'chai';
import { PROMPT_ENDED_CODES } from '../../shared/kernel/stk-results.js';
import { failedOutcome, momoOutcome } from '../../shared/providers/momo/momo-results.js';
import { MOMO_REASONS } from '../helpers/fake-momo.js';

// CONTRACT §17, §18: a FAILED MoMo collection ends its prompt whatever the reason, EXPIRED as collection_timeout.
describe('MTN MoMo: a FAILED collection ends its prompt', () => {
  for (const reason of [...MOMO_REASONS, null, 'SOMETHING_UNPUBLISHED']) {
    it(`FAILED ${reason ?? '(no reason)'} is a final decline, never pending or temporary`, () => {
      const outcome = momoOutcome('collection', { status: 'FAILED', reason, externalId: null, financialTransactionId: null, amount: null }, 'ref');
      expect(outcome.status).to.equal('declined');
      // A code the late-success guard knows: a success MTN reports afterwards still funds the on-ramp (§14).
      expect(PROMPT_ENDED_CODES).to.include(outcome.failure?.code);
      expect(outcome, 'never sent again under a new id').not.to.have.property('ended');
    });
  }

  it('EXPIRED and COULD_NOT_PERFORM_TRANSACTION (not approved within 5 minutes) are collection_timeout', () => {
    expect(failedOutcome('collection', 'EXPIRED', 'ref').failure?.code).to.equal('collection_timeout');
    expect(failedOutcome('collection', 'COULD_NOT_PERFORM_TRANSACTION', 'ref').failure?.code).to.equal('collection_timeout');
  });

  it('NOT_ENOUGH_FUNDS is payer_insufficient_funds; a rejection is collection_declined; a system failure collection_failed', () => {
    expect(failedOutcome('collection', 'NOT_ENOUGH_FUNDS', 'ref').failure?.code).to.equal('payer_insufficient_funds');
    expect(failedOutcome('collection', 'APPROVAL_REJECTED', 'ref').failure?.code).to.equal('collection_declined');
    expect(failedOutcome('collection', 'INTERNAL_PROCESSING_ERROR', 'ref').failure?.code).to.equal('collection_failed');
  });

  it('a payout FAILED for a reason no retry fixes is refused; any other is not paid for now, and sent again', () => {
    for (const reason of MOMO_REASONS) {
      const outcome = momoOutcome('payout', { status: 'FAILED', reason, externalId: null, financialTransactionId: null, amount: null }, 'ref');
      expect(['rejected', 'temporary_failure'], reason).to.include(outcome.status);
      if (outcome.status === 'temporary_failure') expect(outcome.ended, reason).to.equal(true);
    }
  });
});

import { expect } from 'chai';
import { failedOutcome, momoOutcome } from '../../shared/providers/momo/momo-results.js';

// CONTRACT §17, §18: a FAILED MoMo collection ends its prompt whatever the reason, EXPIRED as collection_timeout.
// MTN's RequestToPayReason values as published (momodeveloper.mtn.com "Common Error Codes"; the mtnmomo crate's
// src/enums/reason.rs lists the enum), read 2026-11-28 with the search tool.
const REQUEST_TO_PAY_REASONS = [
  'INTERNAL_PROCESSING_ERROR', 'APPROVAL_REJECTED', 'EXPIRED', 'ONGOING', 'PAYER_DELAYED', 'PAYER_NOT_FOUND', 'PAYEE_NOT_ALLOWED_TO_RECEIVE',
  'NOT_ALLOWED', 'NOT_ALLOWED_TARGET_ENVIRONMENT', 'INVALID_CALLBACK_URL_HOST', 'INVALID_CURRENCY', 'SERVICE_UNAVAILABLE',
  'COULD_NOT_PERFORM_TRANSACTION', 'NOT_ENOUGH_FUNDS', 'PAYEE_NOT_FOUND', 'PAYER_LIMIT_REACHED', 'PAYEE_DELAYED',
];

describe('MTN MoMo: a FAILED collection ends its prompt', () => {
  for (const reason of [...REQUEST_TO_PAY_REASONS, null, 'SOMETHING_UNPUBLISHED']) {
    it(`FAILED ${reason ?? '(no reason)'} is a final decline, never pending or temporary`, () => {
      const outcome = momoOutcome('collection', { status: 'FAILED', reason, externalId: null, financialTransactionId: null, amount: null }, 'ref');
      expect(outcome.status).to.equal('declined');
      expect(outcome.failure?.code).to.be.a('string');
    });
  }

  it('EXPIRED is collection_timeout', () => {
    expect(failedOutcome('collection', 'EXPIRED', 'ref').failure?.code).to.equal('collection_timeout');
  });
});

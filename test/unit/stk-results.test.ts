import { expect } from 'chai';
import { intentAfterUnpaidPrompt, onrampAfterUnpaidPrompt, stkResult } from '../../shared/kernel/stk-results.js';
import { PUBLISHED_STK_RESULT_CODES } from '../helpers/fake-daraja.js';

// CONTRACT §18 "STK prompts": every non-zero STK result ends the prompt, with the failure code the table names.
const SECTION_18: Record<string, string> = {
  '1': 'payer_insufficient_funds',
  '1032': 'collection_declined', '2001': 'collection_declined',
  '1037': 'collection_timeout', '1036': 'collection_timeout', '1019': 'collection_timeout',
  '17': 'collection_failed', '26': 'collection_failed', '1001': 'collection_failed', '1025': 'collection_failed', '9999': 'collection_failed',
};

describe('kernel: STK prompt results', () => {
  it('0 is paid', () => {
    expect(stkResult('0')).to.deep.equal({ paid: true });
  });

  for (const code of Object.keys(PUBLISHED_STK_RESULT_CODES).filter((c) => c !== '0')) {
    it(`published code ${code} ends the prompt unpaid with ${SECTION_18[code]}`, () => {
      const verdict = stkResult(code, PUBLISHED_STK_RESULT_CODES[code]);
      expect(verdict.paid).to.equal(false);
      expect(verdict).to.include({ code: SECTION_18[code] });
      expect((verdict as { message: string }).message).to.contain(`ResultCode ${code}`);
    });
  }

  it('every code of section 18 is one Safaricom publishes (the stand-in can send it)', () => {
    expect(Object.keys(PUBLISHED_STK_RESULT_CODES)).to.include.members(Object.keys(SECTION_18));
  });

  it('an unpublished code, or one Daraja might send as text, still ends the prompt as collection_failed', () => {
    for (const code of ['4999', '500.001.1001', 'abc', '']) expect(stkResult(code)).to.include({ paid: false, code: 'collection_failed' });
  });

  it('an on-ramp fails only from awaiting_funds', () => {
    expect(onrampAfterUnpaidPrompt('awaiting_funds')).to.equal('failed');
    for (const status of ['created', 'funded', 'failed', 'action_required', 'completed']) expect(onrampAfterUnpaidPrompt(status)).to.equal(null);
  });

  it('an intent waiting on that prompt waits for payment again, or expires past expires_at; otherwise nothing moves', () => {
    const now = new Date('2026-11-28T10:00:00Z');
    const later = new Date('2026-11-28T11:00:00Z');
    const earlier = new Date('2026-11-28T09:00:00Z');
    const waiting = { status: 'processing', current: true, fullyPaid: false, expiresAt: later };
    expect(intentAfterUnpaidPrompt(waiting, now)).to.equal('awaiting_payment');
    expect(intentAfterUnpaidPrompt({ ...waiting, expiresAt: earlier }, now)).to.equal('expired');
    expect(intentAfterUnpaidPrompt({ ...waiting, expiresAt: now }, now)).to.equal('expired');
    expect(intentAfterUnpaidPrompt({ ...waiting, current: false }, now)).to.equal(null);
    expect(intentAfterUnpaidPrompt({ ...waiting, fullyPaid: true }, now)).to.equal(null);
    expect(intentAfterUnpaidPrompt({ ...waiting, status: 'succeeded' }, now)).to.equal(null);
  });
});

import { expect } from 'chai';
import { decideIntent, type IntentFact, type IntentSnapshot } from '../../../shared/kernel/intents.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { NOW, type Plan } from '../../../shared/kernel/plan.js';
import { INTENT_PAYOUT_MACHINE, PAYMENT_INTENT_MACHINE, PAYMENT_INTENT_STATUSES, PAYOUT_STATUSES, type PaymentIntentStatus, type PayoutStatus } from '../../../shared/domain/machines.js';

const scope = { businessId: 'b', environment: 'live' as const };
const now = new Date('2026-11-28T12:00:00Z');
const later = new Date(now.getTime() + 60_000);
const earlier = new Date(now.getTime() - 60_000);
const collectJob = { name: 'intent.collect' as const, id: 'collect-pi1-3', data: { intentId: 'pi1', attempt: 3 } };
const payoutJob = { name: 'intent.payout' as const, id: 'payout-pi1', data: { intentId: 'pi1' } };
const declined = { code: 'collection_declined', message: 'The payer cancelled the M-Pesa prompt (ResultCode 1032)' };
const reorged = { code: 'reorged', message: 'The block that held this transfer left the canonical chain.' };

function intent(status: PaymentIntentStatus, over: Partial<IntentSnapshot> = {}): IntentSnapshot {
  return { id: 'pi1', scope, status, collectionAttempts: 2, price: 100n, received: 0n, confirmed: 0n, hasBeneficiary: false, payoutStatus: null, expiresAt: later, now, ...over };
}

const FACTS: Record<IntentFact['kind'], IntentFact> = {
  cancel: { kind: 'cancel' },
  collect: { kind: 'collect', attempt: 3, payer: { payer_network: 'safaricom' }, job: collectJob },
  prompt_ended: { kind: 'prompt_ended', attempt: 2, failure: declined, providerReference: 'ws_CO_1' },
  expiry_tick: { kind: 'expiry_tick' },
  payment_counted: { kind: 'payment_counted', method: 'stablecoin' },
  payment_confirmed: { kind: 'payment_confirmed', payout: payoutJob },
  payment_reversed: { kind: 'payment_reversed', failure: reorged },
  payout_started: { kind: 'payout_started', transactionId: 'tx1' },
  payout_not_started: { kind: 'payout_not_started', message: 'The beneficiary was archived before the payout started; the funds stay in the treasury.' },
  payout_ended: { kind: 'payout_ended', to: 'completed', failure: null },
};
const PAYOUT_FACTS = new Set(['payout_started', 'payout_not_started', 'payout_ended']);

/** The plan's one move as [from, to, reason], checked against the machine; null when it moves nothing. */
function moveOf(p: Plan): [string | null, string, string | undefined] | null {
  assertPlan(p);
  expect(p.entries, 'an intent\'s status moves no money').to.deep.equal([]);
  if (!p.moves.length) {
    expect(p.jobs, 'no job without a move').to.deep.equal([]);
    return null;
  }
  expect(p.moves).to.have.length(1);
  const [m] = p.moves;
  expect([PAYMENT_INTENT_MACHINE, INTENT_PAYOUT_MACHINE]).to.include(m.machine);
  expect(m.id).to.equal('pi1');
  expect(p.outcome).to.equal(m.to);
  return [m.from, m.to, m.reason];
}

describe('kernel: a payment intent\'s lifecycle (decideIntent)', () => {
  it('from every final status (completed, cancelled, expired), every fact about the intent\'s status plans nothing', () => {
    for (const status of ['completed', 'cancelled', 'expired'] as const) {
      for (const fact of Object.values(FACTS).filter((f) => !PAYOUT_FACTS.has(f.kind))) {
        const p = decideIntent(intent(status, { received: 100n, confirmed: 100n, expiresAt: earlier }), fact);
        expect(moveOf(p), `${status} + ${fact.kind}`).to.equal(null);
      }
    }
  });

  it('every fact from every status, paid or not, in time or not: a plan the machine allows, from the status read', () => {
    for (const status of PAYMENT_INTENT_STATUSES) {
      for (const fact of Object.values(FACTS)) {
        for (const over of [{}, { received: 100n }, { received: 100n, confirmed: 100n, hasBeneficiary: true }, { expiresAt: earlier }]) {
          for (const payoutStatus of [null, ...PAYOUT_STATUSES]) {
            const p = decideIntent(intent(status, { ...over, payoutStatus }), fact);
            const moved = moveOf(p);
            if (moved) expect(moved[0], `${status}/${payoutStatus} + ${fact.kind}`).to.equal(PAYOUT_FACTS.has(fact.kind) ? payoutStatus : status);
          }
        }
      }
    }
  });

  it('every status the machine knows is covered here', () => {
    expect([...PAYMENT_INTENT_STATUSES].sort()).to.deep.equal(['awaiting_payment', 'cancelled', 'completed', 'expired', 'processing']);
  });

  describe('cancel', () => {
    it('awaiting_payment -> cancelled, cancelled_at now', () => {
      const p = decideIntent(intent('awaiting_payment'), FACTS.cancel);
      expect(moveOf(p)).to.deep.equal(['awaiting_payment', 'cancelled', 'cancelled']);
      expect(p.moves[0].set).to.deep.equal({ cancelled_at: NOW });
    });
    it('from processing (being paid) nothing: the API answers 409 from that', () => {
      const p = decideIntent(intent('processing'), FACTS.cancel);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('unchanged (processing)');
    });
  });

  describe('collect', () => {
    it('awaiting_payment -> processing as the next attempt, its payer kept, the error cleared, its job staged', () => {
      const p = decideIntent(intent('awaiting_payment'), FACTS.collect);
      expect(moveOf(p)).to.deep.equal(['awaiting_payment', 'processing', 'collection_requested']);
      expect(p.moves[0].set).to.deep.equal({ payer_network: 'safaricom', collection_attempts: 3, last_payment_error: null, provider_reference: null });
      expect(p.jobs).to.deep.equal([collectJob]);
    });
    it('a collect for an attempt already taken (decided on an older read) prompts nobody', () => {
      const p = decideIntent(intent('awaiting_payment', { collectionAttempts: 3 }), FACTS.collect);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('stale attempt (3)');
    });
    it('past expires_at, or already processing: nothing', () => {
      expect(decideIntent(intent('awaiting_payment', { expiresAt: now }), FACTS.collect).outcome).to.equal('expired');
      expect(moveOf(decideIntent(intent('processing'), FACTS.collect))).to.equal(null);
    });
  });

  describe('prompt ended unpaid', () => {
    it('the current prompt: waiting again, with the failure and the provider reference', () => {
      const p = decideIntent(intent('processing'), FACTS.prompt_ended);
      expect(moveOf(p)).to.deep.equal(['processing', 'awaiting_payment', 'collection_declined']);
      expect(p.moves[0].set).to.deep.equal({ last_payment_error: declined, provider_reference: 'ws_CO_1' });
    });
    it('its time up: expired', () => {
      expect(moveOf(decideIntent(intent('processing', { expiresAt: now }), FACTS.prompt_ended))).to.deep.equal(['processing', 'expired', 'collection_declined']);
    });
    it('an earlier prompt (the intent prompted again) is stale: nothing', () => {
      const p = decideIntent(intent('processing', { collectionAttempts: 3 }), FACTS.prompt_ended);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('moved on (processing)');
    });
    it('paid meanwhile (a USDC transfer covered it): stays processing', () => {
      const p = decideIntent(intent('processing', { received: 100n }), FACTS.prompt_ended);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('paid otherwise');
    });
    it('a duplicate after the intent went back to waiting: nothing', () => {
      const p = decideIntent(intent('awaiting_payment'), FACTS.prompt_ended);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('moved on (awaiting_payment)');
    });
  });

  describe('expiry tick', () => {
    it('awaiting_payment past expires_at -> expired', () => {
      expect(moveOf(decideIntent(intent('awaiting_payment', { expiresAt: now }), FACTS.expiry_tick))).to.deep.equal(['awaiting_payment', 'expired', 'expired']);
    });
    it('before expires_at (a tick early): not yet', () => {
      expect(decideIntent(intent('awaiting_payment'), FACTS.expiry_tick).outcome).to.equal('not yet');
    });
    it('one being paid finishes first', () => {
      const p = decideIntent(intent('processing', { expiresAt: earlier }), FACTS.expiry_tick);
      expect(moveOf(p)).to.equal(null);
      expect(p.outcome).to.equal('unchanged (processing)');
    });
  });

  describe('payment counted', () => {
    it('covering the price: awaiting_payment -> processing, the error cleared, named by the method', () => {
      const p = decideIntent(intent('awaiting_payment', { received: 100n }), { kind: 'payment_counted', method: 'mobile_money' });
      expect(moveOf(p)).to.deep.equal(['awaiting_payment', 'processing', 'paid_by_mobile_money']);
      expect(p.moves[0].set).to.deep.equal({ last_payment_error: null });
    });
    it('short of the price, or already processing (a collection under way): nothing', () => {
      expect(moveOf(decideIntent(intent('awaiting_payment', { received: 99n }), FACTS.payment_counted))).to.equal(null);
      expect(moveOf(decideIntent(intent('processing', { received: 100n }), FACTS.payment_counted))).to.equal(null);
    });
  });

  describe('payment confirmed', () => {
    it('covering the price: processing -> completed', () => {
      const p = decideIntent(intent('processing', { received: 100n, confirmed: 100n }), FACTS.payment_confirmed);
      expect(moveOf(p)).to.deep.equal(['processing', 'completed', 'paid']);
      expect(p.moves[0].set).to.deep.equal({ completed_at: NOW });
    });
    it('with a beneficiary: its payout pending and its job staged', () => {
      const p = decideIntent(intent('processing', { received: 100n, confirmed: 100n, hasBeneficiary: true }), FACTS.payment_confirmed);
      expect(p.moves[0].set).to.deep.equal({ completed_at: NOW, payout_status: 'pending' });
      expect(p.jobs).to.deep.equal([payoutJob]);
    });
    it('short of the price, or not processing (a late payment, a duplicate): nothing, and never paid out twice', () => {
      expect(moveOf(decideIntent(intent('processing', { received: 100n, confirmed: 99n }), FACTS.payment_confirmed))).to.equal(null);
      expect(moveOf(decideIntent(intent('awaiting_payment', { confirmed: 100n, hasBeneficiary: true }), FACTS.payment_confirmed))).to.equal(null);
      expect(moveOf(decideIntent(intent('completed', { confirmed: 200n, hasBeneficiary: true }), FACTS.payment_confirmed))).to.equal(null);
    });
  });

  describe('payment reversed', () => {
    it('no longer covered: processing -> awaiting_payment, or expired once its time is up', () => {
      const p = decideIntent(intent('processing', { received: 0n }), FACTS.payment_reversed);
      expect(moveOf(p)).to.deep.equal(['processing', 'awaiting_payment', 'reorged']);
      expect(p.moves[0].set).to.deep.equal({ last_payment_error: reorged });
      expect(moveOf(decideIntent(intent('processing', { expiresAt: earlier }), FACTS.payment_reversed))).to.deep.equal(['processing', 'expired', 'reorged']);
    });
    it('still covered by other payments, or not processing: nothing', () => {
      expect(moveOf(decideIntent(intent('processing', { received: 100n }), FACTS.payment_reversed))).to.equal(null);
      expect(moveOf(decideIntent(intent('awaiting_payment'), FACTS.payment_reversed))).to.equal(null);
    });
  });

  describe('the beneficiary\'s payout (payout_status)', () => {
    const paid = (payoutStatus: PayoutStatus | null) => intent('completed', { received: 100n, confirmed: 100n, hasBeneficiary: true, payoutStatus });
    it('started: pending -> processing, its transaction named, the error cleared', () => {
      const p = decideIntent(paid('pending'), FACTS.payout_started);
      expect(moveOf(p)).to.deep.equal(['pending', 'processing', 'payout_started']);
      expect(p.moves[0].machine).to.equal(INTENT_PAYOUT_MACHINE);
      expect(p.moves[0].set).to.deep.equal({ payout_transaction_id: 'tx1', payout_error: null });
    });
    it('not started: pending -> failed with the reason shown', () => {
      const p = decideIntent(paid('pending'), FACTS.payout_not_started);
      expect(moveOf(p)).to.deep.equal(['pending', 'failed', 'payout_not_started']);
      expect(p.moves[0].set).to.deep.equal({ payout_error: (FACTS.payout_not_started as { message: string }).message });
    });
    it('only a pending payout starts or fails to start (never twice, never without a beneficiary)', () => {
      for (const s of [null, 'processing', 'completed', 'failed'] as const) {
        for (const fact of [FACTS.payout_started, FACTS.payout_not_started]) {
          const p = decideIntent(paid(s), fact);
          expect(moveOf(p), `${s} + ${fact.kind}`).to.equal(null);
          expect(p.outcome).to.equal(`not pending (${s})`);
        }
      }
    });
    it('its transaction completed: processing -> completed; failed: pending or processing -> failed with its failure', () => {
      expect(moveOf(decideIntent(paid('processing'), FACTS.payout_ended))).to.deep.equal(['processing', 'completed', 'payout_completed']);
      const failed = decideIntent(paid('processing'), { kind: 'payout_ended', to: 'failed', failure: { code: 'payout_declined', message: 'Declined.' } });
      expect(moveOf(failed)).to.deep.equal(['processing', 'failed', 'payout_declined']);
      expect(failed.moves[0].set).to.deep.equal({ payout_error: 'Declined.' });
      const bare = decideIntent(paid('pending'), { kind: 'payout_ended', to: 'failed', failure: null });
      expect(moveOf(bare)).to.deep.equal(['pending', 'failed', 'payout_failed']);
      expect(bare.moves[0].set).to.deep.equal({ payout_error: 'The payout failed.' });
    });
    it('an end after the payout ended, or a completion before it started: nothing', () => {
      for (const s of ['completed', 'failed', null] as const) {
        expect(moveOf(decideIntent(paid(s), FACTS.payout_ended)), `${s}`).to.equal(null);
        expect(moveOf(decideIntent(paid(s), { kind: 'payout_ended', to: 'failed', failure: null })), `${s}`).to.equal(null);
      }
      expect(moveOf(decideIntent(paid('pending'), FACTS.payout_ended))).to.equal(null);
    });
  });

  it('a fact decided twice on the state its first plan leaves plans nothing the second time', () => {
    const after = (i: IntentSnapshot, p: Plan): IntentSnapshot => {
      const m = p.moves[0];
      if (m.machine === INTENT_PAYOUT_MACHINE) return { ...i, payoutStatus: m.to as PayoutStatus };
      return { ...i, status: m.to as PaymentIntentStatus, collectionAttempts: (m.set?.collection_attempts as number) ?? i.collectionAttempts };
    };
    const cases: [IntentSnapshot, IntentFact][] = [
      [intent('awaiting_payment'), FACTS.cancel],
      [intent('awaiting_payment'), FACTS.collect],
      [intent('processing'), FACTS.prompt_ended],
      [intent('awaiting_payment', { expiresAt: earlier }), FACTS.expiry_tick],
      [intent('awaiting_payment', { received: 100n }), FACTS.payment_counted],
      [intent('processing', { received: 100n, confirmed: 100n, hasBeneficiary: true }), FACTS.payment_confirmed],
      [intent('processing'), FACTS.payment_reversed],
      [intent('completed', { payoutStatus: 'pending' }), FACTS.payout_started],
      [intent('completed', { payoutStatus: 'pending' }), FACTS.payout_not_started],
      [intent('completed', { payoutStatus: 'processing' }), FACTS.payout_ended],
    ];
    for (const [i, fact] of cases) {
      const first = decideIntent(i, fact);
      expect(first.moves, fact.kind).to.have.length(1);
      expect(moveOf(decideIntent(after(i, first), fact)), `${fact.kind} again`).to.equal(null);
    }
  });
});

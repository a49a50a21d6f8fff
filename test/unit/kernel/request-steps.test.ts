import { expect } from 'chai';
import { decideRequestStep, type RequestStep, type SendStep, type StoredRequest } from '../../../shared/kernel/request-steps.js';
import { finalAnswerOf, PAYOUT_ANSWERS, type PayoutAnswer } from '../../../shared/kernel/payout-answers.js';
import { PROVIDER_REQUEST_STATUSES } from '../../../shared/domain/machines.js';

const DARAJA = { namesRequests: false };
const MOMO = { namesRequests: true };
type Kind = 'collection' | 'payout';

/** Every stored request a claim can answer: never claimed, or each status x answer x sends x whether it was named. */
function everyStored(): (StoredRequest | null)[] {
  const all: (StoredRequest | null)[] = [null];
  for (const status of PROVIDER_REQUEST_STATUSES) {
    for (const answer of [null, ...PAYOUT_ANSWERS] as (PayoutAnswer | null)[]) {
      for (const sends of [0, 1, 2]) {
        for (const provider_reference of [null, 'ref-1']) all.push({ status, provider_reference, sends, answer } as StoredRequest);
      }
    }
  }
  return all;
}

const send = (newId: boolean, overRefusal: boolean): SendStep => ({ kind: 'send', newId, overRefusal });
const answered = (live: StoredRequest | null) => live && finalAnswerOf({ environment: 'live', status: live.status, answer: live.answer });
const isFinal = (status: string) => status === 'succeeded' || status === 'declined' || status === 'rejected';

// The adapters' own branches before the kernel decided their steps (daraja-provider.ts payout()/collect(), momo-provider.ts
// send()), transcribed as they were: the kernel's answer must be exactly theirs for every stored request.
function darajaBefore(kind: Kind, previous: StoredRequest | null, resendRefused: boolean): RequestStep {
  if (kind === 'payout') {
    const a = answered(previous);
    if (previous && (a === 'paid' || (a === 'failed_permanent' && !resendRefused))) return { kind: 'answer', outcome: previous };
    if (previous && !a) return { kind: 'ask', providerReference: previous.provider_reference, absent: send(false, resendRefused), ended: null };
    return send(false, resendRefused);
  }
  if (previous && previous.status !== 'temporary_failure' && previous.status !== 'sending') return { kind: 'answer', outcome: previous };
  const after: RequestStep = previous?.status === 'sending' && previous.sends > 0 ? { kind: 'wait' } : send(false, false);
  if (previous?.provider_reference) return { kind: 'ask', providerReference: previous.provider_reference, absent: after as SendStep, ended: null };
  return after;
}

function momoBefore(kind: Kind, previous: StoredRequest | null, resendRefused: boolean): RequestStep {
  const a = previous && kind === 'payout' ? answered(previous) : null;
  const overRefusal = a === 'failed_permanent' && resendRefused;
  const ended = a === 'failed_temporary' || overRefusal;
  if (previous && previous.status !== 'sending' && isFinal(previous.status) && !ended) return { kind: 'answer', outcome: previous };
  if (previous && !ended && previous.provider_reference) return { kind: 'ask', providerReference: previous.provider_reference, absent: send(false, overRefusal), ended: send(true, overRefusal) };
  return send(ended, overRefusal);
}

describe('kernel: whether a live provider request may leave again (request-steps.ts)', () => {
  for (const kind of ['collection', 'payout'] as const) {
    for (const resendRefused of [false, true]) {
      it(`Daraja, ${kind}, resendRefused ${resendRefused}: exactly the adapter's rule before, for every stored request`, () => {
        for (const stored of everyStored()) {
          expect(decideRequestStep(kind, stored, { resendRefused, provider: DARAJA }), JSON.stringify(stored)).to.deep.equal(darajaBefore(kind, stored, resendRefused));
        }
      });
      it(`MTN MoMo, ${kind}, resendRefused ${resendRefused}: exactly the adapter's rule before, for every stored request`, () => {
        for (const stored of everyStored()) {
          expect(decideRequestStep(kind, stored, { resendRefused, provider: MOMO }), JSON.stringify(stored)).to.deep.equal(momoBefore(kind, stored, resendRefused));
        }
      });
    }
  }

  it('a first request is sent (under its own name)', () => {
    for (const provider of [DARAJA, MOMO]) {
      for (const kind of ['collection', 'payout'] as const) expect(decideRequestStep(kind, null, { resendRefused: false, provider })).to.deep.equal(send(false, false));
    }
  });

  it('a payout is never sent again while it may still pay: a Result alone (a claim, no final answer) asks the status check first', () => {
    for (const provider of [DARAJA, MOMO]) {
      for (const status of ['sending', 'pending', 'temporary_failure'] as const) {
        const step = decideRequestStep('payout', { status, provider_reference: 'ref-1', sends: 1, answer: null }, { resendRefused: true, provider });
        // A live temporary_failure without a status answer is not final: asked about too.
        expect(step.kind, `${provider.namesRequests ? 'MoMo' : 'Daraja'} ${status}`).to.equal('ask');
      }
    }
  });

  it('a payout paid is answered, whatever resendRefused says; one refused for good goes again only over a refusal', () => {
    for (const provider of [DARAJA, MOMO]) {
      const paid = { status: 'succeeded' as const, provider_reference: 'ref-1', sends: 1, answer: 'paid' as const };
      expect(decideRequestStep('payout', paid, { resendRefused: true, provider }).kind).to.equal('answer');
      const refused = { status: 'rejected' as const, provider_reference: 'ref-1', sends: 1, answer: 'failed_permanent' as const };
      expect(decideRequestStep('payout', refused, { resendRefused: false, provider }).kind).to.equal('answer');
      expect(decideRequestStep('payout', refused, { resendRefused: true, provider })).to.deep.include({ kind: 'send', overRefusal: true });
    }
  });

  it('a payer is never prompted twice: a Daraja prompt that left unanswered is asked about or waited for, never sent', () => {
    const left = { status: 'sending' as const, provider_reference: null, sends: 1, answer: null };
    expect(decideRequestStep('collection', left, { resendRefused: true, provider: DARAJA })).to.deep.equal({ kind: 'wait' });
    const named = decideRequestStep('collection', { ...left, provider_reference: 'ws_CO_1' }, { resendRefused: true, provider: DARAJA });
    expect(named).to.deep.equal({ kind: 'ask', providerReference: 'ws_CO_1', absent: { kind: 'wait' }, ended: null });
    // Taken (pending) or answered: the stored answer stands.
    for (const status of ['pending', 'succeeded', 'declined', 'rejected'] as const) {
      expect(decideRequestStep('collection', { ...left, status }, { resendRefused: true, provider: DARAJA }).kind).to.equal('answer');
    }
    // MTN's prompt goes again only under the same X-Reference-Id (MTN answers 409 to a second one), never a new one.
    const momo = decideRequestStep('collection', { ...left, provider_reference: 'uuid-1' }, { resendRefused: true, provider: MOMO });
    expect(momo).to.deep.equal({ kind: 'ask', providerReference: 'uuid-1', absent: send(false, false), ended: send(true, false) });
    expect(decideRequestStep('collection', { ...left, status: 'declined', answer: 'failed_temporary' }, { resendRefused: true, provider: MOMO }).kind).to.equal('answer');
  });

  it('MTN MoMo: a payout failed for now goes again under a new X-Reference-Id, without asking', () => {
    const failed = { status: 'temporary_failure' as const, provider_reference: 'uuid-1', sends: 1, answer: 'failed_temporary' as const };
    expect(decideRequestStep('payout', failed, { resendRefused: false, provider: MOMO })).to.deep.equal(send(true, false));
    expect(decideRequestStep('payout', failed, { resendRefused: false, provider: DARAJA })).to.deep.equal(send(false, false));
  });
});

import { expect } from 'chai';
import {
  decideAnswer, decideSandboxRepeat, decideSend, decideStatusAnswer, decideSuccess, outcomeOfRow, outcomeSet, type RequestChange, type RequestSnapshot,
} from '../../../shared/kernel/provider-records.js';
import { NOW } from '../../../shared/kernel/plan.js';
import { PROVIDER_REQUEST_MACHINE, PROVIDER_REQUEST_STATUSES, sourcesOf, type ProviderRequestStatus } from '../../../shared/domain/machines.js';
import type { ProviderOutcome } from '../../../shared/providers/provider.js';

const request = (over: Partial<RequestSnapshot> = {}): RequestSnapshot => ({
  id: 'r1', status: 'pending', ended: false, sends: 1, evaluations: 1, providerReference: 'ws_CO_1', answer: null, conversationId: null, ...over,
});
const declined: ProviderOutcome = { status: 'declined', provider_reference: 'ws_CO_1', failure: { code: 'collection_declined', message: 'The payer cancelled.' } };
const paid: ProviderOutcome = { status: 'succeeded', provider_reference: 'ws_CO_1', receipt: 'RKT1' };

/** The move as [from, to] with the columns it sets, or the kind when it moves nothing. */
const moved = (c: RequestChange) => (c.kind === 'move' ? [c.move.from, c.move.to] : c.kind);

/** A move the decisions make must be one the machine allows (moveRecord would refuse it otherwise). */
function allowed(c: RequestChange): void {
  if (c.kind !== 'move') return;
  expect(sourcesOf(PROVIDER_REQUEST_MACHINE, c.move.to as ProviderRequestStatus), `${c.move.from} -> ${c.move.to}`).to.include(c.move.from);
}

describe('kernel: a provider request\'s outcome (provider_requests, compare-and-set from the status read)', () => {
  it('an answer replaces one that is not final, whole; a final answer stored first is kept (a later pending one changes nothing)', () => {
    const answered = decideAnswer(request({ status: 'sending' }), declined);
    allowed(answered);
    expect(moved(answered)).to.deep.equal(['sending', 'declined']);
    expect(answered.kind === 'move' && answered.move.set).to.deep.equal({
      provider_reference: 'ws_CO_1', receipt: null, failure: declined.failure, ended: false, answer: null, conversation_id: null, updated_at: NOW,
    });
    for (const status of ['succeeded', 'declined', 'rejected'] as const) {
      expect(decideAnswer(request({ status }), { status: 'pending', provider_reference: 'ws_CO_1' }).kind, status).to.equal('keep');
    }
    allowed(decideAnswer(request({ status: 'pending' }), { status: 'pending', provider_reference: 'ws_CO_1' }));
    allowed(decideAnswer(request({ status: 'temporary_failure' }), paid));
  });

  it('an answer keeps the final answer and the request\'s id known unless it gives its own; the compare-and-set covers both', () => {
    const kept = decideAnswer(request({ answer: 'absent', conversationId: 'AG_1' }), { status: 'temporary_failure', provider_reference: 'AG_1' });
    expect(kept.kind === 'move' && [kept.move.set?.answer, kept.move.set?.conversation_id, kept.unchanged]).to.deep.equal(['absent', 'AG_1', { answer: 'absent', conversation_id: 'AG_1' }]);
    const given = decideAnswer(request({ answer: 'absent', conversationId: 'AG_1' }), { status: 'pending', provider_reference: 'AG_2' }, { answer: 'failed_temporary', conversationId: 'AG_2' });
    expect(given.kind === 'move' && [given.move.set?.answer, given.move.set?.conversation_id]).to.deep.equal(['failed_temporary', 'AG_2']);
  });

  it('a new send resets what was known of the earlier request and counts a send; under the sends read only', () => {
    const sent = decideSend(request({ status: 'temporary_failure', answer: 'failed_temporary', conversationId: 'AG_1', sends: 2 }));
    allowed(sent);
    expect(moved(sent)).to.deep.equal(['temporary_failure', 'sending']);
    expect(sent.kind === 'move' && [sent.move.set, sent.unchanged]).to.deep.equal([{
      provider_reference: 'ws_CO_1', receipt: null, failure: null, ended: false, answer: null, conversation_id: null, status_queries: [], claimed: null, sends: 3, updated_at: NOW,
    }, { sends: 2 }]);
    const renamed = decideSend(request({ status: 'sending', sends: 0 }), 'uuid-2', 0);
    expect(renamed.kind === 'move' && [renamed.move.set?.provider_reference, renamed.move.set?.conversation_id]).to.deep.equal(['uuid-2', 'uuid-2']);
    expect(decideSend(request({ sends: 2 }), undefined, 1).kind).to.equal('keep');
  });

  it('a final answer is never sent again, unless the provider said the request ended without moving money', () => {
    for (const status of ['succeeded', 'declined', 'rejected'] as const) {
      expect(decideSend(request({ status })).kind, status).to.equal('keep');
      const again = decideSend(request({ status, ended: true }));
      allowed(again);
      expect(moved(again), status).to.deep.equal([status, 'sending']);
    }
  });

  it('an on-ramp\'s fiat refund goes again over a refusal for good (overRefusal), never over a success', () => {
    const again = decideSend(request({ status: 'rejected', answer: 'failed_permanent', sends: 1 }), undefined, undefined, true);
    allowed(again);
    expect(moved(again)).to.deep.equal(['rejected', 'sending']);
    expect(again.kind === 'move' && [again.move.set?.answer, again.move.set?.sends]).to.deep.equal([null, 2]);
    // The table's guard: only an on-ramp's payout (its fiat refund), whatever the code decides.
    expect(PROVIDER_REQUEST_MACHINE.guards?.rejected?.('sending', 't', undefined)).to.match(/^\(t\.ended OR \(t\.kind = 'payout' .*o\.direction = 'onramp'\)\)\)$/s);
    // Never over a success, nor a collection's decline.
    expect(decideSend(request({ status: 'rejected', answer: 'paid' }), undefined, undefined, true).kind).to.equal('keep');
    expect(decideSend(request({ status: 'declined' }), undefined, undefined, true).kind).to.equal('keep');
    expect(decideSend(request({ status: 'succeeded', answer: 'paid' }), undefined, undefined, true).kind).to.equal('keep');
    expect(decideSend(request({ status: 'rejected', sends: 2 }), undefined, 1, true).kind).to.equal('keep');
  });

  it('a payout\'s status answer: over an answer not final it moves the status; over a final one it records the answer beside it', () => {
    const over = decideStatusAnswer(request({ status: 'pending' }), 'failed_temporary', { status: 'temporary_failure', provider_reference: 'AG_1', failure: { code: 'provider_unavailable', message: 'Later.' } });
    allowed(over);
    expect(over.kind === 'move' && [over.move.to, over.move.set?.answer, over.move.set?.claimed]).to.deep.equal(['temporary_failure', 'failed_temporary', null]);
    expect(decideStatusAnswer(request({ status: 'rejected' }), 'failed_permanent', declined)).to.deep.equal({ kind: 'fields', set: { answer: 'failed_permanent', claimed: null, updated_at: NOW } });
  });

  it('a collection\'s success is recorded over any answer but an earlier success (a late success after a decline)', () => {
    for (const status of ['sending', 'pending', 'temporary_failure', 'declined', 'rejected'] as const) {
      const late = decideSuccess(request({ status }), paid);
      allowed(late);
      expect(moved(late), status).to.deep.equal([status, 'succeeded']);
    }
    expect(decideSuccess(request({ status: 'succeeded' }), paid).kind).to.equal('keep');
    expect(decideSuccess(request(), declined).kind).to.equal('keep');
  });

  it('the sandbox evaluates a temporary failure again (one more evaluation), and nothing else', () => {
    const again = decideSandboxRepeat(request({ status: 'temporary_failure', evaluations: 2 }), paid);
    allowed(again);
    expect(again.kind === 'move' && [again.move.to, again.move.set?.evaluations, again.unchanged]).to.deep.equal(['succeeded', 3, { evaluations: 2 }]);
    for (const status of PROVIDER_REQUEST_STATUSES.filter((s) => s !== 'temporary_failure')) expect(decideSandboxRepeat(request({ status }), paid).kind, status).to.equal('keep');
  });

  it('the columns read back as the port\'s outcome (absent facts left out), and an outcome as its columns', () => {
    const row = { status: 'succeeded' as const, provider_reference: 'ws_CO_1', receipt: 'RKT1', failure: null, ended: false };
    expect(outcomeOfRow(row)).to.deep.equal(paid);
    expect(outcomeOfRow({ ...row, status: 'sending', receipt: null })).to.deep.equal({ status: 'sending', provider_reference: 'ws_CO_1' });
    expect(outcomeOfRow({ ...row, status: 'temporary_failure', receipt: null, failure: declined.failure!, ended: true }))
      .to.deep.equal({ status: 'temporary_failure', provider_reference: 'ws_CO_1', failure: declined.failure, ended: true });
    expect(outcomeSet(paid)).to.deep.equal({ provider_reference: 'ws_CO_1', receipt: 'RKT1', failure: null, ended: false });
  });

  it('the machine: final answers leave only toward a new send (guarded by ended) or a late success', () => {
    expect(PROVIDER_REQUEST_MACHINE.moves.succeeded).to.deep.equal(['sending']);
    expect(PROVIDER_REQUEST_MACHINE.guards?.declined?.('sending', 't', undefined)).to.equal('t.ended');
    expect(PROVIDER_REQUEST_MACHINE.guards?.declined?.('succeeded', 't', undefined)).to.equal(null);
    expect(sourcesOf(PROVIDER_REQUEST_MACHINE, 'pending')).to.deep.equal(['sending', 'pending', 'temporary_failure']);
  });
});

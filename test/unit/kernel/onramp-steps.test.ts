import { expect } from 'chai';
import { decideOnramp, type OnrampFact, type OnrampSnapshot } from '../../../shared/kernel/onramp-steps.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { NOW } from '../../../shared/kernel/plan.js';
import { TRANSACTION_MACHINE, TRANSACTION_STATUSES, type TransactionStatus } from '../../../shared/domain/machines.js';
import type { ProviderStatus } from '../../../shared/providers/provider.js';

const scope = { businessId: 'b', environment: 'live' as const };
const wallet = { kind: 'wallet' as const, walletId: 'w1', chain: 'base', asset: 'USDC' };
const deliver = { name: 'onramp.deliver' as const, id: 'onramp.deliver-tx1-0', data: { transactionId: 'tx1' }, delayMs: 0 };
const declined = { code: 'collection_declined', message: 'The payer cancelled the M-Pesa prompt (ResultCode 1032)' };
const owed = { status: 'pending' as const, amount: '1300.00', currency: 'KES', to_address: null, transaction_hash: null, phone_number: '2547****678', provider_reference: null };
const pay = { name: 'onramp.refund' as const, id: 'onramp.refund-tx1-0', data: { transactionId: 'tx1' } };
const reverted = { code: 'delivery_failed', message: 'The USDC delivery was reverted on chain: reverted' };
const noResult = { code: 'provider_unavailable', message: 'M-Pesa gave no result after 5 status checks.' };

function onramp(status: TransactionStatus, over: Partial<OnrampSnapshot> = {}): OnrampSnapshot {
  return {
    id: 'tx1', scope, status, stalledAt: null, providerReference: 'ws_CO_1', failureCode: null, refunded: false, refundStatus: null, refundOwed: owed,
    delivery: { amount: 1_000_000n, walletId: 'w1', account: wallet as never }, ...over,
  };
}
const outcome = (status: ProviderStatus) => ({ status, provider_reference: 'ws_CO_1', receipt: status === 'succeeded' ? 'RCP1' : undefined });

const FACTS: Record<string, OnrampFact> = {
  'prompt_requested pending': { kind: 'prompt_requested', outcome: outcome('pending') },
  'prompt_requested succeeded': { kind: 'prompt_requested', outcome: outcome('succeeded') },
  'prompt_requested declined': { kind: 'prompt_requested', outcome: outcome('declined') },
  'prompt_requested temporary': { kind: 'prompt_requested', outcome: outcome('temporary_failure') },
  prompt_refused: { kind: 'prompt_refused', failure: declined, providerReference: 'ws_CO_1' },
  prompt_paid: { kind: 'prompt_paid', receipt: 'RCP1', deliver },
  collect_unavailable: { kind: 'collect_unavailable', reason: 'timeout' },
  collection_unpaid: { kind: 'collection_unpaid', failure: declined },
  collection_stalled: { kind: 'collection_stalled', failure: noResult },
  collection_paid: { kind: 'collection_paid', receipt: 'RCP1', providerReference: 'ws_CO_2', deliver },
  delivery_started: { kind: 'delivery_started' },
  delivered: { kind: 'delivered', hash: '0xabc' },
  delivery_failed: { kind: 'delivery_failed', failure: reverted, pay },
};

/** Where each fact moves an on-ramp from (no stall, no failure, nothing returned), and to; every other status plans nothing. */
const MOVES: Record<string, [TransactionStatus[], TransactionStatus] | null> = {
  'prompt_requested pending': [['created'], 'awaiting_funds'],
  'prompt_requested succeeded': [['created'], 'awaiting_funds'],
  'prompt_requested declined': [['created'], 'awaiting_funds'],
  'prompt_requested temporary': null,
  prompt_refused: [['awaiting_funds'], 'failed'],
  prompt_paid: [['awaiting_funds'], 'funded'],
  collect_unavailable: [['created'], 'action_required'],
  collection_unpaid: [['awaiting_funds'], 'failed'],
  collection_stalled: [['awaiting_funds'], 'action_required'],
  collection_paid: [['awaiting_funds'], 'funded'],
  delivery_started: [['funded'], 'processing'],
  delivered: [['processing'], 'completed'],
  delivery_failed: [['funded', 'processing'], 'failed'],
};

describe('kernel: an on-ramp\'s collection and delivery', () => {
  for (const [name, fact] of Object.entries(FACTS)) {
    for (const status of TRANSACTION_STATUSES) {
      it(`${name} from ${status}`, () => {
        const p = decideOnramp(onramp(status), fact);
        assertPlan(p);
        const expected = MOVES[name];
        if (!expected || !expected[0].includes(status)) {
          expect(p.moves, 'a fact its status does not wait for plans nothing').to.deep.equal([]);
          expect([p.entries, p.jobs]).to.deep.equal([[], []]);
          return;
        }
        // A failed delivery writes the refund owed first; every other fact moves the transaction alone.
        expect(p.moves).to.have.length(name === 'delivery_failed' ? 2 : 1);
        const m = p.moves[p.moves.length - 1];
        expect([m.machine, m.id, m.from, m.to]).to.deep.equal([TRANSACTION_MACHINE, 'tx1', status, expected[1]]);
        // Only the delivery moves money; only funding stages the delivery, only its failure the fiat's payout.
        expect(p.entries.length).to.equal(expected[1] === 'completed' ? 1 : 0);
        expect(p.jobs).to.deep.equal(expected[1] === 'funded' ? [deliver] : name === 'delivery_failed' ? [pay] : []);
      });
    }
  }

  it('a repeated fact plans nothing once its move is made', () => {
    for (const [name, fact] of Object.entries(FACTS)) {
      const first = decideOnramp(onramp(MOVES[name]?.[0][0] ?? 'created'), fact);
      const after = first.moves[0]?.to as TransactionStatus | undefined;
      if (after) expect(decideOnramp(onramp(after), fact).moves, name).to.deep.equal([]);
    }
  });

  it('the outcomes a caller returns for what moves nothing', () => {
    expect(decideOnramp(onramp('awaiting_funds'), FACTS['prompt_requested pending']).outcome).to.equal('not created (awaiting_funds)');
    expect(decideOnramp(onramp('created'), FACTS['prompt_requested temporary']).outcome).to.equal('temporary');
    expect(decideOnramp(onramp('funded'), FACTS.collection_unpaid).outcome).to.equal('unchanged (funded)');
    expect(decideOnramp(onramp('processing'), FACTS.delivery_started).outcome).to.equal('sending');
    expect(decideOnramp(onramp('completed'), FACTS.delivery_started).outcome).to.equal('not funded (completed)');
    expect(decideOnramp(onramp('completed'), FACTS.delivered).outcome).to.equal('not processing (completed)');
  });

  it('what each move sets, and why', () => {
    const set = (fact: OnrampFact, status: TransactionStatus, over: Partial<OnrampSnapshot> = {}) => {
      const m = decideOnramp(onramp(status, over), fact).moves[0];
      return [m.set, m.reason];
    };
    expect(set(FACTS['prompt_requested succeeded'], 'created')).to.deep.equal([{ provider_reference: 'ws_CO_1' }, undefined]);
    expect(set(FACTS.prompt_refused, 'awaiting_funds')).to.deep.equal([{ failure: declined, provider_reference: 'ws_CO_1' }, 'collection_declined']);
    expect(set(FACTS.prompt_paid, 'awaiting_funds')).to.deep.equal([{ receipt: 'RCP1' }, undefined]);
    expect(set(FACTS.collect_unavailable, 'created')).to.deep.equal([
      { stalled_at: 'created', failure: { code: 'provider_unavailable', message: 'The collection provider did not respond: timeout' } }, 'provider_unavailable',
    ]);
    expect(set({ kind: 'collection_unpaid', failure: { code: 'collection_timeout', message: 'no answer' } }, 'awaiting_funds'))
      .to.deep.equal([{ failure: { code: 'collection_timeout', message: 'no answer' } }, 'collection_timeout']);
    expect(set(FACTS.collection_stalled, 'awaiting_funds')).to.deep.equal([{ stalled_at: 'awaiting_funds', failure: noResult }, 'provider_unavailable']);
    expect(set(FACTS.collection_paid, 'awaiting_funds')).to.deep.equal([{ receipt: 'RCP1', provider_reference: 'ws_CO_2' }, undefined]);
    // A success that names no request keeps the one the on-ramp knows.
    expect(set({ ...FACTS.collection_paid, providerReference: null } as OnrampFact, 'awaiting_funds')).to.deep.equal([{ receipt: 'RCP1', provider_reference: 'ws_CO_1' }, undefined]);
    expect(set(FACTS.delivered, 'processing')).to.deep.equal([{ destination_transaction_hash: '0xabc', completed_at: NOW }, undefined]);
  });

  it('a late success funds a failed on-ramp only when its prompt ended unpaid and nothing was returned', () => {
    const late = decideOnramp(onramp('failed', { failureCode: 'collection_timeout' }), FACTS.collection_paid);
    expect(late.outcome).to.equal('funded (late)');
    expect([late.moves[0].from, late.moves[0].to, late.moves[0].reason, late.moves[0].set?.failure]).to.deep.equal(['failed', 'funded', 'late_collection', null]);
    expect(late.jobs).to.deep.equal([deliver]);
    expect(decideOnramp(onramp('failed', { failureCode: 'collection_timeout', refunded: true }), FACTS.collection_paid).moves).to.deep.equal([]);
    expect(decideOnramp(onramp('failed', { failureCode: 'delivery_failed' }), FACTS.collection_paid).outcome).to.equal('unchanged (failed)');
  });

  it('a success for a collection stalled in action_required resumes it first (then funds it as a second decision)', () => {
    for (const stalledAt of ['created', 'awaiting_funds'] as const) {
      const p = decideOnramp(onramp('action_required', { stalledAt }), FACTS.collection_paid);
      expect([p.outcome, p.moves[0].to, p.moves[0].reason, p.jobs]).to.deep.equal(['resumed', 'awaiting_funds', 'collection_succeeded', []]);
    }
    expect(decideOnramp(onramp('action_required', { stalledAt: 'funded' }), FACTS.collection_paid).outcome).to.equal('unchanged (action_required)');
  });

  it('a failed delivery, from its step or stalled in it, fails the on-ramp with the fiat owed to its payer', () => {
    for (const [status, stalledAt] of [['funded', null], ['processing', null], ['action_required', 'funded'], ['action_required', 'processing']] as const) {
      const p = decideOnramp(onramp(status, { stalledAt }), FACTS.delivery_failed);
      expect(p.outcome).to.equal('failed');
      const { status: owedStatus, ...data } = owed;
      expect(p.moves[0]).to.deep.include({ id: 'tx1', from: null, to: owedStatus });
      expect(p.moves[0].set).to.deep.include({ refund: data });
      expect([p.moves[1].from, p.moves[1].to, p.moves[1].set, p.moves[1].reason]).to.deep.equal([status, 'failed', { failure: reverted }, 'delivery_failed']);
    }
    expect(decideOnramp(onramp('action_required', { stalledAt: 'awaiting_funds' }), FACTS.delivery_failed).outcome).to.equal('unchanged (action_required)');
  });

  it('the delivery credits the wallet from provider clearing, named by the hash', () => {
    const [{ entry }] = decideOnramp(onramp('processing'), FACTS.delivered).entries;
    expect(entry).to.deep.equal({
      kind: 'onramp_delivery', reference: 'onramp-delivery-tx1', metadata: { transaction_id: 'tx1', wallet_id: 'w1', transaction_hash: '0xabc' },
      postings: [{ account: { kind: 'provider_clearing', asset: 'USDC' }, amount: -1_000_000n }, { account: wallet, amount: 1_000_000n }],
    });
  });
});

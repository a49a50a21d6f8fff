import { expect } from 'chai';
import { answerOfSend, decideOfframpPayout, type PayoutFact, type PayoutSnapshot } from '../../../shared/kernel/offramp-payouts.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { NOW } from '../../../shared/kernel/plan.js';
import { TRANSACTION_MACHINE, TRANSACTION_STATUSES, type TransactionStatus } from '../../../shared/domain/machines.js';
import type { ProviderStatus } from '../../../shared/providers/provider.js';

const scope = { businessId: 'b', environment: 'live' as const };
const payoutEntry = {
  kind: 'offramp_payout', reference: 'payout-tx1', metadata: { transaction_id: 'tx1' },
  postings: [
    { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: -100n },
    { account: { kind: 'provider_clearing' as const, asset: 'USDC' }, amount: 99n },
    { account: { kind: 'platform_fees' as const, asset: 'USDC' }, amount: 1n },
  ],
};
const refused = { code: 'payout_rejected', message: 'M-Pesa refused the payout.' };
const stalled = { code: 'provider_unavailable', message: 'M-Pesa could not complete the payout for now. (after 3 attempts)' };

const snapshot = (status: TransactionStatus): PayoutSnapshot => ({ id: 'tx1', scope, status, payoutEntry });
const outcome = (status: ProviderStatus) => ({ status, provider_reference: 'AG_1', receipt: status === 'succeeded' ? 'RCP1' : undefined });

const FACTS: Record<string, PayoutFact> = {
  'sent pending': { kind: 'sent', outcome: outcome('pending') },
  'sent succeeded': { kind: 'sent', outcome: outcome('succeeded') },
  'sent rejected': { kind: 'sent', outcome: outcome('rejected') },
  'sent temporary': { kind: 'sent', outcome: outcome('temporary_failure') },
  paid: { kind: 'paid', providerReference: 'AG_1', receipt: 'RCP1' },
  refused: { kind: 'refused', providerReference: 'AG_1', failure: refused },
  stalled: { kind: 'stalled', failure: stalled },
  unavailable: { kind: 'unavailable', reason: 'timeout' },
};

/** Where each fact may move the off-ramp from, and to: every other status plans nothing. */
const MOVES: Record<string, [TransactionStatus, TransactionStatus] | null> = {
  'sent pending': ['funded', 'processing'],
  'sent succeeded': ['funded', 'processing'],
  'sent rejected': ['funded', 'processing'],
  'sent temporary': null,
  paid: ['processing', 'completed'],
  refused: ['processing', 'failed'],
  stalled: ['processing', 'action_required'],
  unavailable: ['funded', 'action_required'],
};

describe('kernel: an off-ramp payout', () => {
  for (const [name, fact] of Object.entries(FACTS)) {
    for (const status of TRANSACTION_STATUSES) {
      it(`${name} from ${status}`, () => {
        const p = decideOfframpPayout(snapshot(status), fact);
        assertPlan(p);
        expect(p.jobs).to.deep.equal([]);
        const expected = MOVES[name];
        if (!expected || expected[0] !== status) {
          expect(p.moves, 'a fact its status does not wait for plans nothing').to.deep.equal([]);
          expect(p.entries).to.deep.equal([]);
          expect(p.refund).to.equal(undefined);
          return;
        }
        expect(p.moves).to.have.length(1);
        const [m] = p.moves;
        expect([m.machine, m.id, m.from, m.to]).to.deep.equal([TRANSACTION_MACHINE, 'tx1', status, expected[1]]);
        expect(p.outcome).to.equal(expected[1]);
        // Only a payout paid moves money; only a refusal carries the refund.
        expect(p.entries).to.deep.equal(expected[1] === 'completed' ? [{ entry: payoutEntry }] : []);
        expect(p.refund).to.equal(expected[1] === 'failed' ? true : undefined);
      });
    }
  }

  it('the outcomes a caller returns for what moves nothing', () => {
    expect(decideOfframpPayout(snapshot('processing'), FACTS['sent pending']).outcome).to.equal('not funded (processing)');
    expect(decideOfframpPayout(snapshot('funded'), FACTS['sent temporary']).outcome).to.equal('temporary');
    expect(decideOfframpPayout(snapshot('completed'), FACTS.paid).outcome).to.equal('unchanged (completed)');
    expect(decideOfframpPayout(snapshot('failed'), FACTS.unavailable).outcome).to.equal('not funded (failed)');
  });

  it('what each move sets', () => {
    expect(decideOfframpPayout(snapshot('funded'), FACTS['sent succeeded']).moves[0].set).to.deep.equal({ provider_reference: 'AG_1' });
    expect(decideOfframpPayout(snapshot('processing'), FACTS.paid).moves[0].set).to.deep.equal({ completed_at: NOW, provider_reference: 'AG_1', receipt: 'RCP1' });
    const failed = decideOfframpPayout(snapshot('processing'), FACTS.refused).moves[0];
    expect([failed.set, failed.reason]).to.deep.equal([{ failure: refused, provider_reference: 'AG_1' }, 'payout_rejected']);
    const stall = decideOfframpPayout(snapshot('processing'), FACTS.stalled).moves[0];
    expect([stall.set, stall.reason]).to.deep.equal([{ stalled_at: 'funded', failure: stalled }, 'provider_unavailable']);
    const unavailable = decideOfframpPayout(snapshot('funded'), FACTS.unavailable).moves[0];
    expect(unavailable.set).to.deep.equal({
      stalled_at: 'funded', failure: { code: 'provider_unavailable', message: 'The payout provider did not accept the payout: timeout' },
    });
  });

  it('a repeated fact plans nothing once its move is made', () => {
    for (const [name, fact] of Object.entries(FACTS)) {
      const first = decideOfframpPayout(snapshot(MOVES[name]?.[0] ?? 'funded'), fact);
      const after = first.moves[0]?.to as TransactionStatus | undefined;
      if (after) expect(decideOfframpPayout(snapshot(after), fact).moves, name).to.deep.equal([]);
    }
  });

  it("a send's answer once taken: paid, refused (payout_rejected unless the provider said), or nothing while pending", () => {
    expect(answerOfSend(outcome('pending'))).to.equal(null);
    expect(answerOfSend(outcome('temporary_failure'))).to.equal(null);
    expect(answerOfSend(outcome('succeeded'))).to.deep.equal({ kind: 'paid', providerReference: 'AG_1', receipt: 'RCP1' });
    expect(answerOfSend(outcome('declined'))).to.deep.equal({ kind: 'refused', providerReference: 'AG_1', failure: { code: 'payout_rejected', message: 'The provider refused the payout.' } });
    const said = { ...outcome('rejected'), failure: { code: 'recipient_invalid', message: 'No such M-Pesa account.' } };
    expect(answerOfSend(said)).to.deep.equal({ kind: 'refused', providerReference: 'AG_1', failure: said.failure });
  });
});

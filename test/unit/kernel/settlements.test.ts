import { expect } from 'chai';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { NOW, type Plan } from '../../../shared/kernel/plan.js';
import { COUNT_NOW, decideSettlement, LATE_EXCESS, LATE_REASON, type SettlementFact, type SettlementSnapshot } from '../../../shared/kernel/settlements.js';
import {
  SETTLEMENT_MACHINE, SETTLEMENT_STATUSES, TRANSACTION_MACHINE, TRANSACTION_STATUSES, type SettlementStatus, type TransactionStatus,
} from '../../../shared/domain/machines.js';

const scope = { businessId: 'b', environment: 'live' as const };
const now = new Date('2026-11-28T12:00:00Z');
const earlier = new Date(now.getTime() - 60_000);
const later = new Date(now.getTime() + 60_000);
const dueAt = new Date(now.getTime() + 86_400_000);
const refundJob = { name: 'offramp.refund' as const, id: 'offramp.refund-tx1-1', data: { transactionId: 'tx1' }, delayMs: 86_400_000 };
const nextJob = { name: 'settlement.confirm' as const, id: 'settlement.confirm-tx1-0-2', data: { transactionId: 'tx1', round: 2 }, delayMs: 5000 };
const submitJob = { name: 'offramp.submit' as const, id: 'offramp.submit-tx1-1', data: { transactionId: 'tx1' }, delayMs: 5000 };
const reversal = {
  kind: 'offramp_deposit_reorg', reference: 'offramp_deposit_reorg:s1:0xabc:0:7', metadata: {},
  postings: [{ account: { kind: 'inbound_clearing' as const, asset: 'USDC' }, amount: 60n }, { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: -60n }],
};
const deposit = {
  kind: 'offramp_deposit', reference: 'offramp_deposit:s1:0xabc:0:7', metadata: {},
  postings: [{ account: { kind: 'inbound_clearing' as const, asset: 'USDC' }, amount: -60n }, { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: 60n }],
};
const autoRefund = { refund_due_at: dueAt, job: refundJob };
const seen = (over: Partial<Extract<SettlementFact, { kind: 'transfer_counted' }>> = {}): SettlementFact =>
  ({ kind: 'transfer_counted', isNew: true, deposit, countNow: false, next: nextJob, autoRefund, ...over });
const sweepJob = { name: 'settlement.sweep' as const, id: 'settlement.sweep-s1-100', data: { kind: 'settlement' as const, id: 's1', round: '100' } };

function settlement(status: SettlementStatus, txStatus: TransactionStatus, over: Partial<SettlementSnapshot> = {}): SettlementSnapshot {
  return {
    id: 's1', scope, status, received: 0n, totalRequired: 100n, receivedShown: '0.000000', totalRequiredShown: '0.000100', requiredConfirmations: 12,
    expiresAt: earlier, now, tx: { id: 'tx1', status: txStatus, retryCount: 0 }, ...over,
  };
}

const FACTS: Record<string, SettlementFact> = {
  expiry_tick: { kind: 'expiry_tick', autoRefund: { refund_due_at: dueAt, job: refundJob } },
  close: { kind: 'close', reason: 'refund_requested' },
  deep: { kind: 'depth_counted', confirmations: 12, deep: true, next: nextJob, sweep: sweepJob },
  shallow: { kind: 'depth_counted', confirmations: 3, deep: false, next: nextJob, sweep: sweepJob },
  unknown: { kind: 'depth_unknown', reason: 'rpc down', next: nextJob },
  reorged: { kind: 'reorged', reversals: [reversal], next: nextJob, submit: submitJob },
  transfer: seen(),
  transfer_again: seen({ isNew: false, deposit: null }),
  transfer_count_now: seen({ countNow: true }),
};

/** The plan's moves as `machine:from->to`. */
const movesOf = (p: Plan) => p.moves.map((m) => `${m.machine.resource}:${m.from}->${m.to}`);

describe('kernel: an off-ramp settlement', () => {
  it('answers a plan the machines allow for every fact from every settlement and transaction status', () => {
    for (const status of SETTLEMENT_STATUSES) {
      for (const txStatus of TRANSACTION_STATUSES) {
        for (const received of [0n, 40n, 100n, 140n]) {
          for (const [name, fact] of Object.entries(FACTS)) {
            const p = decideSettlement(settlement(status, txStatus, { received }), fact);
            expect(() => assertPlan(p), `${status}/${txStatus}/${received} ${name}`).not.to.throw();
            if (!['reorged', 'transfer', 'transfer_count_now'].includes(name)) expect(p.entries, 'only a transfer or a reorg posts').to.deep.equal([]);
            if (name.startsWith('transfer') && name !== 'transfer_again') expect(p.entries, 'a new transfer is always booked').to.deep.equal([{ entry: deposit }]);
            for (const m of p.moves) expect([SETTLEMENT_MACHINE, TRANSACTION_MACHINE]).to.include(m.machine);
            if (!p.moves.length && p.jobs.length) expect(p.jobs, `${status}/${txStatus} ${name}`).to.deep.equal([nextJob]);
            if (name === 'transfer_again' && !(txStatus === 'submitting' && ['confirming', 'underpaid', 'expired'].includes(status))) {
              expect([p.moves.length, p.jobs.length], `a log seen before: ${status}/${txStatus}`).to.deep.equal([0, 0]);
            }
          }
        }
      }
    }
  });

  describe('the expiry tick', () => {
    const tick = FACTS.expiry_tick;
    it('nothing received: the settlement expires and its off-ramp fails', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'created'), tick);
      expect(p.outcome).to.equal('expired');
      expect(movesOf(p)).to.deep.equal(['settlement:awaiting_transfer->expired', 'transaction:created->failed']);
      expect(p.moves[1].set).to.deep.equal({ failure: { code: 'settlement_expired', message: 'No transfer arrived before the settlement expired.' } });
      expect(p.moves[1].reason).to.equal('settlement_expired');
      expect(p.jobs).to.deep.equal([]);
    });

    it('part received: underpaid, the off-ramp left to the business with its automatic refund scheduled', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'created', { received: 40n, receivedShown: '0.000040' }), tick);
      expect(p.outcome).to.equal('underpaid');
      expect(movesOf(p)).to.deep.equal(['settlement:awaiting_transfer->underpaid', 'transaction:created->action_required']);
      expect(p.moves[1].set).to.deep.equal({
        stalled_at: 'created', refund_due_at: dueAt,
        failure: { code: 'underpaid', message: 'Less than total_required arrived before the settlement expired.', details: { received_amount: '0.000040', total_required: '0.000100' } },
      });
      expect(p.jobs).to.deep.equal([refundJob]);
    });

    it('underpaid while already waiting on the business: its reason and refund deadline kept', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'action_required', { received: 40n }), tick);
      expect(movesOf(p)).to.deep.equal(['settlement:awaiting_transfer->underpaid']);
      expect(p.jobs).to.deep.equal([]);
    });

    it('a managed wallet\'s send in flight is never expired', () => {
      for (const tx of ['signing', 'submitting'] as const) expect(decideSettlement(settlement('awaiting_transfer', tx), tick).outcome).to.equal(`send in flight (${tx})`);
    });

    it('a transaction already ended only closes its address', () => {
      for (const tx of ['failed', 'completed'] as const) {
        const p = decideSettlement(settlement('awaiting_transfer', tx), tick);
        expect([p.outcome, ...movesOf(p), p.moves[0].reason]).to.deep.equal(['closed', 'settlement:awaiting_transfer->expired', `transaction_${tx}`]);
      }
    });

    it('early, or on a settlement no longer awaiting its transfer (a duplicate tick), plans nothing', () => {
      expect(decideSettlement(settlement('awaiting_transfer', 'created', { expiresAt: later }), tick).moves).to.deep.equal([]);
      for (const status of SETTLEMENT_STATUSES.filter((s) => s !== 'awaiting_transfer')) {
        const p = decideSettlement(settlement(status, 'created'), tick);
        expect([p.outcome, p.moves.length, p.jobs.length]).to.deep.equal([`unchanged (${status})`, 0, 0]);
      }
    });
  });

  describe('closing', () => {
    it('expires an open settlement with the reason, and leaves a closed one alone', () => {
      for (const status of SETTLEMENT_STATUSES) {
        const p = decideSettlement(settlement(status, 'failed'), FACTS.close);
        if (['awaiting_transfer', 'confirming', 'underpaid'].includes(status)) {
          expect([...movesOf(p), p.moves[0].reason]).to.deep.equal([`settlement:${status}->expired`, 'refund_requested']);
        } else expect(p.moves).to.deep.equal([]);
      }
    });
  });

  describe('confirmations', () => {
    it('deep enough: confirmed (when and how deep), the off-ramp funded, the deposit swept', () => {
      const p = decideSettlement(settlement('confirming', 'awaiting_funds', { received: 100n }), FACTS.deep);
      expect(p.outcome).to.equal('funded');
      expect(movesOf(p)).to.deep.equal(['settlement:confirming->confirmed', 'transaction:awaiting_funds->funded']);
      expect(p.moves[0].set).to.deep.equal({ confirmed_at: NOW, confirmations: 12 });
      expect(p.jobs).to.deep.equal([sweepJob]);
    });

    it('the sandbox sweeps nothing', () => {
      const p = decideSettlement(settlement('confirming', 'awaiting_funds'), { ...FACTS.deep, sweep: null } as SettlementFact);
      expect(p.jobs).to.deep.equal([]);
    });

    it('not deep yet, or the chain unreadable: counted again later, nothing moved', () => {
      const shallow = decideSettlement(settlement('confirming', 'awaiting_funds'), FACTS.shallow);
      expect([shallow.outcome, shallow.moves.length, shallow.jobs]).to.deep.equal(['3/12', 0, [nextJob]]);
      const unknown = decideSettlement(settlement('confirming', 'awaiting_funds'), FACTS.unknown);
      expect([unknown.outcome, unknown.moves.length, unknown.jobs]).to.deep.equal(['unknown: rpc down', 0, [nextJob]]);
    });

    it('a stale count (the off-ramp moved on, the settlement already confirmed or reorged back) plans nothing', () => {
      for (const fact of [FACTS.deep, FACTS.shallow, FACTS.unknown, FACTS.reorged]) {
        for (const txStatus of TRANSACTION_STATUSES.filter((t) => t !== 'awaiting_funds')) {
          const p = decideSettlement(settlement('confirming', txStatus), fact);
          expect([p.outcome, p.moves.length, p.jobs.length]).to.deep.equal([`not awaiting funds (${txStatus})`, 0, 0]);
        }
        for (const status of SETTLEMENT_STATUSES.filter((s) => s !== 'confirming')) {
          const p = decideSettlement(settlement(status, 'awaiting_funds'), fact);
          expect([p.outcome, p.moves.length, p.jobs.length]).to.deep.equal([`settlement ${status}`, 0, 0]);
        }
      }
    });

    it('a reorg that leaves it short: its entries reversed, awaiting its transfer again, the off-ramp created again (a new step)', () => {
      const p = decideSettlement(settlement('confirming', 'awaiting_funds', { received: 40n }), FACTS.reorged);
      expect(p.outcome).to.equal('reorg: awaiting transfer again');
      expect(movesOf(p)).to.deep.equal(['settlement:confirming->awaiting_transfer', 'transaction:awaiting_funds->created']);
      expect(p.moves.map((m) => [m.set, m.reason])).to.deep.equal([[{ confirmations: 0 }, 'reorg'], [{ retry_count: 1 }, 'reorg']]);
      expect(p.entries).to.deep.equal([{ entry: reversal }]);
      expect(p.jobs).to.deep.equal([submitJob]);
      const external = decideSettlement(settlement('confirming', 'awaiting_funds', { received: 40n }), { ...FACTS.reorged, submit: null } as SettlementFact);
      expect(external.jobs).to.deep.equal([]);
    });

    it('a reorg that leaves it paid in full: its entries reversed, counted again', () => {
      const p = decideSettlement(settlement('confirming', 'awaiting_funds', { received: 100n }), FACTS.reorged);
      expect([p.outcome, p.moves.length, p.entries, p.jobs]).to.deep.equal(['reorg: still paid in full', 0, [{ entry: reversal }], [nextJob]]);
    });

    it('a reorg after confirmation (the settlement confirmed, the off-ramp funded) plans nothing: the count that saw it was stale', () => {
      for (const [status, tx] of [['confirmed', 'funded'], ['confirmed', 'processing'], ['confirmed', 'completed']] as const) {
        const p = decideSettlement(settlement(status, tx, { received: 40n }), FACTS.reorged);
        expect([p.moves.length, p.entries.length, p.jobs.length]).to.deep.equal([0, 0, 0]);
      }
    });

    it('a second deep count after the first confirmed plans nothing', () => {
      const p = decideSettlement(settlement('confirmed', 'funded'), FACTS.deep);
      expect([p.moves.length, p.jobs.length]).to.deep.equal([0, 0]);
    });
  });

  describe('a transfer to the deposit address', () => {
    it('short of total_required: booked, nothing moves', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'created', { received: 40n }), seen());
      expect([p.outcome, p.moves.length, p.jobs.length, p.entries]).to.deep.equal(['counted', 0, 0, [{ entry: deposit }]]);
    });

    it('paid in full (exact or over): confirming, the off-ramp awaiting its funds, its confirmations counted by a job', () => {
      for (const received of [100n, 140n]) {
        const p = decideSettlement(settlement('awaiting_transfer', 'created', { received }), seen());
        expect(movesOf(p)).to.deep.equal(['settlement:awaiting_transfer->confirming', 'transaction:created->awaiting_funds']);
        expect([p.outcome, p.jobs]).to.deep.equal(['confirming', [nextJob]]);
      }
    });

    it('with the chain at hand: no job, the caller counts at once', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'created', { received: 100n }), seen({ countNow: true }));
      expect([p.outcome, p.jobs]).to.deep.equal([COUNT_NOW, []]);
      expect(p.moves[0]).to.deep.include({ to: 'confirming', set: {} });
    });

    it('what the chain at hand already shows is recorded with the move to confirming, never past the required number', () => {
      for (const [shown, recorded] of [[1, 1], [30, 12]]) {
        const p = decideSettlement(settlement('awaiting_transfer', 'submitting', { received: 100n }), seen({ countNow: true, confirmations: shown }));
        expect(p.moves[0]).to.deep.include({ to: 'confirming', set: { confirmations: recorded } });
        expect(p.outcome).to.equal(COUNT_NOW);
      }
    });

    it('a top-up completing an underpayment the business was told of: its failure cleared', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'action_required', { received: 100n }), seen());
      expect(p.moves[1]).to.deep.include({ from: 'action_required', to: 'awaiting_funds', set: { failure: null, stalled_at: null } });
    });

    it('a managed wallet still signing: the settlement confirms, its submit job moves the off-ramp', () => {
      const p = decideSettlement(settlement('awaiting_transfer', 'signing', { received: 100n }), seen());
      expect([...movesOf(p), p.jobs.length]).to.deep.equal(['settlement:awaiting_transfer->confirming', 0]);
    });

    it('our own submission seen first by the watcher: the off-ramp awaits its funds', () => {
      const p = decideSettlement(settlement('confirming', 'submitting', { received: 100n }), seen({ isNew: false, deposit: null }));
      expect(movesOf(p)).to.deep.equal(['transaction:submitting->awaiting_funds']);
      expect(p.entries).to.deep.equal([]);
    });

    it('after the settlement closed, or its off-ramp failed: a late deposit, refunded on its own later', () => {
      for (const [status, tx] of [['expired', 'created'], ['underpaid', 'created'], ['awaiting_transfer', 'failed'], ['expired', 'failed']] as const) {
        const p = decideSettlement(settlement(status, tx, { received: 60n, receivedShown: '0.000060' }), seen());
        expect([p.outcome, ...movesOf(p)]).to.deep.equal(['late deposit', `transaction:${tx}->action_required`]);
        expect(p.moves[0].set).to.deep.equal({
          stalled_at: 'created', refund_due_at: dueAt,
          failure: { code: 'late_deposit', message: 'A transfer arrived after the settlement closed.', details: { received_amount: '0.000060', total_required: '0.000100' } },
        });
        expect(p.moves[0].reason).to.equal('late_deposit');
        expect(p.jobs).to.deep.equal([refundJob]);
      }
    });

    it('our own submission found its settlement closed: a late deposit, never left submitting', () => {
      const p = decideSettlement(settlement('expired', 'submitting'), seen({ isNew: false, deposit: null }));
      expect(movesOf(p)).to.deep.equal(['transaction:submitting->action_required']);
    });

    it('late on a completed off-ramp (an excess) or one already waiting on the business: booked, the caller completes it', () => {
      expect(decideSettlement(settlement('confirmed', 'completed'), seen()).outcome).to.equal(LATE_EXCESS);
      const waiting = decideSettlement(settlement('underpaid', 'action_required'), seen());
      expect([waiting.outcome, waiting.moves.length, waiting.entries.length]).to.deep.equal([LATE_REASON, 0, 1]);
    });

    it('more arriving while confirming or after confirmation (an overpayment): booked, nothing moves', () => {
      for (const [status, tx] of [['confirming', 'awaiting_funds'], ['confirmed', 'funded'], ['confirmed', 'processing']] as const) {
        const p = decideSettlement(settlement(status, tx, { received: 140n }), seen());
        expect([p.moves.length, p.jobs.length, p.entries.length]).to.deep.equal([0, 0, 1]);
      }
    });
  });
});

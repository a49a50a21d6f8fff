import { expect } from 'chai';
import { TRANSACTION_MACHINE, TRANSACTION_STATUSES, REFUND_MACHINE, type TransactionStatus } from '../../../shared/domain/machines.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { isEmpty, type Move } from '../../../shared/kernel/plan.js';
import {
  AUTO_REFUND_CODES, canRunAgain, decideFailure, decideRetry, decideSimulatedStall, decideStepFailed, type TxSnapshot,
} from '../../../shared/kernel/transaction-steps.js';
import type { JobRequest } from '../../../shared/queues/producer.js';

const scope = { businessId: 'b', environment: 'sandbox' as const };
const tx = (status: TransactionStatus, more: Partial<TxSnapshot> = {}): TxSnapshot => ({
  id: 'tx1', scope, status, direction: 'offramp', funding_type: 'managed_wallet', stalled_at: null, failure: null, retry_count: 2, ...more,
});
const resume = { name: 'offramp.submit', id: 'offramp.submit:tx1:3', data: { transactionId: 'tx1' }, delayMs: 0 } as JobRequest;
const moves = (p: { moves: Move[] }) => p.moves.map((m) => [m.machine.resource, m.from, m.to]);

describe('kernel: a transaction\'s retry, step failure, simulated stall and failure with its refund', () => {
  describe('decideRetry (POST /transactions/{id}/retry)', () => {
    it('back to the step it stalled in, a new retry count, the failure cleared, and the step\'s job staged with the move', () => {
      const p = decideRetry(tx('action_required', { stalled_at: 'signing', failure: { code: 'insufficient_funds' } }), { resume });
      assertPlan(p);
      expect(p.refused).to.equal(undefined);
      expect(p.moves).to.deep.equal([{ machine: TRANSACTION_MACHINE, id: 'tx1', from: 'action_required', to: 'signing', set: { retry_count: 3, failure: null, stalled_at: null }, reason: 'retry' }]);
      expect(p.jobs).to.deep.equal([resume]);
    });

    it('a step that waits on the outside world moves with no job', () => {
      const p = decideRetry(tx('action_required', { funding_type: 'external_wallet', stalled_at: 'awaiting_funds' }), { resume: null });
      expect(moves(p)).to.deep.equal([['transaction', 'action_required', 'awaiting_funds']]);
      expect(p.jobs).to.deep.equal([]);
    });

    it('an off-ramp waiting on its automatic refund is refunded, never retried', () => {
      for (const code of AUTO_REFUND_CODES) {
        const p = decideRetry(tx('action_required', { stalled_at: 'created', failure: { code } }), { resume });
        expect([p.refused, isEmpty(p)], code).to.deep.equal(['auto_refund', true]);
      }
    });

    it('any other status, no stalled step, or a step that cannot run again is refused and plans nothing', () => {
      for (const status of TRANSACTION_STATUSES.filter((s) => s !== 'action_required')) {
        const p = decideRetry(tx(status, { stalled_at: 'funded' }), { resume });
        expect([p.refused, isEmpty(p)], status).to.deep.equal(['not_retryable', true]);
      }
      expect(decideRetry(tx('action_required'), { resume }).refused).to.equal('not_retryable');
      // An external wallet's transfer is the business's to make: its created step never runs again.
      expect(decideRetry(tx('action_required', { funding_type: 'external_wallet', stalled_at: 'created' }), { resume }).refused).to.equal('not_retryable');
    });

    it('which stalled steps can run again (CONTRACT §14)', () => {
      const can = (direction: string, funding_type: string | null, stalled_at: TransactionStatus | null) => canRunAgain({ direction, funding_type, stalled_at });
      expect(can('offramp', 'external_wallet', 'funded')).to.equal(true);
      expect(can('offramp', 'external_wallet', 'awaiting_funds')).to.equal(true);
      expect(can('offramp', 'external_wallet', 'created')).to.equal(false);
      expect(can('offramp', 'managed_wallet', 'signing')).to.equal(true);
      expect(can('offramp', 'treasury', 'funded')).to.equal(true);
      for (const step of ['created', 'awaiting_funds', 'funded', 'processing'] as const) expect(can('onramp', null, step), step).to.equal(true);
      expect(can('offramp', 'managed_wallet', null)).to.equal(false);
    });
  });

  describe('decideStepFailed (a step\'s job failed for good)', () => {
    it('action_required from the status the job read, stalled in its step, with step_failed', () => {
      for (const status of ['created', 'signing', 'submitting', 'awaiting_funds', 'funded', 'processing'] as const) {
        const p = decideStepFailed(tx(status), { seen: status, step: 'funded', reason: 'rpc down' });
        assertPlan(p);
        expect(p.moves, status).to.deep.equal([{
          machine: TRANSACTION_MACHINE, id: 'tx1', from: status, to: 'action_required', reason: 'step_failed',
          set: { stalled_at: 'funded', failure: { code: 'step_failed', message: 'The funded step could not complete: rpc down' } },
        }]);
        expect(p.jobs.length + p.entries.length).to.equal(0);
      }
    });

    it('a row that moved on since the job read it, or one that may not stall, plans nothing', () => {
      expect(isEmpty(decideStepFailed(tx('awaiting_funds'), { seen: 'processing', step: 'funded', reason: 'x' }))).to.equal(true);
      for (const status of ['action_required', 'completed', 'failed'] as const) {
        expect(isEmpty(decideStepFailed(tx(status), { seen: status, step: 'funded', reason: 'x' })), status).to.equal(true);
      }
    });
  });

  describe('decideSimulatedStall (sandbox simulate: action_required)', () => {
    it('stalled in the status it was in, with the forced failure and its code as the reason', () => {
      const failure = { code: 'simulated_action_required', message: 'Forced by the sandbox simulate control.' };
      const p = decideSimulatedStall(tx('awaiting_funds'), failure);
      assertPlan(p);
      expect(p.moves).to.deep.equal([{ machine: TRANSACTION_MACHINE, id: 'tx1', from: 'awaiting_funds', to: 'action_required', set: { failure, stalled_at: 'awaiting_funds' }, reason: failure.code }]);
    });

    it('already action_required is refused; an ended transaction plans nothing', () => {
      const failure = { code: 'x', message: 'y' };
      expect(decideSimulatedStall(tx('action_required'), failure).refused).to.equal('already_action_required');
      for (const status of ['completed', 'failed'] as const) expect(isEmpty(decideSimulatedStall(tx(status), failure)), status).to.equal(true);
    });
  });

  describe('decideFailure (a failure carried with its refund)', () => {
    const refund: Move = { machine: REFUND_MACHINE, id: 'tx1', from: null, to: 'pending', set: { refund: { amount: '1.000000', transaction_hash: null } } };

    it('the refund\'s move first (so the failed event shows it), then the transaction\'s, in one plan', () => {
      const p = decideFailure(tx('action_required'), { refund, set: { refund_due_at: null }, reason: 'auto_refund' });
      assertPlan(p);
      expect(p.moves).to.deep.equal([refund, { machine: TRANSACTION_MACHINE, id: 'tx1', from: 'action_required', to: 'failed', set: { refund_due_at: null }, reason: 'auto_refund' }]);
    });

    it('with no refund, only the transaction moves; a status that may not fail writes neither', () => {
      expect(moves(decideFailure(tx('funded'), { refund: null }))).to.deep.equal([['transaction', 'funded', 'failed']]);
      for (const status of ['completed', 'failed'] as const) expect(isEmpty(decideFailure(tx(status), { refund })), status).to.equal(true);
    });
  });
});

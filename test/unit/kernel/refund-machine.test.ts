import { expect } from 'chai';
import { REFUND_MACHINE, sourcesOf } from '../../../shared/domain/machines.js';
import { assertPlan, KernelInvariantError } from '../../../shared/kernel/invariants.js';
import { NOW, plan } from '../../../shared/kernel/plan.js';
import { fiatRefundAnswered, fiatRefundOwed, fiatRefundRetried, fiatRefundRetryDelayMs, fiatRefundStep, refundMove, type RefundState } from '../../../shared/kernel/refund-machine.js';
import { refundSummary, settleRefundSend, type RefundSend } from '../../../shared/kernel/refund-due.js';

const scope = { businessId: 'b1', environment: 'live' as const };
const usdc = (status: RefundState['status'], amount = '7.000000'): RefundState => ({ status, amount, to_address: '0xa', transaction_hash: null, sends: [] });
/** The assertion apply() makes before writing: the invariant broken, or null. */
const broken = (read: RefundState['status'] | null, next: RefundState | null): string | null => {
  try {
    const move = refundMove({ id: 't1', refund_status: read }, next);
    assertPlan(plan(scope, 'x', { moves: move ? [move] : [] }));
    return null;
  } catch (err) {
    if (err instanceof KernelInvariantError) return err.invariant;
    throw err;
  }
};

describe('kernel: a transaction\'s refund as a state machine (REFUND_MACHINE, compare-and-set from the status read)', () => {
  it('the machine has exactly the moves the refund code makes', () => {
    expect(REFUND_MACHINE.moves).to.deep.equal({ pending: ['completed', 'failed'], failed: ['pending', 'completed'], completed: ['pending'] });
    expect(REFUND_MACHINE.embedded?.initial).to.deep.equal(['pending', 'completed']);
    expect([REFUND_MACHINE.table, REFUND_MACHINE.column]).to.deep.equal(['transactions', 'refund_status']);
    expect(sourcesOf(REFUND_MACHINE, 'failed')).to.deep.equal(['pending']);
  });

  it('a decided refund is one move: its status from the one read, its data (never its status) with it', () => {
    const move = refundMove({ id: 't1', refund_status: null }, usdc('pending'), { refund_due_at: null })!;
    expect(move).to.deep.include({ machine: REFUND_MACHINE, id: 't1', from: null, to: 'pending' });
    expect(move.set).to.deep.equal({ refund_due_at: null, refund: { amount: '7.000000', to_address: '0xa', transaction_hash: null, sends: [] }, updated_at: NOW });
    expect(refundMove({ id: 't1', refund_status: null }, null)).to.equal(null);
  });

  it('created pending or completed; then pending -> completed / failed, failed -> pending (retried, redirected) or completed, completed -> pending', () => {
    for (const to of ['pending', 'completed'] as const) expect(broken(null, usdc(to)), `none -> ${to}`).to.equal(null);
    for (const [from, to] of [['pending', 'completed'], ['pending', 'failed'], ['failed', 'pending'], ['failed', 'completed'], ['completed', 'pending']] as const) {
      expect(broken(from, usdc(to)), `${from} -> ${to}`).to.equal(null);
    }
  });

  it('its status kept, only its data rewritten (a second send in flight, the sandbox\'s excess returned at once)', () => {
    for (const status of ['pending', 'completed', 'failed'] as const) expect(broken(status, usdc(status, '9.000000')), status).to.equal(null);
  });

  it('refused: a completed refund failed, a refund created failed, a refund removed', () => {
    expect(broken('completed', usdc('failed'))).to.equal('move_allowed_by_machine');
    expect(broken(null, usdc('failed'))).to.equal('move_allowed_by_machine');
    expect(broken('failed', null)).to.equal('refund_kept');
  });

  it('an off-ramp\'s status follows from its sends: a failed send retried is failed -> pending, a send mined while another is in flight stays pending', () => {
    const send = (reference: string, status: RefundSend['status'], requested = true): RefundSend => ({ reference, amount: 1n, status, hash: null, requested });
    const failed = [send('t-1', 'failed')];
    const funds = { received: 2n, paidOut: 0n };
    expect(refundSummary(funds, failed).status).to.equal('failed');
    expect(broken('failed', usdc(refundSummary(funds, [...failed, send('t-1-2', 'pending')]).status))).to.equal(null);
    const two = [send('t-1', 'pending'), send('t-2', 'pending')];
    expect(refundSummary(funds, settleRefundSend(two, 't-1', { status: 'completed', hash: '0xh' })).status).to.equal('pending');
  });
});

describe('kernel: an on-ramp\'s fiat refund decided from the provider\'s answer', () => {
  const owed = fiatRefundOwed({ total_required: '1000.00', currency: 'KES', payer_phone_redacted: '+254*****0177' });

  it('owed: pending, the whole collected amount back to the payer\'s phone', () => {
    expect(owed).to.deep.equal({
      status: 'pending', amount: '1000.00', currency: 'KES', to_address: null, transaction_hash: null, phone_number: '+254*****0177', provider_reference: null,
    });
  });

  it('paid: completed with its receipt; refused for good: failed with why, one refusal counted; still running: nothing decided', () => {
    expect(fiatRefundAnswered(owed, { status: 'succeeded', receipt: 'SAB1234567' })).to.deep.include({ status: 'completed', provider_reference: 'SAB1234567' });
    const refused = fiatRefundAnswered(owed, { status: 'rejected' })!;
    expect(refused).to.deep.include({ status: 'failed', provider_reference: null, refusals: 1, failure: { code: 'refund_rejected', message: 'The provider refused the refund payout.' } });
    expect(fiatRefundAnswered(owed, { status: 'pending' })).to.equal(null);
    expect(fiatRefundAnswered(owed, { status: 'temporary_failure' })).to.equal(null);
  });

  it('refused for good is never the end (CONTRACT §18): sent again after a growing, capped backoff, pending once more', () => {
    const once = fiatRefundAnswered(owed, { status: 'rejected', failure: { code: 'invalid_receiver', message: 'No.' } })!;
    expect(broken('pending', once)).to.equal(null);
    const retried = fiatRefundRetried(once);
    expect(retried).to.deep.include({ status: 'pending', refusals: 1, amount: '1000.00', currency: 'KES' });
    expect(retried).to.not.have.property('failure');
    expect(broken('failed', retried)).to.equal(null);
    const twice = fiatRefundAnswered(retried, { status: 'rejected' })!;
    expect(twice.refusals).to.equal(2);
    expect([once, twice, { refusals: 40 }].map(fiatRefundRetryDelayMs)).to.deep.equal([30_000, 60_000, 3_600_000]);
    expect(() => fiatRefundRetried({ ...once, status: 'completed' })).to.throw(KernelInvariantError);
  });

  it('what the refund job does: pays a pending one, sends a refused one again once due, else nothing (one refused with no due time waits for an operator)', () => {
    const now = Date.parse('2026-11-28T12:00:00Z');
    expect(fiatRefundStep({ refund_status: 'pending', refund_due_at: null }, now)).to.equal('pay');
    expect(fiatRefundStep({ refund_status: 'failed', refund_due_at: new Date(now - 1) }, now)).to.equal('send_again');
    expect(fiatRefundStep({ refund_status: 'failed', refund_due_at: new Date(now + 500) }, now)).to.equal('send_again');
    expect(fiatRefundStep({ refund_status: 'failed', refund_due_at: null }, now)).to.equal('none');
    expect(fiatRefundStep({ refund_status: 'failed', refund_due_at: new Date(now + 60_000) }, now)).to.equal('not_due');
    expect(fiatRefundStep({ refund_status: 'completed', refund_due_at: null }, now)).to.equal('none');
    expect(fiatRefundStep({ refund_status: null, refund_due_at: null }, now)).to.equal('none');
  });

  it('only a pending refund is answered: a completed one stays completed whatever a late answer says', () => {
    const paid = fiatRefundAnswered(owed, { status: 'succeeded', receipt: 'SAB1234567' });
    expect(fiatRefundAnswered(paid, { status: 'rejected' })).to.equal(null);
    expect(fiatRefundAnswered(null, { status: 'succeeded' })).to.equal(null);
  });
});

import { expect } from 'chai';
import {
  depositAddressExpected, nextRefundSend, refundRetryDelayMs, refundSendFate, refundSummary, refundTally, retriesOnItsOwn, settleRefundSend, withRefundSend, type RefundSend,
} from '../../shared/kernel/refund-due.js';

const send = (reference: string, amount: bigint, status: RefundSend['status'], requested = false): RefundSend => ({ reference, amount, status, hash: status === 'completed' ? '0xabc' : null, requested });

describe('kernel: how much of a refund is still due, and its next send', () => {
  const funds = { received: 7_000_000n, paidOut: 0n };

  it('nothing returned yet: all of it is due, sent under <id>-<total>', () => {
    expect(refundTally(funds, [])).to.deep.equal({ returned: 0n, inFlight: 0n, due: 7_000_000n });
    expect(nextRefundSend('t', funds, [], true)).to.deep.equal({ reference: 't-7000000', amount: 7_000_000n, status: 'pending', hash: null, requested: true });
  });

  it('a send in flight is not due again; a completed one counts as returned', () => {
    expect(nextRefundSend('t', funds, [send('t-7000000', 7_000_000n, 'pending')], false)).to.equal(null);
    expect(refundTally(funds, [send('t-7000000', 7_000_000n, 'completed')])).to.deep.equal({ returned: 7_000_000n, inFlight: 0n, due: 0n });
  });

  it('a failed send counts nothing as returned: its amount is due again under a new reference', () => {
    const failed = [send('t-7000000', 7_000_000n, 'failed')];
    expect(refundTally(funds, failed).due).to.equal(7_000_000n);
    expect(refundSummary(funds, failed)).to.deep.equal({ status: 'failed', amount: 0n, hash: null });
    const next = nextRefundSend('t', funds, failed, true)!;
    expect(next.reference).to.equal('t-7000000-2');
    expect(nextRefundSend('t', funds, [...failed, { ...next, status: 'failed' }], true)!.reference).to.equal('t-7000000-3');
  });

  it('an excess returned, then a late deposit: the total names the next send; the payout is never refunded', () => {
    const paid = { received: 13_000_000n, paidOut: 8_000_000n };
    const first = [send('t-3000000', 3_000_000n, 'completed')];
    expect(nextRefundSend('t', paid, first, false)).to.deep.include({ reference: 't-5000000', amount: 2_000_000n });
    expect(refundSummary(paid, [...first, send('t-5000000', 2_000_000n, 'pending')])).to.deep.include({ status: 'pending', amount: 5_000_000n, hash: '0xabc' });
  });

  it('settling a send: mined completes it whatever was recorded; failed only a pending one', () => {
    const pending = [send('a', 1n, 'pending')];
    expect(settleRefundSend(pending, 'a', { status: 'completed', hash: '0x1' })[0]).to.deep.include({ status: 'completed', hash: '0x1' });
    expect(settleRefundSend([send('a', 1n, 'failed')], 'a', { status: 'completed', hash: '0x1' })[0].status).to.equal('completed');
    expect(settleRefundSend([send('a', 1n, 'completed')], 'a', { status: 'failed' })[0].status).to.equal('completed');
    expect(settleRefundSend(pending, 'b', { status: 'failed' })).to.deep.equal(pending);
  });

  it('what a send that did not complete means: signed and not refused stays pending (it may still be mined)', () => {
    expect(refundSendFate('none')).to.equal('failed');
    expect(refundSendFate('reverted')).to.equal('failed');
    expect(refundSendFate('sent')).to.equal('pending');
    expect(refundSendFate('mined')).to.equal('completed');
  });

  it('only an automatic refund whose latest send failed is tried again on its own, with a growing, capped backoff', () => {
    const one = { received: 1n, paidOut: 0n };
    expect(retriesOnItsOwn(one, [send('a', 1n, 'failed')])).to.equal(true);
    expect(retriesOnItsOwn(one, [send('a', 1n, 'failed', true)])).to.equal(false);
    // Sent again already (the later send took the failed amount): nothing more to try while it is in flight.
    expect(retriesOnItsOwn(one, withRefundSend([send('a', 1n, 'failed')], send('b', 1n, 'pending')))).to.equal(false);
    expect(retriesOnItsOwn(one, [])).to.equal(false);
    expect([1, 2, 3].map(refundRetryDelayMs)).to.deep.equal([30_000, 60_000, 120_000]);
    expect(refundRetryDelayMs(50)).to.equal(3_600_000);
  });
});

describe('kernel: two sends in flight, the earlier failing (more USDC arrived while a return was on its way)', () => {
  // 3 USDC of excess went back (a), then 2 more arrived and went back too (b) before a was mined.
  const funds = { received: 25_000_000n, paidOut: 20_000_000n };
  const a = send('t-3000000', 3_000_000n, 'pending');
  const b = send('t-5000000', 2_000_000n, 'pending');

  it('the earlier fails, the later is mined: failed, with the earlier\'s amount due and tried again on its own', () => {
    const after = settleRefundSend(settleRefundSend([a, b], a.reference, { status: 'failed' }), b.reference, { status: 'completed', hash: '0xb' });
    expect(refundTally(funds, after)).to.deep.include({ returned: 2_000_000n, inFlight: 0n, due: 3_000_000n });
    expect(refundSummary(funds, after)).to.deep.equal({ status: 'failed', amount: 2_000_000n, hash: '0xb' });
    expect(retriesOnItsOwn(funds, after)).to.equal(true);
    // Its retry carries the failed amount, and only it: once it is decided, the failure is no longer owed.
    const retry = nextRefundSend('t', funds, after, false)!;
    expect(retry).to.deep.include({ reference: 't-5000000-2', amount: 3_000_000n });
    const retried = withRefundSend(after, retry);
    expect(retried.find((s) => s.reference === a.reference)).to.deep.include({ status: 'failed', resent: true });
    expect(retriesOnItsOwn(funds, retried)).to.equal(false);
    expect(refundSummary(funds, settleRefundSend(retried, retry.reference, { status: 'completed', hash: '0xr' }))).to.deep.include({ status: 'completed', amount: 5_000_000n });
  });

  it('the earlier fails while the later is still in flight: pending, and the retry is already due (it sends only the failed amount)', () => {
    const after = settleRefundSend([a, b], a.reference, { status: 'failed' });
    expect(refundSummary(funds, after).status).to.equal('pending');
    expect(retriesOnItsOwn(funds, after)).to.equal(true);
    expect(nextRefundSend('t', funds, after, false)).to.deep.include({ amount: 3_000_000n });
  });

  it('a failed send that was sent again, then more USDC: completed until its own return is decided (never completed -> failed)', () => {
    const done = settleRefundSend(withRefundSend([send('t-3000000', 3_000_000n, 'failed')], send('t-3000000-2', 3_000_000n, 'pending')), 't-3000000-2', { status: 'completed', hash: '0xc' });
    expect(refundSummary({ received: 30_000_000n, paidOut: 20_000_000n }, done).status).to.equal('completed');
    expect(retriesOnItsOwn({ received: 30_000_000n, paidOut: 20_000_000n }, done)).to.equal(false);
  });
});

describe('kernel: what a deposit address should hold', () => {
  it('what arrived, less what left it', () => {
    expect(depositAddressExpected({ received: 7n, sweptOut: 0n, paidOut: 0n, refundedFromHotWallet: 0n })).to.equal(7n);
    expect(depositAddressExpected({ received: 7n, sweptOut: 7n, paidOut: 0n, refundedFromHotWallet: 7n })).to.equal(0n);
  });

  it('a refund the hot wallet paid without the address being swept first: the address should be empty (it still holds the USDC)', () => {
    expect(depositAddressExpected({ received: 7n, sweptOut: 0n, paidOut: 0n, refundedFromHotWallet: 7n })).to.equal(0n);
  });

  it('an excess swept with the payment and returned from the hot wallet, then a late deposit', () => {
    expect(depositAddressExpected({ received: 11n, sweptOut: 11n, paidOut: 8n, refundedFromHotWallet: 3n })).to.equal(0n);
    expect(depositAddressExpected({ received: 13n, sweptOut: 11n, paidOut: 8n, refundedFromHotWallet: 3n })).to.equal(2n);
  });
});

import { expect } from 'chai';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { batchFundingPlan, managedSendPlan, sandboxTransferPlan, treasuryPayoutPlan } from '../../../shared/kernel/debits.js';
import { withdrawalCreated } from '../../../shared/kernel/withdrawals.js';
import { TRANSACTION_MACHINE } from '../../../shared/domain/machines.js';
import type { Plan } from '../../../shared/kernel/plan.js';

const scope = { businessId: 'b', environment: 'sandbox' as const };
const job = (id: string) => ({ name: 'payout.send' as const, id, data: { transactionId: 't1' } });

/** The plan's one entry: guarded (posted at once by apply, so an overdraft is refused where it is decided), taking `amount` from `from`. */
function debitOf(p: Plan, from: string, amount: bigint) {
  assertPlan(p);
  expect(p.entries).to.have.length(1);
  const [{ entry, guarded }] = p.entries;
  expect(guarded, 'posted at once').to.equal(true);
  const taken = entry.postings.find((posting) => posting.amount < 0n)!;
  expect(taken.account.kind).to.equal(from);
  expect(taken.amount).to.equal(-amount);
  expect(taken.noOverdraft, 'never below zero').to.equal(true);
  return entry;
}

describe('kernel: debits refused where they are decided (plans apply() posts at once)', () => {
  it('the sandbox chain\'s managed-wallet send: one entry per off-ramp, from the wallet', () => {
    const p = managedSendPlan(scope, { reference: 't1', walletId: 'w1', chain: 'base', amount: 5_000_000n });
    expect(debitOf(p, 'wallet', 5_000_000n).reference).to.equal('offramp-funding-t1');
    expect(p.moves).to.deep.equal([]);
  });

  it('a payout batch: one treasury debit for the total, every item funded from created with its payout job', () => {
    expect(debitOf(batchFundingPlan(scope, 'pb1', 12n), 'treasury', 12n).reference).to.equal('payout-batch-funding-pb1');
    const p = batchFundingPlan(scope, 'pb1', 12n, [{ transactionId: 't1', payout: job('j1') }, { transactionId: 't2', payout: job('j2') }]);
    assertPlan(p);
    expect(p.entries).to.have.length(1);
    expect(p.moves.map((m) => [m.machine, m.id, m.from, m.to, m.set])).to.deep.equal([[TRANSACTION_MACHINE, 't1', 'created', 'funded', undefined], [TRANSACTION_MACHINE, 't2', 'created', 'funded', undefined]]);
    expect(p.jobs.map((j) => j.id)).to.deep.equal(['j1', 'j2']);
  });

  it('an intent\'s treasury payout: the debit, the transaction funded from created, its payout job', () => {
    const p = treasuryPayoutPlan(scope, { transactionId: 't1', intentId: 'pi1', amount: 7n, payout: job('j1') });
    expect(debitOf(p, 'treasury', 7n).reference).to.equal('treasury-funding-t1');
    expect(p.moves.map((m) => [m.machine, m.id, m.from, m.to])).to.deep.equal([[TRANSACTION_MACHINE, 't1', 'created', 'funded']]);
    expect(p.jobs.map((j) => j.id)).to.deep.equal(['j1']);
  });

  it('a sandbox transfer to a deposit address: from the external wallet, one entry per hash, its observation staged', () => {
    const observe = { name: 'sandbox.transfer' as const, id: 'o1', data: { settlementId: 's1', amount: '3', transactionHash: '0xh' } };
    const p = sandboxTransferPlan(scope, { settlementId: 's1', walletId: 'w1', chain: 'base', amount: 3_000_000n, hash: '0xh', observe });
    expect(debitOf(p, 'wallet', 3_000_000n).reference).to.equal('deposit-s1-0xh');
    expect(p.jobs).to.deep.equal([observe]);
  });

  it('a treasury withdrawal written: the treasury debited into clearing, its send job staged', () => {
    const send = { name: 'withdrawal.send' as const, id: 'ws1', data: { withdrawalId: 'w1' } };
    const p = withdrawalCreated({ id: 'w1', scope, walletId: 'wa', chain: 'base', amount: 9n }, send);
    expect(debitOf(p, 'treasury', 9n).reference).to.equal('treasury-withdrawal-pending-w1');
    expect(p.jobs).to.deep.equal([send]);
  });
});

import { expect } from 'chai';
import { assertPlan, KernelInvariantError } from '../../shared/kernel/invariants.js';
import { plan } from '../../shared/kernel/plan.js';
import { decideWithdrawal, type WithdrawalSnapshot } from '../../shared/kernel/withdrawals.js';
import { TRANSACTION_MACHINE, TREASURY_WITHDRAWAL_MACHINE } from '../../shared/domain/machines.js';

const scope = { businessId: 'b', environment: 'live' as const };
const broken = (fn: () => void) => {
  try {
    fn();
  } catch (err) {
    if (err instanceof KernelInvariantError) return err.invariant;
    throw err;
  }
  return null;
};
const entry = (reference: string, a: bigint, b: bigint) => ({
  entry: { kind: 'k', reference, postings: [{ account: { kind: 'treasury' as const, asset: 'USDC' }, amount: a }, { account: { kind: 'settlement_clearing' as const, asset: 'USDC' }, amount: b }] },
});

describe('kernel: plan invariants (checked by apply() before anything is written)', () => {
  it('a move the machine forbids, a row moved twice off its path, an unbalanced or repeated entry, a repeated job: each refused by name', () => {
    const move = (from: string, to: string, id = 't1') => ({ machine: TRANSACTION_MACHINE, id, from, to });
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('completed', 'processing')] })))).to.equal('move_allowed_by_machine');
    // A row may move along one path (each move on from where the one before left it, right after it), never otherwise twice.
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('funded', 'processing'), move('processing', 'completed')] })))).to.equal(null);
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('funded', 'processing'), move('funded', 'failed')] })))).to.equal('row_moves_along_one_path');
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('funded', 'processing'), move('created', 'signing', 't2'), move('processing', 'completed')] })))).to.equal('row_moves_along_one_path');
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('funded', 'funded')] })))).to.equal('move_changes_status');
    expect(broken(() => assertPlan(plan(scope, 'x', { entries: [entry('e', -5n, 4n)] })))).to.equal('entry_balances');
    expect(broken(() => assertPlan(plan(scope, 'x', { entries: [entry('e', -5n, 5n), entry('e', -1n, 1n)] })))).to.equal('one_entry_per_reference');
    const job = { name: 'withdrawal.send' as const, id: 'j', data: { withdrawalId: 'w' } };
    expect(broken(() => assertPlan(plan(scope, 'x', { jobs: [job, job] })))).to.equal('one_job_per_id');
    expect(broken(() => assertPlan(plan(scope, 'x', { moves: [move('funded', 'processing')], entries: [entry('e', -5n, 5n)], jobs: [job] })))).to.equal(null);
  });
});

describe('kernel: treasury withdrawals', () => {
  const w: WithdrawalSnapshot = { id: 'w1', scope, status: 'pending', walletId: 'wa', chain: 'base', amount: 7_000_000n, transactionHash: null, sendStaged: false };

  it('a mined send completes it into the wallet; a revert or an archived wallet fails it back into the treasury', () => {
    const sent = decideWithdrawal(w, { kind: 'sent', hash: '0xabc' });
    expect(sent.moves).to.have.length(1);
    expect(sent.moves[0]).to.include({ machine: TREASURY_WITHDRAWAL_MACHINE, from: 'pending', to: 'completed' });
    expect(sent.entries[0].entry.postings.map((p) => [p.account.kind, p.amount])).to.deep.equal([['settlement_clearing', -7_000_000n], ['wallet', 7_000_000n]]);
    for (const fact of [{ kind: 'reverted' as const, message: 'out of gas' }, { kind: 'wallet_archived' as const }]) {
      const failed = decideWithdrawal(w, fact);
      expect(failed.moves[0]).to.include({ from: 'pending', to: 'failed' });
      expect(failed.entries[0].entry.postings.map((p) => [p.account.kind, p.amount])).to.deep.equal([['settlement_clearing', -7_000_000n], ['treasury', 7_000_000n]]);
    }
  });

  it('once its send is staged, only the send decides: an archived wallet fails nothing', () => {
    const p = decideWithdrawal({ ...w, sendStaged: true }, { kind: 'wallet_archived' });
    expect(p.moves).to.deep.equal([]);
    expect(p.entries).to.deep.equal([]);
    expect(decideWithdrawal({ ...w, sendStaged: true }, { kind: 'reverted', message: 'r' }).moves[0].to).to.equal('failed');
  });

  it('a fact about a withdrawal that moved on changes nothing; a send mined after it failed is flagged', () => {
    expect(decideWithdrawal({ ...w, status: 'completed', transactionHash: '0xabc' }, { kind: 'sent', hash: '0xabc' }).moves).to.deep.equal([]);
    expect(decideWithdrawal({ ...w, status: 'failed' }, { kind: 'sent', hash: '0xdef' }).outcome).to.match(/^conflict/);
  });
});

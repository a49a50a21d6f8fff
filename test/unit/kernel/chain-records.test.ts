import { expect } from 'chai';
import { decideInflow, decideSendReceipt, type InflowSnapshot } from '../../../shared/kernel/chain-records.js';
import { assertPlan } from '../../../shared/kernel/invariants.js';
import { CHAIN_INFLOW_MACHINE, CHAIN_SEND_MACHINE } from '../../../shared/domain/machines.js';

const receipt = (success: boolean, block = 10n) => ({ kind: 'receipt' as const, success, hash: '0xh', block });

describe('kernel: a hot-wallet send\'s receipt (chain_sends, compare-and-set from the status read)', () => {
  it('a sent send mined or reverted by its receipt; a mined one whose receipt is gone is sent again', () => {
    const mined = decideSendReceipt({ id: '1', status: 'sent', blockNumber: null }, receipt(true));
    expect(mined.kind === 'move' && [mined.move.machine, mined.move.from, mined.move.to, mined.move.set?.block_number]).to.deep.equal([CHAIN_SEND_MACHINE, 'sent', 'mined', '10']);
    const reverted = decideSendReceipt({ id: '1', status: 'sent', blockNumber: null }, receipt(false));
    expect(reverted.kind === 'move' && reverted.move.to).to.equal('reverted');
    const gone = decideSendReceipt({ id: '1', status: 'mined', blockNumber: '10' }, { kind: 'gone' });
    expect(gone.kind === 'move' && [gone.move.from, gone.move.to, gone.move.set?.block_number]).to.deep.equal(['mined', 'sent', null]);
  });

  it('a reverted send stays reverted whatever a later receipt says; a planned one is moved by nothing a receipt says', () => {
    expect(decideSendReceipt({ id: '1', status: 'reverted', blockNumber: '10' }, receipt(true)).kind).to.equal('none');
    expect(decideSendReceipt({ id: '1', status: 'planned', blockNumber: null }, receipt(true)).kind).to.equal('none');
    expect(decideSendReceipt({ id: '1', status: 'sent', blockNumber: null }, { kind: 'gone' }).kind).to.equal('none');
  });

  it('mined again in another block keeps its status (its block updated); in the same block changes nothing', () => {
    expect(decideSendReceipt({ id: '1', status: 'mined', blockNumber: '10' }, receipt(true, 12n))).to.deep.equal({ kind: 'reblocked', hash: '0xh', block: 12n });
    expect(decideSendReceipt({ id: '1', status: 'mined', blockNumber: '10' }, receipt(true, 10n)).kind).to.equal('none');
  });
});

describe('kernel: an inflow to one of our addresses (chain_inflows)', () => {
  const inflow: InflowSnapshot = {
    id: '7', status: 'pending', environment: 'live', chain: 'base', kind: 'managed_wallet', walletId: 'w1', businessId: 'b1',
    transactionHash: '0xt', logIndex: 2, amount: 5_000_000n, from: '0xf',
  };

  it('deep enough: credited and booked to the managed wallet once (its reference names the transfer)', () => {
    const p = decideInflow(inflow, { kind: 'deep' });
    assertPlan(p);
    expect(p.moves.map((m) => [m.machine, m.from, m.to])).to.deep.equal([[CHAIN_INFLOW_MACHINE, 'pending', 'credited']]);
    expect(p.entries.map((e) => e.entry.reference)).to.deep.equal(['wallet-deposit-base-0xt-2']);
    expect(p.entries[0].entry.postings.find((x) => x.amount > 0n)!.account).to.deep.equal({ kind: 'wallet', walletId: 'w1', chain: 'base', asset: 'USDC' });
  });

  it('the hot wallet\'s inflow is credited but never booked; a reorg credits nothing; a settled one moves no more', () => {
    expect(decideInflow({ ...inflow, kind: 'treasury', walletId: null, businessId: null }, { kind: 'deep' }).entries).to.deep.equal([]);
    const reorged = decideInflow(inflow, { kind: 'reorged' });
    expect([reorged.moves[0].to, reorged.entries.length]).to.deep.equal(['reorged', 0]);
    for (const status of ['credited', 'reorged'] as const) expect(decideInflow({ ...inflow, status }, { kind: 'deep' }).moves).to.deep.equal([]);
  });
});

import { expect } from 'chai';
import { decideChainSend, plannedFromLegacy, type RecordedSend } from '../../../shared/kernel/chain-send.js';

const TO = '0x1111111111111111111111111111111111111111';
const row = (over: Partial<RecordedSend> = {}): RecordedSend => ({
  purpose: 'withdrawal', status: 'planned', to_address: TO, amount: '10000000', asset: 'USDC', hd_index: null,
  transaction_id: null, withdrawal_id: 'w1', refund_total: null, ...over,
});

describe('kernel: what a chain.send job may send', () => {
  it('nothing recorded under the reference: nothing sent, whatever the job says', () => {
    expect(decideChainSend(undefined)).to.deep.equal({ kind: 'nothing', reason: 'no send is recorded under this reference' });
  });
  it('a planned send: exactly its destination, amount and signer, for its own subject', () => {
    expect(decideChainSend(row())).to.deep.equal({
      kind: 'send', sign: true, to: TO, amount: 10_000_000n, asset: 'USDC', signer: { kind: 'treasury' }, subject: { purpose: 'withdrawal', withdrawalId: 'w1' },
    });
    const refund = decideChainSend(row({ purpose: 'refund', withdrawal_id: null, transaction_id: 't1', refund_total: '25', hd_index: 7 }));
    expect(refund).to.deep.include({ signer: { kind: 'managed', index: 7 }, subject: { purpose: 'refund', transactionId: 't1', total: '25' } });
  });
  it('a send already signed is settled, never signed again', () => {
    for (const status of ['sent', 'mined', 'reverted'] as const) expect(decideChainSend(row({ status }))).to.deep.include({ kind: 'send', sign: false });
  });
  it('a send that is not a chain.send job\'s (a sweep, a top-up, a managed wallet\'s funding) or names no subject: nothing', () => {
    for (const purpose of ['sweep', 'gas_topup', 'offramp_funding']) expect(decideChainSend(row({ purpose })).kind).to.equal('nothing');
    expect(decideChainSend(row({ withdrawal_id: null })).kind).to.equal('nothing');
    expect(decideChainSend(row({ purpose: 'onramp_delivery', withdrawal_id: null })).kind).to.equal('nothing');
  });
});

describe('kernel: a job from before sends were planned', () => {
  const payload = { reference: 'withdrawal-w1', purpose: 'withdrawal', withdrawalId: 'w1', to: TO.toUpperCase().replace('0X', '0x'), amount: '10000000' };
  it('resolves only through the outbox payload its deciding unit wrote, for that reference', () => {
    expect(plannedFromLegacy('withdrawal-w1', payload)).to.deep.equal({
      purpose: 'withdrawal', to_address: TO, amount: '10000000', asset: 'USDC', transaction_id: null, withdrawal_id: 'w1', refund_total: null,
    });
    expect(plannedFromLegacy('withdrawal-w2', payload)).to.equal(null);
    expect(plannedFromLegacy('withdrawal-w1', undefined)).to.equal(null);
  });
  it('an incomplete or malformed payload resolves to nothing', () => {
    expect(plannedFromLegacy('withdrawal-w1', { ...payload, amount: '0' })).to.equal(null);
    expect(plannedFromLegacy('withdrawal-w1', { ...payload, amount: '1.5' })).to.equal(null);
    expect(plannedFromLegacy('withdrawal-w1', { ...payload, to: 'nowhere' })).to.equal(null);
    expect(plannedFromLegacy('withdrawal-w1', { ...payload, purpose: 'sweep' })).to.equal(null);
    expect(plannedFromLegacy('withdrawal-w1', { ...payload, withdrawalId: undefined })).to.equal(null);
  });
  it('a refund keeps its total; a delivery its transaction', () => {
    expect(plannedFromLegacy('refund-t1-25', { reference: 'refund-t1-25', purpose: 'refund', transactionId: 't1', to: TO, amount: '25', total: '25' }))
      .to.deep.include({ transaction_id: 't1', refund_total: '25', withdrawal_id: null });
    expect(plannedFromLegacy('onramp-t2', { reference: 'onramp-t2', purpose: 'onramp_delivery', transactionId: 't2', to: TO, amount: '5', total: null }))
      .to.deep.include({ transaction_id: 't2', refund_total: null });
  });
});

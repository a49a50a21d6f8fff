import { expect } from 'chai';
import { depositReference, reversalReference } from '../../../shared/kernel/inflow-entries.js';

describe('kernel: ledger references of counted deposits', () => {
  const transfer = { settlementId: 's1', transactionHash: `0x${'ab'.repeat(32)}`, logIndex: 3 };

  it('the same transfer in the same block, counted again after its reversal, has a reference of its own', () => {
    const first = depositReference({ ...transfer, observation: '10' });
    const again = depositReference({ ...transfer, observation: '11' });
    expect(again).to.not.equal(first);
    expect(reversalReference({ ...transfer, observation: '10' })).to.not.equal(reversalReference({ ...transfer, observation: '11' }));
  });
  it('one counting has one reference: a repeated posting of it is a no-op', () => {
    expect(depositReference({ ...transfer, observation: '10' })).to.equal(depositReference({ ...transfer, observation: '10' }));
    expect(reversalReference({ ...transfer, observation: '10' })).to.equal(`reorg-${depositReference({ ...transfer, observation: '10' })}`);
  });
  it('references of different transfers or settlements never meet', () => {
    const refs = [
      depositReference({ ...transfer, observation: '1' }),
      depositReference({ ...transfer, logIndex: 4, observation: '1' }),
      depositReference({ ...transfer, settlementId: 's2', observation: '1' }),
      depositReference({ ...transfer, transactionHash: `0x${'cd'.repeat(32)}`, observation: '1' }),
    ];
    expect(new Set(refs).size).to.equal(refs.length);
  });
});

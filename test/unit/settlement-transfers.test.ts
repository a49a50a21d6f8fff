import { expect } from 'chai';
import { transfersRead, type SettlementRow } from '../../shared/domain/settlements.js';

// A settlement read with its transfers in one statement (the confirmation unit's lockSettled): the transfers are used
// only when they are everything the settlement counts.
describe('a settlement\'s transfers read beside it', () => {
  const settlement = (received: string) => ({ received_amount: received }) as SettlementRow;
  const transfer = (id: string, amount: string, block: string | null, at: string) => ({
    id, transaction_hash: `0x${id}`, log_index: 0, amount, block_number: block, block_hash: block && `0xb${block}`, from_address: null, observed_at: at,
  });

  it('answers the counted ones (with a block) and when the last arrived, when they add up to what the settlement received', () => {
    const read = transfersRead([transfer('1', '40.000000', '10', '2026-11-30T10:00:00.000001+00:00'), transfer('2', '60.5', null, '2026-11-30T10:00:02+00:00')], settlement('100.500000'));
    expect(read?.counted.map((t) => t.id)).to.deep.equal(['1']);
    expect(read?.lastAt?.toISOString()).to.equal('2026-11-30T10:00:02.000Z');
  });

  it('answers nothing when they do not: a transfer recorded while the read waited for the lock is missing, and they are read again', () => {
    expect(transfersRead([transfer('1', '40', '10', '2026-11-30T10:00:00Z')], settlement('100.5'))).to.equal(undefined);
    expect(transfersRead(null, settlement('0.000000'))?.counted).to.deep.equal([]);
    expect(transfersRead(null, settlement('1'))).to.equal(undefined);
  });
});

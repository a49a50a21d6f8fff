import { expect } from 'chai';
import { transfersRead } from '../../shared/domain/settlements.js';

// A settlement read with its transfers in one statement (the confirmation unit's lockSettled): the column is the list
// when the settlement the read locked is the version it began with, else null (transfersColumn), and read again.
describe('a settlement\'s transfers read beside it', () => {
  const transfer = (id: string, amount: string, block: string | null, at: string) => ({
    id, transaction_hash: `0x${id}`, log_index: 0, amount, block_number: block, block_hash: block && `0xb${block}`, from_address: null, observed_at: at,
  });

  it('answers the counted ones (with a block) and when the last arrived', () => {
    const read = transfersRead([transfer('1', '40.000000', '10', '2026-11-30T10:00:00.000001+00:00'), transfer('2', '60.5', null, '2026-11-30T10:00:02+00:00')]);
    expect(read?.counted.map((t) => t.id)).to.deep.equal(['1']);
    expect(read?.lastAt?.toISOString()).to.equal('2026-11-30T10:00:02.000Z');
    expect(transfersRead([])).to.deep.equal({ counted: [], lastAt: null });
  });

  it('answers nothing when the column is null (the settlement changed while the read waited): they are read again', () => {
    expect(transfersRead(null)).to.equal(undefined);
  });
});

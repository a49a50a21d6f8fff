import { expect } from 'chai';
import { joinedColumns } from '../../shared/db/joined-columns.js';

describe('joinedColumns: one table read beside another in the same row', () => {
  const joined = joinedColumns<{ id: string; amount: string; note: string | null }>('settlement', 's', 'id, amount::text,\n  note');

  it('aliases each column under its prefix, keeping its cast and naming it without', () => {
    expect(joined.select).to.equal('s.id AS settlement__id, s.amount::text AS settlement__amount, s.note AS settlement__note');
  });

  it('takes the joined row back out under its own names, and nothing of the other table', () => {
    const row = { id: 'tx_1', amount: '9', settlement__id: 'st_1', settlement__amount: '10.5', settlement__note: null };
    expect(joined.take(row)).to.deep.equal({ id: 'st_1', amount: '10.5', note: null });
  });

  it('answers undefined when an outer join found none (its id is null)', () => {
    expect(joined.take({ id: 'tx_1', settlement__id: null, settlement__amount: null, settlement__note: null })).to.equal(undefined);
    expect(joined.take({ id: 'tx_1' })).to.equal(undefined);
  });

  it('strips the joined columns and keeps every other column, the same-named ones included', () => {
    const row = { id: 'tx_1', amount: '9', settlement__id: 'st_1', settlement__amount: '10.5', settlement__note: 'x' };
    expect(joined.strip(row)).to.deep.equal({ id: 'tx_1', amount: '9' });
    expect(row).to.have.property('settlement__id', 'st_1');
  });
});

import { expect } from 'chai';
import { checksumAddress } from '../../shared/chain/address.js';

const CHECKSUMMED = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

describe('EIP-55 address checks', () => {
  it('accepts the checksummed form as it is', () => {
    expect(checksumAddress(CHECKSUMMED)).to.deep.equal({ address: CHECKSUMMED });
  });

  it('accepts all-lower and all-upper hex and returns the checksummed form', () => {
    expect(checksumAddress(CHECKSUMMED.toLowerCase())).to.deep.equal({ address: CHECKSUMMED });
    expect(checksumAddress(`0x${CHECKSUMMED.slice(2).toUpperCase()}`)).to.deep.equal({ address: CHECKSUMMED });
  });

  it('refuses a mixed-case address whose checksum is wrong', () => {
    const flipped = CHECKSUMMED.replace('aAeb', 'aaeB');
    expect(checksumAddress(flipped)).to.deep.equal({ problem: 'bad_checksum' });
  });

  it('refuses what is not an address, and the zero address', () => {
    for (const bad of ['', '0x', '5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', `${CHECKSUMMED}00`, '0xZZAeb6053F3E94C9b9A09f33669435E7Ef1BeAed']) {
      expect(checksumAddress(bad)).to.deep.equal({ problem: 'not_an_address' });
    }
    expect(checksumAddress(`0x${'0'.repeat(40)}`)).to.deep.equal({ problem: 'zero_address' });
  });
});

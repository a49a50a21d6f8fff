import { expect } from 'chai';
import { Decimal, decimalToMinor, formatAmount, formatRate, fromMinor, toMinor } from '../../shared/domain/money.js';

describe('money', () => {
  it('parses decimal strings into exact minor units', () => {
    expect(toMinor('100', 6)).to.equal(100_000_000n);
    expect(toMinor('0.000001', 6)).to.equal(1n);
    expect(toMinor('12.5', 2)).to.equal(1250n);
    expect(toMinor('99999999999999999999.99', 2)).to.equal(9999999999999999999999n);
  });

  it('refuses more fractional digits than the scale, and non-amounts', () => {
    expect(() => toMinor('1.001', 2)).to.throw(/more than 2/);
    expect(() => toMinor('1.5', 0)).to.throw();
    for (const bad of ['', '-1', '01', '1.', '.5', '1e3', ' 1', 'abc']) expect(() => toMinor(bad, 2), bad).to.throw();
  });

  it('renders at exactly the scale', () => {
    expect(fromMinor(1250n, 2)).to.equal('12.50');
    expect(fromMinor(5n, 6)).to.equal('0.000005');
    expect(fromMinor(100n, 0)).to.equal('100');
    expect(fromMinor(-150n, 2)).to.equal('-1.50');
    expect(formatAmount('100', 6)).to.equal('100.000000');
  });

  it('rounds down what is received and up what is charged', () => {
    const v = new Decimal('10').div(3); // 3.333...
    expect(decimalToMinor(v, 2, 'down')).to.equal(333n);
    expect(decimalToMinor(v, 2, 'up')).to.equal(334n);
    expect(decimalToMinor(new Decimal('1.10'), 2, 'up')).to.equal(110n);
  });

  it('trims exchange rates to 8 digits without trailing zeros', () => {
    expect(formatRate(new Decimal('129.50000000'))).to.equal('129.5');
    expect(formatRate(new Decimal('1').div(3))).to.equal('0.33333333');
  });
});

import { expect } from 'chai';
import fc from 'fast-check';
import { AmountError, Decimal, formatAmount, formatRate, fromMinor, rateText, toMinor } from '../../shared/domain/money.js';

const scaleArb = fc.constantFrom(0, 2, 6);

/** Any amount the contract's grammar allows with at most `scale` fractional digits. */
const amountArb = (scale: number) =>
  fc.tuple(fc.stringMatching(/^(0|[1-9][0-9]{0,30})$/), fc.stringMatching(new RegExp(`^[0-9]{0,${scale}}$`)))
    .map(([whole, frac]) => (frac ? `${whole}.${frac}` : whole));

// Unicode decimal digits other than ASCII: full-width, Arabic-Indic, Devanagari, Bengali, mathematical bold.
const FOREIGN_DIGITS = ['１', '０', '٣', '۵', '७', '৯', '𝟏'];

const refused = (amount: string, scale: number) => expect(() => toMinor(amount, scale), JSON.stringify(amount)).to.throw(AmountError);

describe('money: properties', () => {
  it('round-trips every non-negative bigint through its rendering at scales 0, 2 and 6', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 40n }), scaleArb, (minor, scale) => {
      const rendered = fromMinor(minor, scale);
      expect(toMinor(rendered, scale)).to.equal(minor);
      expect(rendered).to.match(scale === 0 ? /^(0|[1-9][0-9]*)$/ : new RegExp(`^(0|[1-9][0-9]*)\\.[0-9]{${scale}}$`));
    }));
  });

  it('renders a negative bigint as the minus of its absolute value, which toMinor refuses as an amount', () => {
    fc.assert(fc.property(fc.bigInt({ max: -1n }), scaleArb, (minor, scale) => {
      const rendered = fromMinor(minor, scale);
      expect(rendered).to.equal(`-${fromMinor(-minor, scale)}`);
      refused(rendered, scale);
    }));
  });

  it('renders a rate by its digits exactly as the Decimal way does (8 fractional digits at most, rounded down, trailing zeros trimmed)', () => {
    fc.assert(fc.property(amountArb(20), (rate) => {
      expect(rateText(rate)).to.equal(formatRate(new Decimal(rate)));
    }));
    for (const rate of ['0', '0.000000001', '10.00000000', '129.350000000000', '1.23456789999', '-1.5', '1e3']) {
      expect(rateText(rate), rate).to.equal(formatRate(new Decimal(rate)));
    }
  });

  it('formats as text exactly what the bigint round trip renders', () => {
    fc.assert(fc.property(scaleArb.chain((scale) => fc.tuple(fc.constant(scale), amountArb(scale))), ([scale, amount]) => {
      expect(formatAmount(amount, scale)).to.equal(fromMinor(toMinor(amount, scale), scale));
    }));
  });

  it('formats idempotently and without changing the value', () => {
    fc.assert(fc.property(scaleArb.chain((scale) => fc.tuple(fc.constant(scale), amountArb(scale))), ([scale, amount]) => {
      const once = formatAmount(amount, scale);
      expect(formatAmount(once, scale)).to.equal(once);
      expect(toMinor(once, scale)).to.equal(toMinor(amount, scale));
    }));
  });

  it('refuses more fractional digits than the scale, even trailing zeros', () => {
    fc.assert(fc.property(scaleArb, fc.stringMatching(/^[1-9][0-9]{0,10}$/), fc.integer({ min: 1, max: 6 }), fc.nat(9), (scale, whole, extra, last) => {
      refused(`${whole}.${'0'.repeat(scale + extra - 1)}${last}`, scale);
    }));
  });

  it('refuses a non-ASCII digit anywhere in an otherwise valid amount', () => {
    fc.assert(fc.property(scaleArb.chain((scale) => fc.tuple(fc.constant(scale), amountArb(scale))), fc.constantFrom(...FOREIGN_DIGITS), fc.nat(), ([scale, amount], digit, at) => {
      const i = at % (amount.length + 1);
      refused(amount.slice(0, i) + digit + amount.slice(i), scale);
      refused(amount.replace(/[0-9]/g, digit), scale);
    }));
  });

  it('refuses every string outside the contract grammar', () => {
    const grammar = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;
    fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 12 }), scaleArb, (s, scale) => {
      fc.pre(!grammar.test(s));
      refused(s, scale);
    }));
  });

  it('refuses the usual near-misses', () => {
    for (const bad of ['１', '１０', '1e3', '1E3', '-5', '+5', '01.5', '00', '.5', '10.', '1,000', '1_000', ' 1', '1 ', '0x10', 'Infinity', 'NaN', '']) {
      for (const scale of [0, 2, 6]) refused(bad, scale);
    }
  });
});

// The liquidation kernel's rules, without PostgreSQL: an off-ramp a transfer becomes takes exactly what arrived
// (nothing left to return after the payout), and an unpriced transfer is priced, waits for a rate, or goes back.
import { expect } from 'chai';
import fc from 'fast-check';
import { nextPricingStep, priceLiquidation, RATE_RETRY_MS, RATE_SCALE, usdcToFiat } from '../../shared/kernel/liquidation.js';
import { DEFAULT_PLATFORM_FEE, priceQuote } from '../../shared/domain/pricing.js';
import { fromMinor, toMinor, USDC_SCALE } from '../../shared/domain/money.js';

const NO_LIMITS = { min: 0n, max: 10n ** 30n };
const rateArb = fc.bigInt({ min: 1n, max: 10n ** 14n }); // up to a million fiat units per USDC, 8 decimals

describe('liquidation kernel: the price of a transfer', () => {
  it('takes exactly what arrived: source + fees = total_required = received, the destination the floor of the rest', () => {
    fc.assert(fc.property(
      fc.bigInt({ min: 1n, max: 10n ** 16n }), fc.bigInt({ min: 0n, max: 10n ** 6n }), fc.bigInt({ min: 0n, max: 10n ** 6n }), rateArb,
      fc.constantFrom(0, 2), fc.boolean(),
      (received, provider, platform, rate, fiatScale, whole) => {
        const step = whole ? 10n ** BigInt(fiatScale) : 1n;
        const out = priceLiquidation({ received, fees: { provider, platform }, rate, fiatScale, fiatStep: step, limits: NO_LIMITS });
        const source = received - provider - platform;
        if (out.kind === 'out_of_range') {
          expect(source <= 0n || out.destination === 0n).to.equal(true);
          return;
        }
        const { price } = out;
        expect(price.totalRequired).to.equal(received);
        expect(price.source + price.fees.provider + price.fees.platform).to.equal(received);
        expect(price.fees).to.deep.equal({ provider, platform });
        // floor(source * rate) in fiat minor units, down to the step: one more step would be more than the source buys.
        const exact = source * rate * 10n ** BigInt(fiatScale);
        const unit = 10n ** BigInt(USDC_SCALE + RATE_SCALE);
        expect(price.destination % step).to.equal(0n);
        expect(price.destination * unit <= exact).to.equal(true);
        expect((price.destination + step) * unit > exact).to.equal(true);
      },
    ));
  });

  it('with the fees a quote charges, leaves nothing over for any amount and rate (the dust a completed off-ramp returned)', () => {
    fc.assert(fc.property(fc.bigInt({ min: 1_000_000n, max: 1_000_000_000n }), fc.bigInt({ min: 5_000_000_000n, max: 30_000_000_000n }), fc.boolean(), (received, rate, whole) => {
      const budget = fromMinor(received, USDC_SCALE);
      const rateText = fromMinor(rate, RATE_SCALE);
      let quoted;
      try {
        quoted = priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', total_budget: budget, rate: rateText, platform_fee: DEFAULT_PLATFORM_FEE, whole_fiat: whole });
      } catch {
        return; // outside the corridor's limits: returned whole, priced to pay nothing
      }
      const step = whole ? 100n : 1n;
      const out = priceLiquidation({
        received, fees: { provider: quoted.minor.provider_fee, platform: quoted.minor.platform_fee }, rate, fiatScale: 2, fiatStep: step, limits: NO_LIMITS,
      });
      expect(out.kind).to.equal('priced');
      if (out.kind !== 'priced') return;
      expect(out.price.totalRequired).to.equal(received);
      // Never less converted or paid out than the budgeted quote would have.
      expect(out.price.destination >= quoted.minor.destination_amount).to.equal(true);
      expect(out.price.source >= quoted.minor.source_amount).to.equal(true);
    }));
  });

  it('37 USDC at 129.35 KES: the quote left 0.000002 USDC over; the liquidation price converts it', () => {
    const quoted = priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', total_budget: '37', rate: '129.35', platform_fee: DEFAULT_PLATFORM_FEE });
    expect(quoted.source.total_required).to.equal('36.999998');
    const out = priceLiquidation({
      received: toMinor('37', USDC_SCALE), fees: { provider: quoted.minor.provider_fee, platform: quoted.minor.platform_fee }, rate: toMinor('129.35', RATE_SCALE),
      fiatScale: 2, fiatStep: 1n, limits: { min: 1000n, max: 25_000_000n },
    });
    expect(out).to.deep.equal({
      kind: 'priced',
      price: { source: toMinor('36.453202', USDC_SCALE), fees: { provider: toMinor('0.364532', USDC_SCALE), platform: toMinor('0.182266', USDC_SCALE) }, totalRequired: toMinor('37', USDC_SCALE), destination: 471522n },
    });
  });

  it('out of range when nothing is left after the fees, or the payout falls outside the limits', () => {
    const base = { rate: toMinor('129.35', RATE_SCALE), fiatScale: 2, fiatStep: 1n, limits: { min: 1000n, max: 25_000_000n } };
    expect(priceLiquidation({ ...base, received: 10n, fees: { provider: 6n, platform: 4n } }).kind).to.equal('out_of_range');
    expect(priceLiquidation({ ...base, received: toMinor('0.05', USDC_SCALE), fees: { provider: 0n, platform: 0n } })).to.deep.equal({ kind: 'out_of_range', destination: 646n });
    expect(priceLiquidation({ ...base, received: toMinor('5000', USDC_SCALE), fees: { provider: 0n, platform: 0n } }).kind).to.equal('out_of_range');
    expect(() => priceLiquidation({ ...base, rate: 0n, received: 1n, fees: { provider: 0n, platform: 0n } })).to.throw(RangeError);
  });

  it('converts at the rate and floors to the rail\'s step', () => {
    expect(usdcToFiat(toMinor('1', USDC_SCALE), toMinor('129.35', RATE_SCALE), 2, 1n)).to.equal(12935n);
    expect(usdcToFiat(toMinor('1', USDC_SCALE), toMinor('129.35', RATE_SCALE), 2, 100n)).to.equal(12900n);
    expect(usdcToFiat(1n, toMinor('3700.5', RATE_SCALE), 0, 1n)).to.equal(0n);
  });
});

describe('liquidation kernel: a transfer not yet priced', () => {
  const at = (over: Partial<Parameters<typeof nextPricingStep>[0]>) =>
    nextPricingStep({ rejected: false, rateAvailable: true, recordedAtMs: 1_000_000, nowMs: 1_000_000, returnAfterSeconds: 900, ...over });

  it('is priced at once when a fresh rate is at hand, however long ago the transfer arrived', () => {
    expect(at({})).to.deep.equal({ kind: 'price' });
    expect(at({ nowMs: 1_000_000 + 10_000_000 })).to.deep.equal({ kind: 'price' });
  });

  it('goes back at once when already ruled out (archived address or beneficiary), rate or not', () => {
    expect(at({ rejected: true })).to.deep.equal({ kind: 'return', reason: 'rejected' });
    expect(at({ rejected: true, rateAvailable: false })).to.deep.equal({ kind: 'return', reason: 'rejected' });
  });

  it('waits for a rate until AUTO_REFUND_AFTER_SECONDS, asking again never past the deadline, then goes back', () => {
    expect(at({ rateAvailable: false })).to.deep.equal({ kind: 'wait_for_rate', retryInMs: RATE_RETRY_MS });
    expect(at({ rateAvailable: false, nowMs: 1_000_000 + 898_000 })).to.deep.equal({ kind: 'wait_for_rate', retryInMs: 2_000 });
    expect(at({ rateAvailable: false, nowMs: 1_000_000 + 900_000 })).to.deep.equal({ kind: 'return', reason: 'rate_unavailable' });
    expect(at({ rateAvailable: false, nowMs: 1_000_000 + 5_000_000 })).to.deep.equal({ kind: 'return', reason: 'rate_unavailable' });
  });

  it('every step has an exit: waiting is bounded by the deadline, for any times', () => {
    fc.assert(fc.property(fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: -(2 ** 30), max: 2 ** 30 }), fc.integer({ min: 1, max: 86_400 }),
      (rejected, rateAvailable, recordedAtMs, elapsed, returnAfterSeconds) => {
        const nowMs = recordedAtMs + elapsed;
        const step = nextPricingStep({ rejected, rateAvailable, recordedAtMs, nowMs, returnAfterSeconds });
        if (step.kind !== 'wait_for_rate') return;
        expect(rejected || rateAvailable).to.equal(false);
        expect(step.retryInMs).to.be.greaterThan(0).and.at.most(RATE_RETRY_MS);
        expect(nowMs + step.retryInMs).to.be.at.most(recordedAtMs + returnAfterSeconds * 1000);
        expect(nextPricingStep({ rejected, rateAvailable, recordedAtMs, nowMs: recordedAtMs + returnAfterSeconds * 1000, returnAfterSeconds }).kind).to.equal('return');
      }));
  });
});

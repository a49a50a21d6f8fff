import { expect } from 'chai';
import fc from 'fast-check';
import { listCorridors, type Corridor, type Direction } from '../../shared/domain/corridors.js';
import { Decimal, formatRate, fromMinor, scaleOf, toMinor, USDC_SCALE } from '../../shared/domain/money.js';
import { DEFAULT_PLATFORM_FEE, priceQuote, type PlatformFee, type PricedQuote, type QuoteInput } from '../../shared/domain/pricing.js';
import { SANDBOX_RATES, sandboxRateSource, sandboxRatesMarkdown } from '../../shared/domain/rates.js';
import { AppError } from '../../shared/errors.js';

// The oracle: decimal.js at a precision no quote comes near, independent of pricing.ts's bigint ratios.
const D = Decimal.clone({ precision: 200 });
type Dec = InstanceType<typeof D>;
const unit = (scale: number) => new D(10).pow(-scale);

const kes = (direction: Direction, amounts: Pick<QuoteInput, 'source_amount' | 'destination_amount'>, platform_fee = DEFAULT_PLATFORM_FEE) =>
  priceQuote({ direction, currency: 'KES', payment_method: 'mobile_money', rate: SANDBOX_RATES.KES, platform_fee, ...amounts });

function appError(fn: () => unknown, code: string): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code, (err as Error).message).to.equal(code);
    return err as AppError;
  }
  return expect.fail(`expected ${code}`);
}

const wire = ({ minor: _minor, ...rest }: PricedQuote) => rest;

describe('pricing: registry and sandbox rates', () => {
  it('gives every corridor a provider fee: whole bps up to 100%, a minimum at the currency\'s scale', () => {
    for (const c of listCorridors()) {
      const { bps, min } = c.provider_fee;
      expect(Number.isInteger(bps) && bps >= 0 && bps <= 10_000, `${c.currency} ${c.payment_method}`).to.equal(true);
      expect(() => toMinor(min, scaleOf(c.currency))).not.to.throw();
    }
  });

  it('has a canonical sandbox rate for every corridor currency, USD exactly 1', async () => {
    for (const currency of new Set(listCorridors().map((c) => c.currency))) {
      const rate = SANDBOX_RATES[currency];
      expect(rate, currency).to.be.a('string');
      expect(formatRate(new Decimal(rate)), currency).to.equal(rate);
      expect(new Decimal(rate).gt(0)).to.equal(true);
      const quoted = await sandboxRateSource.rate(currency);
      expect(quoted.rate).to.equal(rate);
      expect(new Date(quoted.as_of).toISOString()).to.equal(quoted.as_of);
      expect(sandboxRatesMarkdown()).to.contain(`| ${currency} | ${rate} |`);
    }
    expect(SANDBOX_RATES.USD).to.equal('1');
    await sandboxRateSource.rate('XOF').then(() => expect.fail('no XOF rate'), (err) => expect((err as AppError).code).to.equal('unsupported_corridor'));
  });
});

describe('pricing: worked examples at the sandbox rates', () => {
  it('off-ramps 100 USDC to KES mobile money at 129.35', () => {
    // 100 x 129.35 = 12935.00 KES; provider 1% = 1 USDC (above the 10 KES minimum); platform 0.5% = 0.5 USDC.
    expect(wire(kes('offramp', { source_amount: '100' }))).to.deep.equal({
      direction: 'offramp', currency: 'KES', payment_method: 'mobile_money',
      source: { asset: 'USDC', amount: '100.000000', total_required: '101.500000' },
      destination: { currency: 'KES', amount: '12935.00' },
      exchange_rate: '129.35',
      fees: { provider: '1.000000', platform: '0.500000', currency: 'USDC' },
    });
  });

  it('charges the provider minimum in USDC, rounded up', () => {
    // 1% of 1 USDC is 0.01; the minimum 10 KES / 129.35 = 0.0773096... USDC rounds up to 0.077310.
    const q = kes('offramp', { source_amount: '1' });
    expect(q.fees).to.deep.equal({ provider: '0.077310', platform: '0.005000', currency: 'USDC' });
    expect(q.source.total_required).to.equal('1.082310');
    expect(q.destination.amount).to.equal('129.35');
  });

  it('solves a KES destination for the smallest USDC source', () => {
    // 1000 / 129.35 = 7.7309625...: 7.730963 x 129.35 = 1000.00006 pays 1000.00; 7.730962 would pay 999.99.
    const q = kes('offramp', { destination_amount: '1000' });
    expect(q.source).to.deep.equal({ asset: 'USDC', amount: '7.730963', total_required: '7.846928' });
    expect(q.destination.amount).to.equal('1000.00');
    expect(q.fees).to.deep.equal({ provider: '0.077310', platform: '0.038655', currency: 'USDC' }); // 0.0386548 up
  });

  it('on-ramps 1000 KES to USDC, fees in KES', () => {
    // 1000 / 129.35 = 7.7309625 -> 7.730962 USDC (down); provider max(1%, 10 KES) = 10.00; platform 5.00.
    expect(wire(kes('onramp', { source_amount: '1000' }))).to.deep.equal({
      direction: 'onramp', currency: 'KES', payment_method: 'mobile_money',
      source: { currency: 'KES', amount: '1000.00', total_required: '1015.00' },
      destination: { asset: 'USDC', amount: '7.730962' },
      exchange_rate: '129.35',
      fees: { provider: '10.00', platform: '5.00', currency: 'KES' },
    });
  });

  it('solves a USDC destination for the smallest KES source, fees rounded up', () => {
    // 10 x 129.35 = 1293.50 KES; provider 12.935 -> 12.94; platform 6.4675 -> 6.47.
    const q = kes('onramp', { destination_amount: '10' });
    expect(q.source).to.deep.equal({ currency: 'KES', amount: '1293.50', total_required: '1312.91' });
    expect(q.destination.amount).to.equal('10.000000');
    expect(q.fees).to.deep.equal({ provider: '12.94', platform: '6.47', currency: 'KES' });
  });

  it('converts a USDC platform minimum to fiat on on-ramps', () => {
    expect(kes('onramp', { source_amount: '1000' }, { bps: 50, min: '1' }).fees.platform).to.equal('129.35');
    expect(kes('offramp', { source_amount: '1' }, { bps: 0, min: '0.25' }).fees.platform).to.equal('0.250000');
  });

  it('floors a zero-decimal currency and applies SWIFT\'s flat minimum', () => {
    const ugx = priceQuote({ direction: 'offramp', currency: 'UGX', payment_method: 'mobile_money', rate: SANDBOX_RATES.UGX, platform_fee: DEFAULT_PLATFORM_FEE, source_amount: '0.2' });
    // 0.2 x 3705.5 = 741.1 -> 741 UGX; provider min 500 UGX / 3705.5 = 0.1349345... -> 0.134935 USDC.
    expect(ugx.destination.amount).to.equal('741');
    expect(ugx.fees).to.deep.equal({ provider: '0.134935', platform: '0.001000', currency: 'USDC' });
    expect(ugx.source.total_required).to.equal('0.335935');
    const usd = priceQuote({ direction: 'offramp', currency: 'USD', payment_method: 'swift_transfer', rate: SANDBOX_RATES.USD, platform_fee: DEFAULT_PLATFORM_FEE, source_amount: '1000' });
    expect(usd.exchange_rate).to.equal('1');
    expect(usd.destination.amount).to.equal('1000.00');
    expect(usd.fees).to.deep.equal({ provider: '25.000000', platform: '5.000000', currency: 'USDC' }); // 0.1% = 1 < 25 USD
    expect(usd.source.total_required).to.equal('1030.000000');
  });
});

describe('pricing: refusals', () => {
  it('prices an off-ramp from a total budget: the largest source whose total_required fits it', () => {
    for (const budget of ['11.596443', '100', '1.000001', '1500.123456']) {
      const priced = priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', rate: SANDBOX_RATES.KES, platform_fee: { bps: 75, min: '0.10' }, total_budget: budget });
      const total = toMinor(priced.source.total_required, USDC_SCALE);
      expect(total <= toMinor(budget, USDC_SCALE), `${budget}: total within the budget`).to.equal(true);
      const oneMore = priceQuote({
        direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', rate: SANDBOX_RATES.KES, platform_fee: { bps: 75, min: '0.10' },
        source_amount: fromMinor(priced.minor.source_amount + 1n, USDC_SCALE),
      });
      expect(toMinor(oneMore.source.total_required, USDC_SCALE) > toMinor(budget, USDC_SCALE), `${budget}: one more micro-USDC would not fit`).to.equal(true);
    }
    appError(() => priceQuote({ direction: 'onramp', currency: 'KES', payment_method: 'mobile_money', rate: SANDBOX_RATES.KES, platform_fee: DEFAULT_PLATFORM_FEE, total_budget: '10' }), 'internal_error');
    appError(() => priceQuote({ direction: 'offramp', currency: 'KES', payment_method: 'mobile_money', rate: SANDBOX_RATES.KES, platform_fee: DEFAULT_PLATFORM_FEE, total_budget: '0.01' }), 'amount_out_of_range');
  });

  it('refuses a fiat side outside the corridor with its limits', () => {
    const below = appError(() => kes('offramp', { source_amount: '0.05' }), 'amount_out_of_range'); // 6.46 KES
    expect(below.details).to.deep.equal({ min_amount: '10.00', max_amount: '250000.00', currency: 'KES' });
    expect(below.message).to.equal('KES mobile_money quotes must be between 10.00 and 250000.00 KES; this one is 6.46 KES. GET /corridors lists every currency, payment method and direction we serve.');
    appError(() => kes('offramp', { source_amount: '2000' }), 'amount_out_of_range'); // 258700.00 KES
    appError(() => kes('offramp', { destination_amount: '250000.01' }), 'amount_out_of_range');
    appError(() => kes('offramp', { destination_amount: '9.99' }), 'amount_out_of_range');
    appError(() => kes('onramp', { source_amount: '9.99' }), 'amount_out_of_range');
    appError(() => kes('onramp', { source_amount: '250000.01' }), 'amount_out_of_range');
    // An on-ramp collects total_required: with fees it must stay within the corridor's maximum too.
    const overWithFees = appError(() => kes('onramp', { source_amount: '250000' }), 'amount_out_of_range');
    expect(overWithFees.message).to.include('253750.00').and.include('GET /corridors');
    expect(kes('onramp', { source_amount: '246000' }).source.total_required).to.equal('249690.00');
  });

  it('refuses zero amounts as out of range', () => {
    for (const zero of ['0', '0.00', '0.000000']) {
      appError(() => kes('offramp', { source_amount: zero }), 'amount_out_of_range');
      appError(() => kes('onramp', { destination_amount: zero }), 'amount_out_of_range');
    }
  });

  it('refuses more fractional digits than the side\'s scale, naming the field', () => {
    const usdc = appError(() => kes('offramp', { source_amount: '1.0000001' }), 'invalid_request');
    expect(usdc.details).to.deep.equal([{ path: 'source_amount', in: 'body', message: 'has more than 6 fractional digits' }]);
    const fiat = appError(() => kes('offramp', { destination_amount: '10.001' }), 'invalid_request');
    expect(fiat.details).to.deep.equal([{ path: 'destination_amount', in: 'body', message: 'has more than 2 fractional digits' }]);
    appError(() => kes('onramp', { source_amount: '100.001' }), 'invalid_request');
    appError(() => priceQuote({ direction: 'offramp', currency: 'UGX', payment_method: 'mobile_money', rate: '3705.5', platform_fee: DEFAULT_PLATFORM_FEE, destination_amount: '1000.5' }), 'invalid_request');
  });

  it('refuses what is not a decimal string, and anything but exactly one amount', () => {
    for (const bad of ['-5', '1e3', '１０', ' 10', '10.', '.5', '01.5', '']) {
      const err = appError(() => kes('offramp', { source_amount: bad }), 'invalid_request');
      expect(err.details).to.deep.equal([{ path: 'source_amount', in: 'body', message: 'must be a decimal string' }]);
    }
    expect(appError(() => kes('offramp', {}), 'invalid_request').details).to.deep.equal([{ path: 'source_amount', in: 'body', message: 'source_amount or destination_amount is required' }]);
    appError(() => kes('offramp', { source_amount: '100', destination_amount: '100' }), 'invalid_request');
  });

  it('refuses pairs and directions the registry does not serve', () => {
    const err = appError(() => priceQuote({ direction: 'onramp', currency: 'KES', payment_method: 'paybill', rate: '129.35', platform_fee: DEFAULT_PLATFORM_FEE, source_amount: '100' }), 'unsupported_corridor');
    expect(err.details).to.deep.include({ reason: 'direction_not_supported' });
    appError(() => priceQuote({ direction: 'offramp', currency: 'XOF', payment_method: 'mobile_money', rate: '600', platform_fee: DEFAULT_PLATFORM_FEE, source_amount: '100' }), 'unsupported_corridor');
  });
});

// Properties, against the oracle, for every corridor, each direction it serves, both input forms.
const RENDERED = (scale: number) => new RegExp(`^(0|[1-9][0-9]*)${scale > 0 ? `\\.[0-9]{${scale}}` : ''}$`);

function expectFloor(rendered: string, exact: Dec, scale: number, what: string) {
  const v = new D(rendered);
  expect(v.lte(exact) && v.plus(unit(scale)).gt(exact), `${what} ${rendered} is floor(${exact.toFixed()})`).to.equal(true);
}

function expectCeil(rendered: string, exact: Dec, scale: number, what: string) {
  const v = new D(rendered);
  expect(v.gte(exact) && v.minus(unit(scale)).lt(exact), `${what} ${rendered} is ceil(${exact.toFixed()})`).to.equal(true);
}

function expectStringsOnly(value: unknown, path = 'quote') {
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) expectStringsOnly(v, `${path}.${k}`);
  } else {
    expect(value, path).to.be.a('string');
  }
}

function checkQuote(q: PricedQuote, c: Corridor, direction: Direction, rateText: string, platform: PlatformFee) {
  const offramp = direction === 'offramp';
  const fiatScale = scaleOf(c.currency);
  const [sScale, dScale] = offramp ? [USDC_SCALE, fiatScale] : [fiatScale, USDC_SCALE];
  const rate = new D(rateText);
  const toDest = (x: Dec) => (offramp ? x.times(rate) : x.div(rate));
  const fiatToSource = (x: Dec) => (offramp ? x.div(rate) : x);
  const usdcToSource = (x: Dec) => (offramp ? x : x.times(rate));

  expectStringsOnly(JSON.parse(JSON.stringify(wire(q))));
  for (const [v, s] of [[q.source.amount, sScale], [q.source.total_required, sScale], [q.fees.provider, sScale], [q.fees.platform, sScale], [q.destination.amount, dScale]] as const) {
    expect(v).to.match(RENDERED(s));
  }
  expect(q.fees.currency).to.equal(offramp ? 'USDC' : c.currency);
  expect(q.exchange_rate).to.equal(formatRate(new Decimal(rateText)));

  const source = new D(q.source.amount);
  expectFloor(q.destination.amount, toDest(source), dScale, 'destination');
  const pct = (bps: number) => source.times(bps).div(10_000);
  expectCeil(q.fees.provider, D.max(pct(c.provider_fee.bps), fiatToSource(new D(c.provider_fee.min))), sScale, 'provider fee');
  expectCeil(q.fees.platform, D.max(pct(platform.bps), usdcToSource(new D(platform.min))), sScale, 'platform fee');
  expect(new D(q.source.total_required).eq(source.plus(q.fees.provider).plus(q.fees.platform)), 'total_required').to.equal(true);

  expect(q.minor.source_amount).to.equal(toMinor(q.source.amount, sScale));
  expect(q.minor.total_required).to.equal(toMinor(q.source.total_required, sScale));
  expect(q.minor.destination_amount).to.equal(toMinor(q.destination.amount, dScale));
  const fiatSide = new D(offramp ? q.destination.amount : q.source.amount);
  expect(fiatSide.gte(c.min_amount) && fiatSide.lte(c.max_amount), 'fiat side within the corridor').to.equal(true);
  return { source, toDest, sScale };
}

// Sandbox rates, plus arbitrary ones up to 10^4 (beyond that one micro-USDC is worth more than a cent).
const rateArb = fc.oneof(
  fc.constantFrom(...Object.values(SANDBOX_RATES)),
  fc.bigInt({ min: 10_000n, max: 1_000_000_000_000n }).map((r) => formatRate(new Decimal(r.toString()).div(1e8))),
);
const platformArb = fc.record({ bps: fc.integer({ min: 0, max: 300 }), min: fc.bigInt({ min: 0n, max: 5_000_000n }).map((m) => new Decimal(m.toString()).div(1e6).toFixed()) });

/** USDC minor units whose fiat value lies within the corridor at this rate. */
function usdcRange(c: Corridor, rateText: string): { min: bigint; max: bigint } {
  const perUsdcMinor = new D(rateText).div(1e6);
  return {
    min: BigInt(new D(c.min_amount).div(perUsdcMinor).ceil().toFixed()),
    max: BigInt(new D(c.max_amount).div(perUsdcMinor).floor().toFixed()),
  };
}

/** An on-ramp near the corridor's maximum can be refused for its fees (checked by example above): not this property's case. */
function priceOrSkip(price: () => ReturnType<typeof priceQuote>): ReturnType<typeof priceQuote> {
  try {
    return price();
  } catch (err) {
    fc.pre(!(err instanceof AppError && err.code === 'amount_out_of_range' && err.message.startsWith('With fees')));
    throw err;
  }
}

describe('pricing: properties', () => {
  for (const c of listCorridors()) {
    for (const direction of c.directions) {
      const offramp = direction === 'offramp';
      const fiatScale = scaleOf(c.currency);
      const fiatRange = { min: toMinor(c.min_amount, fiatScale), max: toMinor(c.max_amount, fiatScale) };
      const base = { direction, currency: c.currency, payment_method: c.payment_method };
      const show = (minor: bigint, scale: number) => new D(minor.toString()).times(unit(scale)).toFixed();

      it(`${c.currency} ${c.payment_method} ${direction} from a source amount: exact, never in the customer's favour`, () => {
        const arb = fc.tuple(rateArb, platformArb).chain(([rate, platform]) => {
          const range = offramp ? usdcRange(c, rate) : fiatRange;
          return fc.tuple(fc.constant(rate), fc.constant(platform), fc.bigInt(range));
        });
        fc.assert(fc.property(arb, ([rate, platform, minor]) => {
          const amount = show(minor, offramp ? USDC_SCALE : fiatScale);
          const q = priceOrSkip(() => priceQuote({ ...base, rate, platform_fee: platform, source_amount: amount }));
          checkQuote(q, c, direction, rate, platform);
          expect(new D(q.source.amount).eq(amount)).to.equal(true);
        }));
      });

      it(`${c.currency} ${c.payment_method} ${direction} from a destination amount: the smallest source that delivers it`, () => {
        const arb = fc.tuple(rateArb, platformArb).chain(([rate, platform]) => {
          const range = offramp ? fiatRange : usdcRange(c, rate);
          return fc.tuple(fc.constant(rate), fc.constant(platform), fc.bigInt(range));
        });
        fc.assert(fc.property(arb, ([rate, platform, minor]) => {
          const asked = new D(show(minor, offramp ? fiatScale : USDC_SCALE));
          const q = priceOrSkip(() => priceQuote({ ...base, rate, platform_fee: platform, destination_amount: asked.toFixed() }));
          const { source, toDest, sScale } = checkQuote(q, c, direction, rate, platform);
          expect(new D(q.destination.amount).gte(asked), 'delivers at least the asked amount').to.equal(true);
          expect(toDest(source.minus(unit(sScale))).lt(asked), 'one minor unit less would not').to.equal(true);
          const again = priceQuote({ ...base, rate, platform_fee: platform, source_amount: q.source.amount });
          expect(wire(again)).to.deep.equal(wire(q));
        }));
      });
    }
  }
});

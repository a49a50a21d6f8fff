// Prices a quote (CONTRACT §1 and §6). A rate has at most 8 fractional digits, so every conversion is a ratio of
// bigints: floors and ceilings are exact at any size, where a Decimal division at finite precision could round
// a quotient just past an integer and move a ceiling by a minor unit. What the business or its customer receives
// rounds down; fees round up; the platform never loses a minor unit.
import { AppError } from '../errors.js';
import { corridorError, requireCorridor, type Direction, type FeeSchedule, type PaymentMethod } from './corridors.js';
import { AMOUNT_RE, Decimal, formatRate, fromMinor, scaleOf, toMinor, USDC_SCALE } from './money.js';

const RATE_SCALE = 8;
const BPS_PER_WHOLE = 10_000n;

/**
 * A business's platform fee: `bps` of the source amount, at least `min`. `min` is in USDC (a business has one
 * fee across corridors); on-ramps charge it in fiat, converted at the quote's rate and rounded up.
 */
export type PlatformFee = FeeSchedule;

/** CONTRACT §13: 50 bps unless `admin set-fees` says otherwise; no minimum. */
export const DEFAULT_PLATFORM_FEE: PlatformFee = Object.freeze({ bps: 50, min: '0' });

export interface QuoteInput {
  direction: Direction;
  /** The fiat side, e.g. KES. */
  currency: string;
  payment_method: string;
  /** Exactly one of the two, as the client sent it (a decimal string in the side's unit). */
  source_amount?: string;
  destination_amount?: string;
  /**
   * Off-ramps only, instead of either amount: USDC on hand that must cover the whole total_required (a treasury payout
   * spends what a payment brought in); the largest source whose total fits is priced.
   */
  total_budget?: string;
  /** Fiat units per 1 USDC, at most 8 fractional digits. */
  rate: string;
  platform_fee: PlatformFee;
  /**
   * Live M-Pesa moves whole shillings only: the fiat side, its fees and its total are whole units of the currency
   * (what is paid out rounds down, what is collected and the fees round up).
   */
  whole_fiat?: boolean;
}

type Side = { asset: 'USDC'; currency?: never } | { currency: string; asset?: never };

export interface PricedQuote {
  direction: Direction;
  currency: string;
  payment_method: PaymentMethod;
  source: Side & { amount: string; total_required: string };
  destination: Side & { amount: string };
  exchange_rate: string;
  /** In the source's unit: USDC for off-ramps, the fiat currency for on-ramps. */
  fees: { provider: string; platform: string; currency: string };
  /** The same amounts in minor units of their side, for storage; bigints, so keep them out of JSON. */
  minor: { source_amount: bigint; total_required: bigint; destination_amount: bigint; provider_fee: bigint; platform_fee: bigint };
}

/** source -> destination is `x * num / den` in minor units; the inverse uses den / num. */
interface Ratio { num: bigint; den: bigint }

const pow10 = (n: number) => 10n ** BigInt(n);
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b; // operands are never negative here

/** Smallest source whose floored destination is at least `wanted`: floor(x*num/den) >= y  <=>  x >= y*den/num. */
const solveSource = (wanted: bigint, r: Ratio) => ceilDiv(wanted * r.den, r.num);
const destinationOf = (source: bigint, r: Ratio) => (source * r.num) / r.den;
/** An amount in the destination's unit, charged in the source's: rounded up. */
const chargeInSource = (amount: bigint, r: Ratio) => ceilDiv(amount * r.den, r.num);

function bodyIssue(path: string, message: string, detail: string): AppError {
  return AppError.invalid(message, [{ path, in: 'body', message: detail }]);
}

function parseAmount(value: unknown, path: string, unit: string, scale: number): bigint {
  if (typeof value !== 'string' || !AMOUNT_RE.test(value)) {
    throw bodyIssue(path, `${path} must be a decimal string (digits, at most one point) in ${unit}.`, 'must be a decimal string');
  }
  const [, frac = ''] = value.split('.');
  if (frac.length > scale) throw bodyIssue(path, `${path} has more than ${scale} fractional digits for ${unit}.`, `has more than ${scale} fractional digits`);
  return toMinor(value, scale);
}

/** Configuration, not the client's input: a bad value is our bug, so it is an internal error. */
function parseConfig(value: string, scale: number, what: string): bigint {
  if (!AMOUNT_RE.test(value) || (value.split('.')[1] ?? '').length > scale) throw new AppError('internal_error', `Unusable ${what}.`);
  return toMinor(value, scale);
}

function percentOf(amount: bigint, bps: number, what: string): bigint {
  if (!Number.isInteger(bps) || bps < 0 || bps > 10_000) throw new AppError('internal_error', `Unusable ${what} bps.`);
  return ceilDiv(amount * BigInt(bps), BPS_PER_WHOLE);
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const floorTo = (x: bigint, step: bigint) => (x / step) * step;
const ceilTo = (x: bigint, step: bigint) => ceilDiv(x, step) * step;

/** The largest x in [0, budget] with total(x) <= budget, for a non-decreasing total (0 when none fits). */
function largestWithin(budget: bigint, total: (x: bigint) => bigint): bigint {
  let [lo, hi] = [0n, budget];
  while (lo < hi) {
    const mid = (lo + hi + 1n) / 2n;
    if (total(mid) <= budget) lo = mid;
    else hi = mid - 1n;
  }
  return lo;
}

/** Live M-Pesa (Daraja) takes whole shillings; the sandbox keeps minor units so its arithmetic stays the documented one. */
export function wholeFiatRail(environment: 'sandbox' | 'live', currency: string, paymentMethod: string): boolean {
  return environment === 'live' && requireCorridor(currency, paymentMethod).provider === 'mpesa_daraja';
}

export function priceQuote(input: QuoteInput): PricedQuote {
  const { direction, currency } = input;
  const corridor = requireCorridor(currency, input.payment_method, direction);

  const offramp = direction === 'offramp';
  const fiatScale = scaleOf(currency);
  const [sourceUnit, sourceScale, destUnit, destScale] = offramp
    ? ['USDC', USDC_SCALE, currency, fiatScale]
    : [currency, fiatScale, 'USDC', USDC_SCALE];

  const rate = parseConfig(input.rate, RATE_SCALE, 'exchange rate');
  if (rate === 0n) throw new AppError('internal_error', 'Unusable exchange rate.');
  // USDC minor -> fiat minor multiplies by rate * 10^fiat / 10^(6 + 8); fiat -> USDC is the reciprocal.
  const usdcToFiat: Ratio = { num: rate * pow10(fiatScale), den: pow10(USDC_SCALE + RATE_SCALE) };
  const ratio: Ratio = offramp ? usdcToFiat : { num: usdcToFiat.den, den: usdcToFiat.num };

  const given = [input.source_amount, input.destination_amount, input.total_budget].filter((a) => a !== undefined).length;
  if (given !== 1) {
    const detail = given === 0 ? 'source_amount or destination_amount is required' : 'give source_amount or destination_amount, not both';
    throw bodyIssue(given === 0 ? 'source_amount' : 'destination_amount', 'Give exactly one of source_amount or destination_amount.', detail);
  }

  // Each minimum is stated in its own unit; a minimum in the destination's unit is charged in the source's, rounded up.
  const providerMin = parseConfig(corridor.provider_fee.min, fiatScale, 'provider fee minimum');
  const platformMin = parseConfig(input.platform_fee.min, USDC_SCALE, 'platform fee minimum');
  // The fiat step: one minor unit, or a whole unit of the currency for a rail that moves whole units (on-ramp fees are fiat).
  const step = input.whole_fiat ? pow10(fiatScale) : 1n;
  const fiatFee = (fee: bigint) => (offramp ? fee : ceilTo(fee, step));
  const providerFeeOf = (s: bigint) => fiatFee(max(percentOf(s, corridor.provider_fee.bps, 'provider fee'), offramp ? chargeInSource(providerMin, ratio) : providerMin));
  const platformFeeOf = (s: bigint) => fiatFee(max(percentOf(s, input.platform_fee.bps, 'platform fee'), offramp ? platformMin : chargeInSource(platformMin, ratio)));
  const wholeIssue = (path: string) => bodyIssue(path, `${path} must be a whole number of ${currency}: the live mobile-money rail moves whole units.`, `must be a whole number of ${currency}`);
  const paidOut = (s: bigint) => (offramp ? floorTo(destinationOf(s, ratio), step) : destinationOf(s, ratio));

  let source: bigint;
  let destination: bigint;
  if (input.total_budget !== undefined) {
    if (!offramp) throw new AppError('internal_error', 'A total budget prices off-ramps only.');
    source = largestWithin(parseConfig(input.total_budget, USDC_SCALE, 'total budget'), (s) => s + providerFeeOf(s) + platformFeeOf(s));
    destination = paidOut(source);
  } else if (input.source_amount !== undefined) {
    source = parseAmount(input.source_amount, 'source_amount', sourceUnit, sourceScale);
    if (!offramp && source % step !== 0n) throw wholeIssue('source_amount');
    destination = paidOut(source);
  } else {
    const wanted = parseAmount(input.destination_amount, 'destination_amount', destUnit, destScale);
    if (offramp && wanted % step !== 0n) throw wholeIssue('destination_amount');
    // Off-ramp: the floor to whole units keeps `wanted` (itself whole). On-ramp: the fiat source rounds up to whole units.
    source = offramp ? solveSource(wanted, ratio) : ceilTo(solveSource(wanted, ratio), step);
    destination = paidOut(source);
  }

  const fiatSide = offramp ? destination : source;
  const minAmount = toMinor(corridor.min_amount, fiatScale);
  const maxAmount = toMinor(corridor.max_amount, fiatScale);
  if (source <= 0n || destination <= 0n || fiatSide < minAmount || fiatSide > maxAmount) {
    throw corridorError(
      'amount_out_of_range',
      `${currency} ${corridor.payment_method} quotes must be between ${corridor.min_amount} and ${corridor.max_amount} ${currency}; this one is ${fromMinor(fiatSide, fiatScale)} ${currency}.`,
      { min_amount: corridor.min_amount, max_amount: corridor.max_amount, currency },
    );
  }

  const providerFee = providerFeeOf(source);
  const platformFee = platformFeeOf(source);
  const totalRequired = source + providerFee + platformFee;
  // An on-ramp collects total_required from the payer: that, fees included, is what the rail's limit bounds.
  if (!offramp && totalRequired > maxAmount) {
    throw corridorError(
      'amount_out_of_range',
      `With fees the payer would pay ${fromMinor(totalRequired, fiatScale)} ${currency}, over the ${corridor.max_amount} ${currency} a ${corridor.payment_method} collection allows.`,
      { min_amount: corridor.min_amount, max_amount: corridor.max_amount, currency },
    );
  }

  const side = (unit: string): Side => (unit === 'USDC' ? { asset: 'USDC' } : { currency: unit });
  return {
    direction,
    currency,
    payment_method: corridor.payment_method,
    source: { ...side(sourceUnit), amount: fromMinor(source, sourceScale), total_required: fromMinor(totalRequired, sourceScale) },
    destination: { ...side(destUnit), amount: fromMinor(destination, destScale) },
    exchange_rate: formatRate(new Decimal(input.rate)),
    fees: { provider: fromMinor(providerFee, sourceScale), platform: fromMinor(platformFee, sourceScale), currency: sourceUnit },
    minor: { source_amount: source, total_required: totalRequired, destination_amount: destination, provider_fee: providerFee, platform_fee: platformFee },
  };
}

// The money rules of a transfer to a liquidation address (CONTRACT sections 16 and 18), pure: no database, queue,
// chain or provider. How the off-ramp it becomes is priced, and whether it is priced now, waits for a rate, or goes
// back to its sender. Amounts are bigints in minor units (USDC: 6 decimals; fiat: its currency's scale).

/** Decimal places of an exchange rate (fiat units per 1 USDC). */
export const RATE_SCALE = 8;
const USDC_SCALE = 6;
/** How often a transfer waiting for a fresh rate asks for one again. */
export const RATE_RETRY_MS = 5_000;

export interface LiquidationPriceInput {
  /** USDC that arrived at the address. */
  received: bigint;
  /** Fees in USDC, as priced for the largest payout whose total fits in what arrived (fees round up). */
  fees: { provider: bigint; platform: bigint };
  /** Fiat units per 1 USDC, scaled by 10^RATE_SCALE. */
  rate: bigint;
  /** The fiat currency's decimal places. */
  fiatScale: number;
  /** The fiat step the rail pays in: 1 minor unit, or 10^fiatScale where only whole units move (live M-Pesa). */
  fiatStep: bigint;
  /** The corridor's payout limits, in fiat minor units. */
  limits: { min: bigint; max: bigint };
}

export interface LiquidationPrice {
  /** What is converted: everything that arrived less the fees. */
  source: bigint;
  fees: { provider: bigint; platform: bigint };
  /** Always exactly what arrived: nothing is left over to return after the payout. */
  totalRequired: bigint;
  /** floor(source at the rate), down to the rail's step. */
  destination: bigint;
}

export type LiquidationPricing = { kind: 'priced'; price: LiquidationPrice } | { kind: 'out_of_range'; destination: bigint };

/** Fiat minor units for `usdc` minor units at `rate`, rounded down to `step` (the beneficiary never gets more than it buys). */
export function usdcToFiat(usdc: bigint, rate: bigint, fiatScale: number, step: bigint): bigint {
  const exact = (usdc * rate * 10n ** BigInt(fiatScale)) / 10n ** BigInt(USDC_SCALE + RATE_SCALE);
  return (exact / step) * step;
}

/**
 * Fees come out of what arrived; the rest is converted. total_required is what arrived, so source + fees is exactly
 * it and a completed off-ramp holds nothing to return. Outside the corridor's limits (or nothing left to pay): returned.
 */
export function priceLiquidation(input: LiquidationPriceInput): LiquidationPricing {
  const { received, fees } = input;
  if (received < 0n || fees.provider < 0n || fees.platform < 0n || input.rate <= 0n || input.fiatStep <= 0n) throw new RangeError('liquidation price: negative amount or no rate');
  const source = received - fees.provider - fees.platform;
  const destination = source > 0n ? usdcToFiat(source, input.rate, input.fiatScale, input.fiatStep) : 0n;
  if (source <= 0n || destination <= 0n || destination < input.limits.min || destination > input.limits.max) return { kind: 'out_of_range', destination };
  return { kind: 'priced', price: { source, fees: { ...fees }, totalRequired: received, destination } };
}

export interface UnpricedTransfer {
  /** Known before any price: sent after the address was archived, or to an archived beneficiary. */
  rejected: boolean;
  /** A rate fresh enough to price with was at hand. */
  rateAvailable: boolean;
  /** When the transfer was recorded, and now (ms since the epoch). */
  recordedAtMs: number;
  nowMs: number;
  /** AUTO_REFUND_AFTER_SECONDS: how long a transfer waits for a rate before it goes back. */
  returnAfterSeconds: number;
}

export type PricingStep =
  | { kind: 'price' }
  | { kind: 'wait_for_rate'; retryInMs: number }
  | { kind: 'return'; reason: 'rejected' | 'rate_unavailable' };

/**
 * What happens to a recorded transfer not yet priced: one already ruled out goes back; one with a fresh rate is priced
 * now; without one it waits (asking again every RATE_RETRY_MS, never past its deadline) until
 * AUTO_REFUND_AFTER_SECONDS after it was recorded, then goes back to its sender unpriced.
 */
export function nextPricingStep(t: UnpricedTransfer): PricingStep {
  if (t.rejected) return { kind: 'return', reason: 'rejected' };
  if (t.rateAvailable) return { kind: 'price' };
  const left = t.recordedAtMs + t.returnAfterSeconds * 1000 - t.nowMs;
  if (left <= 0) return { kind: 'return', reason: 'rate_unavailable' };
  return { kind: 'wait_for_rate', retryInMs: Math.min(RATE_RETRY_MS, left) };
}

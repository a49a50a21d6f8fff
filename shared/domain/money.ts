import { Decimal } from 'decimal.js';

// Money never touches a float: amounts are decimal strings at the edge and bigint minor units inside.

export const USDC_SCALE = 6;

/** ISO 4217 minor units of the currencies we serve. */
export const FIAT_SCALES: Record<string, number> = {
  KES: 2, UGX: 0, TZS: 2, GHS: 2, NGN: 2, ZAR: 2, RWF: 0, XOF: 0, USD: 2, EUR: 2, GBP: 2, CAD: 2,
};

export const AMOUNT_RE = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;

export class AmountError extends Error {}

export function scaleOf(assetOrCurrency: string): number {
  if (assetOrCurrency === 'USDC') return USDC_SCALE;
  const scale = FIAT_SCALES[assetOrCurrency];
  if (scale === undefined) throw new AmountError(`unknown currency ${assetOrCurrency}`);
  return scale;
}

/** "12.5" at scale 2 -> 1250n. More fractional digits than the scale is an error, never a silent rounding. */
export function toMinor(amount: string, scale: number): bigint {
  const match = AMOUNT_RE.exec(amount);
  if (!match) throw new AmountError(`"${amount}" is not a decimal amount`);
  const [whole, frac = ''] = amount.split('.');
  if (frac.length > scale) throw new AmountError(`"${amount}" has more than ${scale} fractional digits`);
  return BigInt(whole) * 10n ** BigInt(scale) + BigInt(frac.padEnd(scale, '0') || '0');
}

/** Whether two decimal strings are the same amount at `scale`: false when either is not a decimal of at most that scale. */
export function sameAmount(a: string, b: string, scale: number): boolean {
  try {
    return toMinor(a, scale) === toMinor(b, scale);
  } catch (err) {
    if (err instanceof AmountError) return false;
    throw err;
  }
}

/** 1250n at scale 2 -> "12.50": always exactly `scale` fractional digits. */
export function fromMinor(minor: bigint, scale: number): string {
  const negative = minor < 0n;
  const abs = negative ? -minor : minor;
  const base = 10n ** BigInt(scale);
  const whole = abs / base;
  const frac = (abs % base).toString().padStart(scale, '0');
  return `${negative ? '-' : ''}${whole}${scale > 0 ? `.${frac}` : ''}`;
}

/**
 * Re-renders a decimal string at exactly the scale (the input must not exceed it): the digits padded as text, which is
 * what the bigint round trip gives, without its allocations on every amount of every view.
 */
export function formatAmount(amount: string, scale: number): string {
  if (!AMOUNT_RE.test(amount)) throw new AmountError(`"${amount}" is not a decimal amount`);
  const dot = amount.indexOf('.');
  const whole = dot < 0 ? amount : amount.slice(0, dot);
  const frac = dot < 0 ? '' : amount.slice(dot + 1);
  if (frac.length > scale) throw new AmountError(`"${amount}" has more than ${scale} fractional digits`);
  return scale > 0 ? `${whole}.${frac.padEnd(scale, '0')}` : whole;
}

export type Rounding = 'down' | 'up';

/** value (a Decimal expression) -> minor units, rounding down (what a customer receives) or up (fees). */
export function decimalToMinor(value: Decimal, scale: number, rounding: Rounding): bigint {
  const scaled = value.times(new Decimal(10).pow(scale));
  const rounded = scaled.toDecimalPlaces(0, rounding === 'down' ? Decimal.ROUND_FLOOR : Decimal.ROUND_CEIL);
  return BigInt(rounded.toFixed(0));
}

export function minorToDecimal(minor: bigint, scale: number): Decimal {
  return new Decimal(minor.toString()).div(new Decimal(10).pow(scale));
}

/** A stored amount (numeric text) rendered at exactly its asset's or currency's scale. */
export function renderAmount(value: string, unit: string): string {
  return formatAmount(value, scaleOf(unit));
}

/** A side of a quote or transaction names its unit: `{ asset: 'USDC' }` or `{ currency: 'KES' }`. */
export function unitOf(unit: string): { asset: string } | { currency: string } {
  return unit === 'USDC' ? { asset: 'USDC' } : { currency: unit };
}

/** Exchange rates: up to 8 fractional digits, trailing zeros trimmed. */
export function formatRate(rate: Decimal): string {
  return rate.toDecimalPlaces(8, Decimal.ROUND_DOWN).toFixed();
}

const PLAIN_DECIMAL = /^(0|[1-9][0-9]*)(?:\.([0-9]+))?$/;

/** formatRate of a rate as PostgreSQL writes a numeric (`129.350000`), by its digits alone; any other form the Decimal way. */
export function rateText(value: string): string {
  const plain = PLAIN_DECIMAL.exec(value);
  if (!plain) return formatRate(new Decimal(value));
  const frac = (plain[2] ?? '').slice(0, 8).replace(/0+$/, '');
  return frac ? `${plain[1]}.${frac}` : plain[1];
}

export { Decimal };

// A business's platform fee (CONTRACT §13): stored on the business, set by `npm run admin -- set-fees`, read by
// whatever prices for it. One module parses and renders it, so the CLI, GET /account and pricing agree.
import type { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../errors.js';
import { AMOUNT_RE, formatAmount, USDC_SCALE } from './money.js';
import type { PlatformFee } from './pricing.js';
import { planOnce } from '../db/prepared-client.js';

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export const MAX_PLATFORM_FEE_BPS = 10_000;
/** A minimum beyond a billion USDC is a typo, not a price. */
const MAX_MIN_WHOLE_DIGITS = 9;

/** The columns of `businesses` (aliased `alias`) that hold the fee, for a SELECT list; read them with feeFromRow. */
export const feeColumns = (alias: string) =>
  `${alias}.platform_fee_bps, round(${alias}.platform_fee_min, 6)::text AS platform_fee_min`;

export interface FeeRow { platform_fee_bps: number; platform_fee_min: string }

export function feeFromRow(row: FeeRow): PlatformFee {
  return { bps: row.platform_fee_bps, min: formatAmount(row.platform_fee_min, USDC_SCALE) };
}

/** The business's fee, `min` in USDC at exactly 6 decimals. */
export async function platformFeeOf(q: Queryable, businessId: string): Promise<PlatformFee> {
  const rows: FeeRow[] = await q.query(planOnce(`SELECT ${feeColumns('b')} FROM businesses b WHERE b.id = $1`), [businessId]);
  if (!rows[0]) throw new AppError('not_found', 'No such business.');
  return feeFromRow(rows[0]);
}

/** Why `bps` is not a usable fee, or null. Whole basis points from 0 to 10000 (100 %). */
export function platformBpsProblem(bps: unknown): string | null {
  const ok = (typeof bps === 'number' && Number.isInteger(bps)) || (typeof bps === 'string' && /^\d{1,5}$/.test(bps));
  return ok && Number(bps) >= 0 && Number(bps) <= MAX_PLATFORM_FEE_BPS ? null : `must be an integer from 0 to ${MAX_PLATFORM_FEE_BPS}`;
}

/** Why `min` is not a usable minimum, or null. A USDC decimal string with at most 6 decimals. */
export function platformMinProblem(min: unknown): string | null {
  if (typeof min !== 'string' || !AMOUNT_RE.test(min)) return 'must be a decimal amount in USDC, e.g. 0.50';
  const [whole, frac = ''] = min.split('.');
  if (frac.length > USDC_SCALE) return `must have at most ${USDC_SCALE} decimals (USDC)`;
  if (whole.length > MAX_MIN_WHOLE_DIGITS) return `must be below 10^${MAX_MIN_WHOLE_DIGITS} USDC`;
  return null;
}

/** Sets the fee (the minimum only when given); the business's fee as stored afterwards, or null if there is no such business. */
export async function updatePlatformFee(q: Queryable, businessId: string, bps: number, min?: string): Promise<PlatformFee | null> {
  // TypeORM answers an UPDATE with [rows, affected].
  const [rows]: [FeeRow[], number] = await q.query(
    `UPDATE businesses b SET platform_fee_bps = $2, platform_fee_min = COALESCE($3::numeric, b.platform_fee_min), updated_at = now()
      WHERE b.id = $1 RETURNING ${feeColumns('b')}`,
    [businessId, bps, min ?? null],
  );
  return rows[0] ? feeFromRow(rows[0]) : null;
}

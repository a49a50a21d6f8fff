import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { momoServes, requireLiveProvider } from '../providers/live-rails.js';
import { loadActiveBeneficiary } from './beneficiaries.js';
import { AppError } from '../errors.js';
import type { Unit } from '../db/unit-of-work.js';
import type { RecordRef } from '../db/idempotency-records.js';
import { jobId } from '../queues/registry.js';
import type { JobRequest } from '../queues/producer.js';
import type { Chain, Environment } from './chains.js';
import type { EventScope } from './events.js';
import { corridorError, requireCorridor, type Corridor, type Direction, type PaymentMethod } from './corridors.js';
import { AmountError, Decimal, formatAmount, formatRate, renderAmount, scaleOf, toMinor, unitOf } from './money.js';
import { QUOTE_MACHINE, type QuoteStatus } from './machines.js';
import { insertCreated, transition } from './transition.js';
import type { PricedQuote } from './pricing.js';
import type { RateQuote } from './rates.js';
import { assertActive, findWallet } from './wallets.js';
import { byIdInScope, planOnce } from '../db/prepared-client.js';
import { feeColumns, type FeeRow } from './fees.js';

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export interface QuoteRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  direction: Direction;
  status: QuoteStatus;
  chain: Chain;
  currency: string;
  payment_method: PaymentMethod;
  requested_side: 'source' | 'destination';
  requested_amount: string;
  beneficiary_id: string | null;
  wallet_id: string | null;
  exchange_rate: string | null;
  source_amount: string | null;
  total_required: string | null;
  destination_amount: string | null;
  provider_fee: string | null;
  platform_fee: string | null;
  expires_at: Date | null;
  failure: { code: string; message: string; details?: unknown } | null;
  created_at: Date;
  updated_at: Date;
}

export interface CreateQuoteInput {
  direction: Direction;
  chain: Chain;
  currency: string;
  payment_method: PaymentMethod;
  source_amount?: string;
  destination_amount?: string;
  beneficiary_id?: string;
  wallet_id?: string;
}

const COLUMNS = `id, business_id, environment, direction, status, chain, currency, payment_method, requested_side, requested_amount::text,
  beneficiary_id, wallet_id, exchange_rate::text, source_amount::text, total_required::text, destination_amount::text, provider_fee::text,
  platform_fee::text, expires_at, failure, created_at, updated_at`;

export const quoteJobs = {
  price: (quoteId: string, answers?: RecordRef): JobRequest<'quote.price'> => ({ name: 'quote.price', id: jobId('quote.price', quoteId), data: answers ? { quoteId, answers } : { quoteId } }),
  expire: (quoteId: string, delayMs: number): JobRequest<'quote.expire'> => ({ name: 'quote.expire', id: jobId('quote.expire', quoteId), data: { quoteId }, delayMs }),
};

/** Units of each side: off-ramps go USDC -> fiat, on-ramps fiat -> USDC. */
export function sidesOf(direction: Direction, currency: string): { source: string; destination: string } {
  return direction === 'offramp' ? { source: 'USDC', destination: currency } : { source: currency, destination: 'USDC' };
}

function invalid(path: string, message: string): AppError {
  return AppError.invalid(`${path} ${message}.`, [{ path, in: 'body', message }]);
}

/** The requested amount, refused (400) unless it is a decimal at its side's scale and more than zero. */
function requestedAmount(input: CreateQuoteInput, units: { source: string; destination: string }): { side: 'source' | 'destination'; amount: string } {
  if ((input.source_amount === undefined) === (input.destination_amount === undefined)) {
    throw invalid('source_amount', 'or destination_amount is required, and only one of them');
  }
  const side = input.source_amount !== undefined ? 'source' : 'destination';
  const amount = (input.source_amount ?? input.destination_amount)!;
  const unit = units[side];
  try {
    if (toMinor(amount, scaleOf(unit)) <= 0n) throw invalid(`${side}_amount`, 'must be more than zero');
  } catch (err) {
    if (err instanceof AmountError) throw invalid(`${side}_amount`, `must be a ${unit} amount with at most ${scaleOf(unit)} decimals`);
    throw err;
  }
  return { side, amount: formatAmount(amount, scaleOf(unit)) };
}

/** An off-ramp quote's beneficiary as the quote's insert read it: it exists here, is active, and is paid in the quote's currency by its method. */
function checkBeneficiary(b: { status: string | null; currency: string | null; payment_method: string | null }, id: string, currency: string, method: string): void {
  if (b.status === null) throw new AppError('not_found', 'No such beneficiary.', { param: 'beneficiary_id' });
  if (b.status !== 'active') throw new AppError('resource_archived', 'This beneficiary is archived and cannot be used.', { beneficiary_id: id });
  if (b.currency !== currency || b.payment_method !== method) {
    throw corridorError('unsupported_corridor', `This beneficiary is paid in ${b.currency} by ${b.payment_method}, not ${currency} by ${method}.`, {
      reason: 'beneficiary_mismatch', beneficiary_currency: b.currency, beneficiary_payment_method: b.payment_method,
    });
  }
}

/** On-ramp: USDC goes to a managed wallet or a verified external wallet on the quote's chain. */
async function checkDestinationWallet(em: EntityManager, scope: EventScope, id: string, chain: Chain): Promise<void> {
  const wallet = await findWallet(em, scope, id).catch((err: unknown) => {
    throw err instanceof AppError && err.code === 'not_found' ? new AppError('not_found', 'No such wallet.', { param: 'wallet_id' }) : err;
  });
  assertActive(wallet);
  if (wallet.type === 'external_wallet') {
    if (wallet.ownership_status !== 'verified') throw new AppError('wallet_not_verified', 'An external wallet must prove its ownership before it receives USDC.', { wallet_id: id });
    if (wallet.chain !== chain) throw invalid('wallet_id', `is registered on ${wallet.chain}, not ${chain}`);
  }
}

/** The corridor a ramp of `direction` runs through in this environment, or 422 `unsupported_corridor` saying why not. */
export function rampCorridor(config: Config, environment: Environment, currency: string, paymentMethod: string, direction: Direction): Corridor {
  const corridor = requireCorridor(currency, paymentMethod, direction);
  if (environment === 'live') requireLiveProvider(config, currency, corridor.payment_method);
  return corridor;
}

/** Checks what needs no price, writes the quote `pending` and stages its pricing job, in the caller's transaction. */
/** `answers`: the idempotency record of the request that waits for the quote's price, which its pricing answers. */
export async function createQuote(unit: Unit, config: Config, scope: EventScope, id: string, input: CreateQuoteInput, answers?: RecordRef): Promise<QuoteRow> {
  const currency = input.currency.toUpperCase();
  const corridor = rampCorridor(config, scope.environment, currency, input.payment_method, input.direction);
  const units = sidesOf(input.direction, currency);
  const requested = requestedAmount(input, units);
  if (input.direction === 'offramp') {
    if (!input.beneficiary_id) throw invalid('beneficiary_id', 'is required for an off-ramp quote');
    if (input.wallet_id) throw invalid('wallet_id', 'belongs to on-ramp quotes (the off-ramp names its funding wallet when it starts)');
    // Its beneficiary is checked by the quote's own insert, below.
  } else {
    if (!input.wallet_id) throw invalid('wallet_id', 'is required for an on-ramp quote');
    if (input.beneficiary_id) throw invalid('beneficiary_id', 'belongs to off-ramp quotes');
    await checkDestinationWallet(unit.em, scope, input.wallet_id, input.chain);
  }
  // One statement: an off-ramp's beneficiary read (it must exist, be active and be paid as the quote pays) and the
  // quote written only if it is; what was read says why not.
  const [row]: (QuoteRow & { beneficiary_status: string | null; beneficiary_currency: string | null; beneficiary_method: string | null })[] = await unit.em.query(
    planOnce(`WITH b AS (SELECT status, currency, payment_method FROM beneficiaries WHERE id = $10::uuid AND (business_id = $2 AND environment = $3) IS TRUE),
     ins AS (INSERT INTO quotes (id, business_id, environment, direction, chain, currency, payment_method, requested_side, requested_amount, beneficiary_id, wallet_id)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
        WHERE $10::uuid IS NULL OR EXISTS (SELECT 1 FROM b WHERE b.status = 'active' AND b.currency = $6 AND b.payment_method = $7)
       RETURNING ${COLUMNS})
     SELECT ins.*, b.status AS beneficiary_status, b.currency AS beneficiary_currency, b.payment_method AS beneficiary_method
       FROM (SELECT 1) one LEFT JOIN ins ON true LEFT JOIN b ON true`),
    [id, scope.businessId, scope.environment, input.direction, input.chain, currency, corridor.payment_method, requested.side, requested.amount,
      input.beneficiary_id ?? null, input.wallet_id ?? null],
  );
  const { beneficiary_status: status, beneficiary_currency: paidIn, beneficiary_method: paidBy, ...quote } = row;
  if (input.beneficiary_id) {
    checkBeneficiary({ status, currency: paidIn, payment_method: paidBy }, input.beneficiary_id, currency, corridor.payment_method);
    // MTN MoMo pays its own network only: the beneficiary's network must be one a live provider serves (refused, the
    // unit and the quote with it are rolled back).
    if (scope.environment === 'live' && corridor.payment_method === 'mobile_money' && momoServes(config, currency)) {
      const { details } = await loadActiveBeneficiary(unit.em, config.encryptionKeys, scope, input.beneficiary_id);
      requireLiveProvider(config, currency, corridor.payment_method, details.mobile_network);
    }
  }
  await unit.stage(quoteJobs.price(id, answers), scope);
  return quote as QuoteRow;
}

/** What a payout priced by the service itself (not asked for by a quote request) is priced at. */
export type ServicePrice = Pick<PricedQuote, 'currency' | 'payment_method' | 'exchange_rate'> & {
  source: { amount: string; total_required: string };
  destination: { amount: string };
  fees: { provider: string; platform: string };
};

/** A payout the service prices itself and starts at once (an intent's payout, a liquidation transfer, a batch item). */
export interface ConsumedQuote {
  chain: Chain;
  beneficiaryId: string;
  priced: ServicePrice;
  /** When the rate was observed; null for a payout returned unpriced because no fresh rate came. */
  rateAsOf: string | null;
  /** Which side the amount was given for (a batch item in fiat: `destination`); `source` by default. */
  requestedSide?: 'source' | 'destination';
}

/**
 * The quotes of payouts the service prices itself, written already consumed with their creation history, in one
 * statement each: the transactions that follow in the same unit copy their price. The rows in the order given.
 */
export async function insertConsumedQuotes(unit: Unit, scope: EventScope, quotes: ConsumedQuote[]): Promise<QuoteRow[]> {
  if (!quotes.length) return [];
  const ids = quotes.map(() => randomUUID());
  const col = <T>(f: (q: ConsumedQuote) => T) => quotes.map(f);
  return insertCreated<QuoteStatus, QuoteRow>(unit, QUOTE_MACHINE, scope, 'consumed', {
    text: `INSERT INTO quotes (id, business_id, environment, direction, status, chain, currency, payment_method, requested_side, requested_amount, beneficiary_id,
       exchange_rate, rate_as_of, source_amount, total_required, destination_amount, provider_fee, platform_fee, expires_at)
     SELECT id, $1, $2, 'offramp', 'consumed', chain, currency, method, side, CASE side WHEN 'source' THEN src ELSE dst END, ben, rate, as_of, src, total, dst, pfee, plat, now()
       FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::numeric[], $10::timestamptz[], $11::numeric[], $12::numeric[], $13::numeric[],
                   $14::numeric[], $15::numeric[]) WITH ORDINALITY AS x(id, chain, currency, method, side, ben, rate, as_of, src, total, dst, pfee, plat, o)
      ORDER BY o
     RETURNING ${COLUMNS}`,
    params: [scope.businessId, scope.environment, ids, col((q) => q.chain), col((q) => q.priced.currency), col((q) => q.priced.payment_method), col((q) => q.requestedSide ?? 'source'),
      col((q) => q.beneficiaryId), col((q) => q.priced.exchange_rate), col((q) => q.rateAsOf), col((q) => q.priced.source.amount), col((q) => q.priced.source.total_required),
      col((q) => q.priced.destination.amount), col((q) => q.priced.fees.provider), col((q) => q.priced.fees.platform)],
    prepared: false,
    ids,
  }, () => ({}));
}

/** One such quote. */
export async function insertConsumedQuote(unit: Unit, scope: EventScope, quote: ConsumedQuote): Promise<QuoteRow> {
  return (await insertConsumedQuotes(unit, scope, [quote]))[0];
}

export async function findQuote(q: Queryable, scope: EventScope, id: string): Promise<QuoteRow> {
  const rows: QuoteRow[] = await q.query(planOnce(`SELECT ${COLUMNS} FROM quotes WHERE ${byIdInScope()}`), [id, scope.businessId, scope.environment]);
  if (!rows[0]) throw AppError.notFound('quote');
  return rows[0];
}

/** The quote and its business's fee (`feeFromRow` reads it), for the pricing job: one query. */
export async function loadQuoteToPrice(q: Queryable, id: string): Promise<(QuoteRow & FeeRow) | undefined> {
  return ((await q.query(
    planOnce(`SELECT q.*, f.* FROM (SELECT ${COLUMNS} FROM quotes WHERE id = $1) q CROSS JOIN LATERAL (SELECT ${feeColumns('b')} FROM businesses b WHERE b.id = q.business_id) f`),
    [id],
  )) as (QuoteRow & FeeRow)[])[0];
}

/** For jobs, which carry ids only. */
export async function loadQuote(q: Queryable, id: string): Promise<QuoteRow | undefined> {
  return ((await q.query(planOnce(`SELECT ${COLUMNS} FROM quotes WHERE id = $1`), [id])) as QuoteRow[])[0];
}

/** An available quote whose expiry has passed is expired, even before the expiry job has run. */
export function effectiveStatus(row: Pick<QuoteRow, 'status' | 'expires_at'>, now = new Date()): QuoteStatus {
  return row.status === 'available' && row.expires_at && row.expires_at <= now ? 'expired' : row.status;
}

const amount = (value: string | null, unit: string): string | null => (value === null ? null : renderAmount(value, unit));
const side = unitOf;

export function quoteView(row: QuoteRow): Record<string, unknown> {
  const units = sidesOf(row.direction, row.currency);
  const requested = (s: 'source' | 'destination') => (row.requested_side === s ? row.requested_amount : null);
  return {
    id: row.id,
    direction: row.direction,
    status: effectiveStatus(row),
    chain: row.chain,
    currency: row.currency,
    payment_method: row.payment_method,
    source: { ...side(units.source), amount: amount(row.source_amount ?? requested('source'), units.source), total_required: amount(row.total_required, units.source) },
    destination: { ...side(units.destination), amount: amount(row.destination_amount ?? requested('destination'), units.destination), ...(units.destination === 'USDC' ? { chain: row.chain } : {}) },
    exchange_rate: row.exchange_rate === null ? null : formatRate(new Decimal(row.exchange_rate)),
    fees: row.provider_fee === null ? null : { provider: amount(row.provider_fee, units.source), platform: amount(row.platform_fee, units.source), currency: units.source },
    beneficiary_id: row.beneficiary_id,
    wallet_id: row.wallet_id,
    expires_at: row.expires_at ? row.expires_at.toISOString() : null,
    failure: row.failure ? { code: row.failure.code, message: row.failure.message } : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

const scopeOf = (row: QuoteRow): EventScope => ({ businessId: row.business_id, environment: row.environment });

/** What the pricing job answers for a quote it priced: the quote as the API shows it (markPriced's answer). */
export interface PricedOutcome {
  outcome: 'available';
  quote: Record<string, unknown>;
  /** The priced quote as the answer's body, written into the waiting request's record by the pricing unit (when the job carried it). */
  answer?: string;
}

/** The priced quote a pricing job's answer carries (it reached the web process through Redis), if it carries one. */
export function pricedQuoteOf(returned: unknown): Pick<PricedOutcome, 'quote' | 'answer'> | undefined {
  const priced = returned as Partial<PricedOutcome> | null | undefined;
  if (priced?.outcome !== 'available' || !priced.quote || typeof priced.quote !== 'object') return undefined;
  return { quote: priced.quote, answer: typeof priced.answer === 'string' ? priced.answer : undefined };
}

/**
 * pending -> available with its price, valid `ttlSeconds` (expiry.quotes expires it then). Answers the priced quote as
 * the API shows it (its event's data), or null if it was not pending.
 */
export async function markPriced(unit: Unit, row: QuoteRow, priced: PricedQuote, rate: RateQuote, ttlSeconds: number): Promise<Record<string, unknown> | null> {
  let shown: Record<string, unknown> | null = null;
  const expiresAt = new Date(Date.now() + ttlSeconds * 1000);
  const moved = await transition<QuoteStatus, QuoteRow>(unit, QUOTE_MACHINE, {
    scope: scopeOf(row),
    id: row.id,
    to: 'available',
    expected: row.status,
    set: {
      exchange_rate: priced.exchange_rate,
      rate_as_of: rate.as_of,
      source_amount: priced.source.amount,
      total_required: priced.source.total_required,
      destination_amount: priced.destination.amount,
      provider_fee: priced.fees.provider,
      platform_fee: priced.fees.platform,
      expires_at: expiresAt,
    },
    view: (updated) => (shown = quoteView({ ...updated, requested_amount: String(updated.requested_amount) })),
  });
  return moved && shown;
}

/** pending -> failed, with the reason the business sees on GET. */
export async function markFailed(unit: Unit, row: QuoteRow, failure: { code: string; message: string; details?: unknown }): Promise<boolean> {
  const moved = await transition<QuoteStatus, QuoteRow>(unit, QUOTE_MACHINE, {
    scope: scopeOf(row), id: row.id, to: 'failed', expected: row.status, set: { failure }, reason: failure.code, view: () => ({}),
  });
  return moved !== null;
}

/** available -> expired once its time has passed (an early or repeated job changes nothing). */
export async function markExpired(unit: Unit, row: QuoteRow): Promise<boolean> {
  if (effectiveStatus(row) !== 'expired' || row.status !== 'available') return false;
  const moved = await transition<QuoteStatus, QuoteRow>(unit, QUOTE_MACHINE, { scope: scopeOf(row), id: row.id, to: 'expired', expected: row.status, view: () => ({}) });
  return moved !== null;
}

import type { DataSource, EntityManager } from 'typeorm';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { corridorError } from './corridors.js';
import type { Unit } from '../db/unit-of-work.js';
import { findScoped } from '../db/pagination.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { platformFeeOf } from './fees.js';
import { InsufficientFundsError } from './ledger.js';
import { apply } from '../kernel/apply.js';
import { batchFundingPlan } from '../kernel/debits.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { PAYOUT_BATCH_MACHINE, type PayoutBatchStatus } from './machines.js';
import { formatAmount, fromMinor, USDC_SCALE } from './money.js';
import { priceQuote, wholeFiatRail, type PricedQuote } from './pricing.js';
import { insertConsumedQuotes, rampCorridor } from './quotes.js';
import type { RateQuote } from './rates.js';
import { insertTransactions, moveTransactions, scopeOf, type TransactionRow } from './transactions.js';
import { NOW, recordCreation, transition } from './transition.js';

// Payout batches (CONTRACT section 16): one request pays up to 500 beneficiaries from the treasury. The whole batch is
// validated and priced before anything is written (any bad item: 422 invalid_batch naming each by its index); then,
// in one unit, each item becomes a treasury-funded off-ramp (funded at once, its payout job staged) and the treasury is
// debited once for the batch's total (409 insufficient_funds when short: nothing is written). Each item then lives as
// any treasury-funded payout does; a failed one gives its USDC back to the treasury. The batch is completed when every
// item is completed or failed, and says so in one event. Its counts are derived from its items, never kept by hand.

type Queryable = Pick<DataSource | EntityManager, 'query'>;

export const MAX_BATCH_ITEMS = 500;
/** The chain named on a batch item's quote and transaction: treasury payouts move no USDC on chain to start. */
const BATCH_CHAIN: Chain = 'base';

export interface PayoutBatchItemInput {
  beneficiary_id: string;
  /** Fiat (`currency`): what the beneficiary receives. USDC (`asset`): the item's `source.amount`, fees on top. */
  amount: { currency: string; value: string } | { asset: 'USDC'; value: string };
  external_reference?: string;
}

export interface CreatePayoutBatchInput {
  items: PayoutBatchItemInput[];
  external_reference?: string;
}

export interface BatchRow {
  id: string;
  business_id: string;
  environment: 'sandbox' | 'live';
  status: PayoutBatchStatus;
  items_count: number;
  total_usdc: string;
  external_reference: string | null;
  completed_count: number;
  failed_count: number;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface ItemRow {
  id: string;
  payout_batch_index: number;
  beneficiary_id: string;
  status: string;
  external_reference: string | null;
  failure: { code: string; message: string } | null;
}

export const BATCH_COLUMNS = `b.id, b.business_id, b.environment, b.status, b.items_count, b.total_usdc::text, b.external_reference, b.completed_at, b.created_at, b.updated_at,
  (SELECT count(*)::int FROM transactions x WHERE x.payout_batch_id = b.id AND x.status = 'completed') AS completed_count,
  (SELECT count(*)::int FROM transactions x WHERE x.payout_batch_id = b.id AND x.status = 'failed') AS failed_count`;

/** The batch as the API and its event show it; `items` on creation, detail and the event (a list leaves them out). */
export function batchView(row: BatchRow, items?: ItemRow[]): Record<string, unknown> {
  return {
    id: row.id,
    status: row.status,
    items_count: row.items_count,
    total_usdc: formatAmount(row.total_usdc, USDC_SCALE),
    completed_count: row.completed_count,
    failed_count: row.failed_count,
    external_reference: row.external_reference,
    ...(items ? {
      items: items.map((i) => ({
        index: i.payout_batch_index, beneficiary_id: i.beneficiary_id, transaction_id: i.id, status: i.status, external_reference: i.external_reference,
        failure: i.failure ? { code: i.failure.code, message: i.failure.message } : null,
      })),
    } : {}),
    completed_at: row.completed_at ? row.completed_at.toISOString() : null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

async function itemsOf(q: Queryable, batchId: string): Promise<ItemRow[]> {
  return q.query(
    `SELECT id, payout_batch_index, beneficiary_id, status, external_reference, failure FROM transactions WHERE payout_batch_id = $1 ORDER BY payout_batch_index`, [batchId],
  );
}

/** GET /payout-batches/{id}: the batch with its items (404 outside the caller's business and environment). */
export async function findBatchView(q: Queryable, scope: EventScope, id: string): Promise<Record<string, unknown>> {
  const row = await findScoped<BatchRow>(q, { from: 'payout_batches b', columns: BATCH_COLUMNS, resource: 'payout batch' }, scope, id);
  return batchView(row, await itemsOf(q, id));
}

/** The currencies (with a usable off-ramp corridor here) of the batch's beneficiaries: the rates its pricing needs. */
export async function currenciesToPrice(q: Queryable, config: Config, scope: EventScope, input: CreatePayoutBatchInput): Promise<string[]> {
  const rows: { currency: string; payment_method: string }[] = await q.query(
    `SELECT DISTINCT currency, payment_method FROM beneficiaries WHERE id = ANY($1::uuid[]) AND business_id = $2 AND environment = $3 AND status = 'active'`,
    [[...new Set(input.items.map((i) => i.beneficiary_id))], scope.businessId, scope.environment],
  );
  const usable = rows.filter((r) => {
    try {
      return Boolean(rampCorridor(config, scope.environment, r.currency, r.payment_method, 'offramp'));
    } catch {
      return false;
    }
  });
  return [...new Set(usable.map((r) => r.currency))].sort();
}

interface BatchIssue {
  index: number;
  code: string;
  message: string;
}

interface PricedItem {
  input: PayoutBatchItemInput;
  priced: PricedQuote;
  rate: RateQuote;
  side: 'source' | 'destination';
}

const issueOf = (index: number, err: AppError): BatchIssue => ({ index, code: err.code, message: err.message });
/** A fault of the item itself; an outage or a bug fails the whole request as it would a single payout. */
const isItemFault = (err: unknown): err is AppError => err instanceof AppError && err.code !== 'service_unavailable' && err.code !== 'internal_error';

/**
 * Every item checked and priced as a single payout would be (its beneficiary active and paid in the amount's
 * currency, the corridor served here, the amount at its scale and within the corridor's limits, its
 * external_reference unused); the issues, one per bad item, or the priced items. Beneficiaries are locked against
 * archiving until the unit commits.
 */
async function priceItems(unit: Unit, config: Config, scope: EventScope, input: CreatePayoutBatchInput, rates: ReadonlyMap<string, RateQuote>): Promise<{ issues: BatchIssue[]; priced: PricedItem[] }> {
  const beneficiaries = new Map<string, { status: string; currency: string; payment_method: string }>(
    ((await unit.em.query(
      `SELECT id, status, currency, payment_method FROM beneficiaries WHERE id = ANY($1::uuid[]) AND business_id = $2 AND environment = $3 ORDER BY id FOR SHARE`,
      [[...new Set(input.items.map((i) => i.beneficiary_id))], scope.businessId, scope.environment],
    )) as { id: string; status: string; currency: string; payment_method: string }[]).map((b) => [b.id, b]),
  );
  const references = input.items.flatMap((i) => (i.external_reference === undefined ? [] : [i.external_reference]));
  const taken = new Set<string>(references.length
    ? ((await unit.em.query(
      `SELECT external_reference FROM transactions WHERE business_id = $1 AND environment = $2 AND external_reference = ANY($3::text[])`, [scope.businessId, scope.environment, references],
    )) as { external_reference: string }[]).map((r) => r.external_reference)
    : []);
  const platformFee = await platformFeeOf(unit.em, scope.businessId);
  const firstIndex = new Map<string, number>();
  const issues: BatchIssue[] = [];
  const priced: PricedItem[] = [];
  input.items.forEach((item, index) => {
    try {
      const b = beneficiaries.get(item.beneficiary_id);
      if (!b) throw new AppError('not_found', 'No such beneficiary.');
      if (b.status !== 'active') throw new AppError('resource_archived', 'This beneficiary is archived and cannot be paid.');
      const corridor = rampCorridor(config, scope.environment, b.currency, b.payment_method, 'offramp');
      const fiat = 'currency' in item.amount ? item.amount.currency.toUpperCase() : null;
      if (fiat !== null && fiat !== b.currency) {
        throw corridorError('unsupported_corridor', `This beneficiary is paid in ${b.currency}, not ${fiat}.`);
      }
      const ref = item.external_reference;
      if (ref !== undefined && firstIndex.has(ref)) throw new AppError('invalid_state', `external_reference repeats item ${firstIndex.get(ref)}'s.`);
      if (ref !== undefined) firstIndex.set(ref, index);
      if (ref !== undefined && taken.has(ref)) throw new AppError('invalid_state', 'A transaction with this external_reference already exists.');
      const rate = rates.get(b.currency);
      if (!rate) throw AppError.unavailable(`No fresh ${b.currency} rate is available right now; try again shortly.`, 2);
      const side = fiat === null ? 'source' : 'destination';
      const quote = priceQuote({
        direction: 'offramp', currency: b.currency, payment_method: corridor.payment_method, rate: rate.rate, platform_fee: platformFee,
        whole_fiat: wholeFiatRail(scope.environment, b.currency, corridor.payment_method),
        ...(side === 'source' ? { source_amount: item.amount.value } : { destination_amount: item.amount.value }),
      });
      priced.push({ input: item, priced: quote, rate, side });
    } catch (err) {
      if (!isItemFault(err)) throw err;
      issues.push(issueOf(index, err));
    }
  });
  return { issues, priced };
}

/**
 * POST /payout-batches, in the caller's unit: validated and priced whole (422 invalid_batch), then the batch, its
 * items' quotes and transactions (created, then funded with their payout jobs staged), and one treasury debit of the
 * total (409 insufficient_funds when the treasury holds less: the unit rolls back and nothing is written).
 */
export async function createPayoutBatch(
  unit: Unit, config: Config, scope: EventScope, id: string, input: CreatePayoutBatchInput, rates: ReadonlyMap<string, RateQuote>,
): Promise<Record<string, unknown>> {
  if (input.external_reference !== undefined) {
    const [used] = await unit.em.query(`SELECT id FROM payout_batches WHERE business_id = $1 AND environment = $2 AND external_reference = $3`, [scope.businessId, scope.environment, input.external_reference]);
    if (used) throw new AppError('invalid_state', 'A payout batch with this external_reference already exists.', { payout_batch_id: used.id });
  }
  const { issues, priced } = await priceItems(unit, config, scope, input, rates);
  if (issues.length) {
    throw new AppError('invalid_batch', `${issues.length} of the ${input.items.length} items cannot be paid (the first is item ${issues[0].index}: ${issues[0].message}); nothing was created.`, issues);
  }
  const total = priced.reduce((sum, p) => sum + p.priced.minor.total_required, 0n);
  await unit.em.query(
    `INSERT INTO payout_batches (id, business_id, environment, status, items_count, total_usdc, external_reference) VALUES ($1, $2, $3, 'processing', $4, $5, $6)`,
    [id, scope.businessId, scope.environment, priced.length, fromMinor(total, USDC_SCALE), input.external_reference ?? null],
  ).catch((err: unknown) => {
    if (/payout_batches_external_reference_uq/.test(String((err as Error).message))) throw new AppError('invalid_state', 'A payout batch with this external_reference already exists.');
    throw err;
  });
  await recordCreation(unit, PAYOUT_BATCH_MACHINE, { scope, id, status: 'processing', view: () => ({}) });
  const quotes = await insertConsumedQuotes(unit, scope, priced.map((p) => ({ chain: BATCH_CHAIN, beneficiaryId: p.input.beneficiary_id, requestedSide: p.side, priced: p.priced, rateAsOf: p.rate.as_of })));
  const created = await insertTransactions(unit, scope, quotes.map((quote, index) => ({
    quote, wallet: null, fundingAddress: config.wallets[scope.environment]?.treasuryAddress ?? null, status: 'created', fundingType: 'treasury',
    payoutBatch: { id, index }, externalReference: priced[index].input.external_reference ?? null,
  })));
  const delay = stepDelay(config, scope.environment);
  await moveTransactions(unit, scope, created, 'created', 'funded', { jobs: (row) => [txJobs.payout(row, delay)] });
  await debitTreasury(unit, scope, id, total);
  return findBatchView(unit.em, scope, id);
}

/** The batch's one treasury debit, into the clearing account each item's payout (or its refund) then draws on. */
async function debitTreasury(unit: Unit, scope: EventScope, batchId: string, total: bigint): Promise<void> {
  try {
    await apply(unit, batchFundingPlan(scope, batchId, total), new Map());
  } catch (err) {
    if (!(err instanceof InsufficientFundsError)) throw err;
    throw new AppError('insufficient_funds', `The treasury holds ${fromMinor(err.available, USDC_SCALE)} USDC available, less than the ${fromMinor(total, USDC_SCALE)} this batch needs.`, {
      available: fromMinor(err.available, USDC_SCALE), required: fromMinor(total, USDC_SCALE),
    });
  }
}

/**
 * An item ended (completed or failed), in its own unit: once no item of the batch is still under way, the batch is
 * completed and announced. The batch row is locked first, so of two items ending together the later one sees both.
 */
export async function followBatch(unit: Unit, tx: TransactionRow): Promise<void> {
  if (!tx.payout_batch_id || (tx.status !== 'completed' && tx.status !== 'failed')) return;
  const batchId = tx.payout_batch_id;
  const [batch]: { status: PayoutBatchStatus }[] = await unit.em.query(`SELECT status FROM payout_batches WHERE id = $1 FOR NO KEY UPDATE`, [batchId]);
  if (batch?.status !== 'processing') return;
  const [{ open }]: { open: number }[] = await unit.em.query(
    `SELECT count(*)::int AS open FROM transactions WHERE payout_batch_id = $1 AND status NOT IN ('completed', 'failed')`, [batchId],
  );
  if (open > 0) return;
  await transition<PayoutBatchStatus, { id: string }>(unit, PAYOUT_BATCH_MACHINE, {
    scope: scopeOf(tx), id: batchId, to: 'completed', expected: 'processing', set: { completed_at: NOW },
    view: () => findBatchView(unit.em, scopeOf(tx), batchId),
  });
}

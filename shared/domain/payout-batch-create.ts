import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { corridorError } from './corridors.js';
import type { Unit } from '../db/unit-of-work.js';
import type { Chain } from './chains.js';
import type { EventScope } from './events.js';
import { platformFeeOf } from './fees.js';
import { InsufficientFundsError } from './ledger.js';
import { apply } from '../kernel/apply.js';
import { batchFundingPlan } from '../kernel/debits.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { PAYOUT_BATCH_MACHINE } from './machines.js';
import { fromMinor, USDC_SCALE } from './money.js';
import { priceQuote, wholeFiatRail, type PricedQuote } from './pricing.js';
import { insertConsumedQuotes, rampCorridor } from './quotes.js';
import type { RateQuote } from './rates.js';
import type { JobRequest } from '../queues/producer.js';
import { insertTransactions } from './transactions.js';
import { TRANSACTION_VIEWS } from './transaction-moves.js';
import { insertCreated } from './transition.js';
import { findBatchView, type CreatePayoutBatchInput, type PayoutBatchItemInput } from './payout-batches.js';

// A payout batch's creation (CONTRACT section 16): validated and priced whole, then in one unit its items become
// treasury-funded off-ramps, funded together with their payout jobs and the treasury's one debit, one plan carried out
// by apply() (its items' moves one statement). Apart from payout-batches.ts, which what follows a transaction's move
// (followBatch) imports: this module moves transactions, so nothing it imports may import it back.

/** The chain named on a batch item's quote and transaction: treasury payouts move no USDC on chain to start. */
const BATCH_CHAIN: Chain = 'base';

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
 * items' quotes and transactions (created, then funded with their payout jobs staged, with one treasury debit of the
 * total: 409 insufficient_funds when the treasury holds less: the unit rolls back and nothing is written).
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
  await insertCreated(unit, PAYOUT_BATCH_MACHINE, scope, 'processing', {
    text: `INSERT INTO payout_batches (id, business_id, environment, status, items_count, total_usdc, external_reference) VALUES ($1, $2, $3, 'processing', $4, $5, $6) RETURNING id`,
    params: [id, scope.businessId, scope.environment, priced.length, fromMinor(total, USDC_SCALE), input.external_reference ?? null],
    prepared: true,
    ids: [id],
  }, () => ({})).catch((err: unknown) => {
    if (/payout_batches_external_reference_uq/.test(String((err as Error).message))) throw new AppError('invalid_state', 'A payout batch with this external_reference already exists.');
    throw err;
  });
  const quotes = await insertConsumedQuotes(unit, scope, priced.map((p) => ({ chain: BATCH_CHAIN, beneficiaryId: p.input.beneficiary_id, requestedSide: p.side, priced: p.priced, rateAsOf: p.rate.as_of })));
  const created = await insertTransactions(unit, scope, quotes.map((quote, index) => ({
    quote, wallet: null, fundingAddress: config.wallets[scope.environment]?.treasuryAddress ?? null, status: 'created', fundingType: 'treasury',
    payoutBatch: { id, index }, externalReference: priced[index].input.external_reference ?? null,
  })));
  const delay = stepDelay(config, scope.environment);
  await fund(unit, scope, id, total, created.map((row) => ({ transactionId: row.id, payout: txJobs.payout(row, delay) })));
  return findBatchView(unit.em, scope, id);
}

/**
 * The batch funded as one plan (kernel/debits.ts batchFundingPlan): the treasury's one debit of the total, into the
 * clearing account each item's payout (or its refund) then draws on, refused at once when short; every item created ->
 * funded (one statement) with its payout job.
 */
async function fund(unit: Unit, scope: EventScope, batchId: string, total: bigint, items: { transactionId: string; payout: JobRequest }[]): Promise<void> {
  try {
    await apply(unit, batchFundingPlan(scope, batchId, total, items), TRANSACTION_VIEWS);
  } catch (err) {
    if (!(err instanceof InsufficientFundsError)) throw err;
    throw new AppError('insufficient_funds', `The treasury holds ${fromMinor(err.available, USDC_SCALE)} USDC available, less than the ${fromMinor(total, USDC_SCALE)} this batch needs.`, {
      available: fromMinor(err.available, USDC_SCALE), required: fromMinor(total, USDC_SCALE),
    });
  }
}

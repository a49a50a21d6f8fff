import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { inUnit, updateReturning, type Unit, type UnitDeps } from '../db/unit-of-work.js';
import { platformFeeOf } from './fees.js';
import { InsufficientFundsError } from './ledger.js';
import { apply } from '../kernel/apply.js';
import { treasuryPayoutPlan } from '../kernel/debits.js';
import { formatAmount, fromMinor, toMinor, USDC_SCALE } from './money.js';
import { intentScope, loadPaymentIntent } from './payment-intents.js';
import { priceQuote, wholeFiatRail } from './pricing.js';
import { freshRateFromSource } from './rates.js';
import { insertTransaction } from './transactions.js';
import { TRANSACTION_VIEWS } from './transaction-moves.js';
import { stepDelay, txJobs } from './lifecycle-jobs.js';
import { insertConsumedQuote } from './quotes.js';
import { movePayout } from './payout-follow.js';

// The automatic payout of a paid intent (CONTRACT section 8): with settlement.beneficiary_id set, what the payment
// brought into the treasury is paid out to the beneficiary by an off-ramp transaction funded from the treasury
// (funding_source.type "treasury"). It is priced like a quote whose total_required is what the intent confirmed, so
// the fees come out of the payment. payout_status follows the transaction; a payout that fails for good gives its
// amount back to the treasury's available balance (the transaction's refund).

const minor = (value: string) => toMinor(formatAmount(value, USDC_SCALE), USDC_SCALE);

/** The payout cannot start (or ended badly): payout_status failed, with the reason the business sees. */
export async function payoutNotStarted(unit: Unit, intentId: string, message: string): Promise<string> {
  const outcome = await movePayout(unit, intentId, { kind: 'payout_not_started', message });
  return outcome === 'gone' ? 'not pending (gone)' : outcome;
}

/**
 * The payout job ran out of attempts (the rate source down or stale, the database away): the payout stays pending,
 * with the reason shown, and the sweeper tries it again until it starts. Only the business's own limits (a corridor's
 * bounds, an archived beneficiary, a treasury spent elsewhere) fail it for good.
 */
export async function payoutWaiting(unit: Unit, intentId: string, message: string): Promise<string> {
  const rows = await updateReturning(unit.em, `UPDATE payment_intents SET payout_error = $2, updated_at = now() WHERE id = $1 AND payout_status = 'pending' RETURNING id`, [intentId, message]);
  return rows.length ? 'waiting' : 'not pending';
}

/**
 * The pricing pool's job: prices the payout from a fresh rate of the beneficiary's currency, then in one transaction
 * writes its (already consumed) quote and transaction, debits the treasury (never below zero) and stages the payout.
 */
export async function startIntentPayout(deps: UnitDeps, config: Config, intentId: string): Promise<string> {
  const intent = await loadPaymentIntent(deps.ds, intentId);
  if (!intent || intent.payout_status !== 'pending' || !intent.beneficiary_id) return `not pending (${intent?.payout_status ?? 'gone'})`;
  const scope = intentScope(intent);
  const [beneficiary]: { currency: string; payment_method: string; status: string }[] = await deps.ds.query(
    `SELECT currency, payment_method, status FROM beneficiaries WHERE id = $1`, [intent.beneficiary_id],
  );
  if (beneficiary.status !== 'active') return inUnit(deps, (unit) => payoutNotStarted(unit, intentId, 'The beneficiary was archived before the payout started; the funds stay in the treasury.'));
  const rate = await freshRateFromSource(deps.ds, config, intent.environment, beneficiary.currency);
  // What this intent's payments actually brought into the treasury (mobile money converts rounding down), at most its price.
  const [{ credited }]: { credited: string }[] = await deps.ds.query(
    `SELECT coalesce(sum(usdc_amount), 0)::text AS credited FROM treasury_deposits WHERE payment_intent_id = $1 AND status = 'confirmed' AND NOT late_payment`, [intent.id],
  );
  const brought = toMinor(formatAmount(credited, USDC_SCALE), USDC_SCALE);
  const budget = fromMinor(brought < minor(intent.usdc_amount) ? brought : minor(intent.usdc_amount), USDC_SCALE);
  let priced;
  try {
    priced = priceQuote({
      direction: 'offramp', currency: beneficiary.currency, payment_method: beneficiary.payment_method, total_budget: budget, rate: rate.rate,
      platform_fee: await platformFeeOf(deps.ds, intent.business_id), whole_fiat: wholeFiatRail(intent.environment, beneficiary.currency, beneficiary.payment_method),
    });
  } catch (err) {
    if (!(err instanceof AppError) || err.code === 'service_unavailable' || err.code === 'internal_error') throw err;
    return inUnit(deps, (unit) => payoutNotStarted(unit, intentId, `The payout could not be priced: ${err.message} The funds stay in the treasury.`));
  }
  return inUnit(deps, async (unit) => {
    const locked = (await loadPaymentIntent(unit.em, intentId, true))!;
    if (locked.payout_status !== 'pending') return `not pending (${locked.payout_status})`;
    const quote = await insertConsumedQuote(unit, scope, { chain: intent.chain, beneficiaryId: intent.beneficiary_id!, priced, rateAsOf: rate.as_of });
    const tx = await insertTransaction(unit, scope, {
      quote, wallet: null, fundingAddress: config.wallets[scope.environment]?.treasuryAddress ?? null, status: 'created', fundingType: 'treasury', paymentIntentId: intent.id,
      externalReference: null, customerId: typeof intent.customer?.id === 'string' ? intent.customer.id : null,
    });
    // The treasury debited (refused at once when short), the transaction funded and its payout job staged: one plan.
    const funding = treasuryPayoutPlan(scope, { transactionId: tx.id, intentId: intent.id, amount: minor(priced.source.total_required), payout: txJobs.payout(tx, stepDelay(config, scope.environment)) });
    try {
      await apply(unit, funding, TRANSACTION_VIEWS);
    } catch (err) {
      if (!(err instanceof InsufficientFundsError)) throw err;
      throw new AppError('invalid_state', `The treasury holds ${fromMinor(err.available, USDC_SCALE)} USDC, less than the ${priced.source.total_required} the payout needs.`);
    }
    await movePayout(unit, intent.id, { kind: 'payout_started', transactionId: tx.id });
    return tx.id;
  }).catch(async (err: unknown) => {
    // Spent elsewhere meanwhile (another payout from the same treasury): the business decides; nothing was written.
    if (!(err instanceof AppError) || err.code !== 'invalid_state') throw err;
    return inUnit(deps, (unit) => payoutNotStarted(unit, intentId, `${err.message} The payment stays in the treasury.`));
  });
}

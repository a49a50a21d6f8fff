import { AppError } from '../../shared/errors.js';
import { inUnit } from '../../shared/db/unit-of-work.js';
import { loadQuote, loadQuoteToPrice, markFailed, markPriced, type PricedOutcome } from '../../shared/domain/quotes.js';
import { priceQuote, wholeFiatRail } from '../../shared/domain/pricing.js';
import { feeFromRow } from '../../shared/domain/fees.js';
import { freshRateFromSource, StaleRateError } from '../../shared/domain/rates.js';
import { defineJob } from '../job-definition.js';

/**
 * pending -> available (priced) or failed (a price outside the corridor's limits); a missing rate is retried. A quote
 * priced answers `{ outcome: 'available', quote }`, the quote as the API shows it from the row the unit committed: the
 * web process waiting on it (POST /quotes, api/job-waiters.ts) answers with it instead of reading the quote again.
 */
export const priceQuoteJob = defineJob({
  name: 'quote.price',
  async process(job, deps) {
    const row = await loadQuoteToPrice(deps.ds, job.data.quoteId);
    if (!row || row.status !== 'pending') return 'not pending';
    let rate;
    try {
      rate = await freshRateFromSource(deps.ds, deps.config, row.environment, row.currency, deps.redis);
    } catch (err) {
      if (!(err instanceof StaleRateError)) throw err;
      await inUnit(deps, (unit) => markFailed(unit, row, { code: 'pricing_unavailable', message: err.message, details: err.details }));
      return 'failed (stale rate)';
    }
    let outcome: string | PricedOutcome;
    try {
      const priced = priceQuote({
        direction: row.direction,
        currency: row.currency,
        payment_method: row.payment_method,
        [row.requested_side === 'source' ? 'source_amount' : 'destination_amount']: row.requested_amount,
        rate: rate.rate,
        platform_fee: feeFromRow(row),
        whole_fiat: wholeFiatRail(row.environment, row.currency, row.payment_method),
      });
      const quote = await inUnit(deps, (unit) => markPriced(unit, row, priced, rate, deps.config.quoteTtlSeconds));
      outcome = quote ? { outcome: 'available', quote } : 'not pending';
    } catch (err) {
      // A business refusal (the amount is outside the corridor's limits) is the quote's outcome, not a job failure.
      if (!(err instanceof AppError) || err.code === 'service_unavailable' || err.code === 'internal_error') throw err;
      await inUnit(deps, (unit) => markFailed(unit, row, { code: err.code, message: err.message, details: err.details }));
      outcome = 'failed';
    }
    return outcome;
  },
  async onFinalFailure(job, _err, deps) {
    const row = await loadQuote(deps.ds, job.data.quoteId);
    if (!row) return;
    await inUnit(deps, (unit) => markFailed(unit, row, { code: 'pricing_unavailable', message: 'No usable rate could be obtained; request a new quote.' }));
  },
});

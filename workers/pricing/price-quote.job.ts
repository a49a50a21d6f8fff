import { AppError } from '../../shared/errors.js';
import { inUnit, type Unit } from '../../shared/db/unit-of-work.js';
import { loadQuote, loadQuoteToPrice, markFailed, markPriced, type PricedOutcome } from '../../shared/domain/quotes.js';
import { priceQuote, wholeFiatRail } from '../../shared/domain/pricing.js';
import { feeFromRow } from '../../shared/domain/fees.js';
import { freshRateFromSource, rateSourceFor, StaleRateError, type RateQuote } from '../../shared/domain/rates.js';
import type { Queryable } from '../../shared/providers/provider.js';
import type { Replacement } from '../../shared/db/idempotency-records.js';
import { QUOTE_PRICED, answerSerializer, serializeAnswer } from '../../api/openapi/answers.js';
import { defineJob, type WorkerDeps } from '../job-definition.js';

type QuoteToPrice = NonNullable<Awaited<ReturnType<typeof loadQuoteToPrice>>>;
type Deps = WorkerDeps & { redis?: Parameters<typeof freshRateFromSource>[4] };

/** The rate to price the quote at, from its source (stored for the web process through `q`); a stale one is returned as such. */
async function rateFor(q: Queryable, deps: Deps, row: QuoteToPrice): Promise<RateQuote | StaleRateError> {
  try {
    return await freshRateFromSource(q, deps.config, row.environment, row.currency, deps.redis);
  } catch (err) {
    if (err instanceof StaleRateError) return err;
    throw err;
  }
}

/** The quote priced at `rate` in `unit`, or failed: a stale rate, or a price outside the corridor's limits. */
async function priceIn(unit: Unit, deps: Deps, row: QuoteToPrice, rate: RateQuote | StaleRateError): Promise<string | PricedOutcome> {
  if (rate instanceof StaleRateError) {
    await markFailed(unit, row, { code: 'pricing_unavailable', message: rate.message, details: rate.details });
    return 'failed (stale rate)';
  }
  let priced;
  try {
    priced = priceQuote({
      direction: row.direction,
      currency: row.currency,
      payment_method: row.payment_method,
      [row.requested_side === 'source' ? 'source_amount' : 'destination_amount']: row.requested_amount,
      rate: rate.rate,
      platform_fee: feeFromRow(row),
      whole_fiat: wholeFiatRail(row.environment, row.currency, row.payment_method),
    });
  } catch (err) {
    // A business refusal (the amount is outside the corridor's limits) is the quote's outcome, not a job failure.
    if (!(err instanceof AppError) || err.code === 'service_unavailable' || err.code === 'internal_error') throw err;
    await markFailed(unit, row, { code: err.code, message: err.message, details: err.details });
    return 'failed';
  }
  const quote = await markPriced(unit, row, priced, rate, deps.config.quoteTtlSeconds);
  return quote ? { outcome: 'available', quote } : 'not pending';
}

/**
 * pending -> available (priced) or failed (a price outside the corridor's limits); a missing rate is retried. A quote
 * priced answers `{ outcome: 'available', quote, answer }`, the quote as the API shows it from the row the unit
 * committed, and (when a request waits for it) as the answer's body that unit wrote into the request's idempotency
 * record: the web process waiting on it (POST /quotes, api/job-waiters.ts) sends that, reading and writing nothing.
 * Where the rate source is local (the sandbox's table), the quote is read, priced and moved in one unit; a rate that
 * comes over the network is asked for between the read and the unit, outside any transaction.
 */
export const priceQuoteJob = defineJob({
  name: 'quote.price',
  async process(job, deps) {
    const { answers } = job.data;
    const check = deps.config.nodeEnv === 'test';
    // The answer's serializer is compiled (on a process's first quote) before any row is locked.
    if (answers) answerSerializer('Quote', check);
    // The waiting request's answer: the priced quote as POST /quotes sends it, written by the unit's last statement into
    // the request's record while that is still replaceable (its wait has not run out). A quote that failed leaves the
    // record to the request, which answers the failure itself.
    let replacement: Replacement | null = null;
    const replace = (outcome: string | PricedOutcome | undefined) => (replacement = answers && typeof outcome === 'object'
      ? { ref: answers, status: QUOTE_PRICED, body: serializeAnswer('Quote', outcome.quote, check) }
      : null);
    const first = await inUnit(deps, async (unit): Promise<{ done?: string | PricedOutcome; row?: QuoteToPrice }> => {
      const row = await loadQuoteToPrice(unit.em, job.data.quoteId);
      if (!row || row.status !== 'pending') return { done: 'not pending' };
      if (!rateSourceFor(row.environment, deps.config.rateSourceUrl).answersInUnit) return { row };
      return { done: await priceIn(unit, deps, row, await rateFor(unit.em, deps, row)) };
    }, { replace: (r) => replace(r.done) });
    let done = first.done;
    if (done === undefined) {
      const row = first.row!;
      const rate = await rateFor(deps.ds, deps, row);
      done = await inUnit(deps, (unit) => priceIn(unit, deps, row, rate), { replace });
    }
    // The request is handed the answer only when the unit replaced its record with it.
    const written = replacement as Replacement | null;
    return typeof done === 'object' && written?.replaced ? { ...done, answer: written.body } : done;
  },
  async onFinalFailure(job, _err, deps) {
    const row = await loadQuote(deps.ds, job.data.quoteId);
    if (!row) return;
    await inUnit(deps, (unit) => markFailed(unit, row, { code: 'pricing_unavailable', message: 'No usable rate could be obtained; request a new quote.' }));
  },
});

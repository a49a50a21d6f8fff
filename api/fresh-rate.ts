import { AppError } from '../shared/errors.js';
import { inUnit } from '../shared/db/unit-of-work.js';
import { refreshRateJob, storedFreshRate, type RateQuote } from '../shared/domain/rates.js';
import type { AppDeps, AuthContext } from './context.js';

/**
 * A fresh rate for a currency, for a request that prices at once (a payment intent, a payout batch): the one the
 * pricing pool stored, or, if none is fresh, one the pricing pool fetches now (waited for briefly, like a quote's
 * price). The web process never calls the rate source itself.
 */
export async function freshRate(deps: AppDeps, auth: AuthContext, currency: string): Promise<RateQuote> {
  // A deployment without a rate source prices nothing live, whatever another deployment on this database stored.
  if (auth.environment === 'live' && !deps.config.rateSourceUrl) throw AppError.unavailable('Live pricing is not configured on this deployment yet.', 60);
  const stored = await storedFreshRate(deps.ds, auth.environment, currency, deps.config.rateMaxAgeSeconds);
  if (stored) return stored;
  const job = refreshRateJob(auth.environment, currency);
  const waiting = deps.pricingWaiters.wait(job.id, deps.config.quoteWaitMs);
  try {
    await inUnit(deps, (unit) => unit.stage(job, auth));
  } catch (err) {
    waiting.cancel();
    throw err;
  }
  await waiting.done;
  const fresh = await storedFreshRate(deps.ds, auth.environment, currency, deps.config.rateMaxAgeSeconds);
  if (!fresh) throw AppError.unavailable(`No fresh ${currency} rate is available right now; try again shortly.`, 2);
  return fresh;
}

import { AppError } from '../shared/errors.js';
import { inUnit } from '../shared/db/unit-of-work.js';
import { refreshRateJob, storedFreshRate, type RateQuote } from '../shared/domain/rates.js';
import type { AppDeps, AuthContext } from './context.js';

/** How often a waiting request looks at the stored rate, besides waiting for its refresh job to end. */
const RATE_POLL_MS = 200;

/** Per web process: the refresh its requests for one currency are waiting on (one at a time, shared). */
const refreshing = new WeakMap<AppDeps, Map<string, Promise<RateQuote | null>>>();

/**
 * A fresh rate for a currency, for a request that prices at once (a payment intent, a payout batch): the one the
 * pricing pool stored (live currencies are refreshed ahead of need), or, if none is fresh, one the pricing pool fetches
 * now (waited for briefly, like a quote's price). The web process never calls the rate source itself.
 */
export async function freshRate(deps: AppDeps, auth: AuthContext, currency: string): Promise<RateQuote> {
  // A deployment without a rate source prices nothing live, whatever another deployment on this database stored.
  if (auth.environment === 'live' && !deps.config.rateSourceUrl) throw AppError.unavailable('Live pricing is not configured on this deployment yet.', 60);
  const stored = await storedFreshRate(deps.ds, auth.environment, currency, deps.config.rateMaxAgeSeconds);
  if (stored) return stored;
  const mine = refreshing.get(deps) ?? new Map<string, Promise<RateQuote | null>>();
  refreshing.set(deps, mine);
  const key = `${auth.environment}:${currency}`;
  let pending = mine.get(key);
  if (!pending) {
    pending = refresh(deps, auth, currency).finally(() => mine.delete(key));
    mine.set(key, pending);
  }
  const fresh = await pending;
  if (!fresh) throw AppError.unavailable(`No fresh ${currency} rate is available right now; try again shortly.`, 2);
  return fresh;
}

/**
 * Asks the pricing pool for a refresh (a job of its own, never one that already ended) and waits up to QUOTE_WAIT_MS
 * for the stored rate to be fresh: by that job, or by any other refresh (the schedule, another process's request).
 */
async function refresh(deps: AppDeps, auth: AuthContext, currency: string): Promise<RateQuote | null> {
  const job = refreshRateJob(auth.environment, currency);
  const waiting = deps.pricingWaiters.wait(job.id, deps.config.quoteWaitMs);
  try {
    await inUnit(deps, (unit) => unit.stage(job, auth));
  } catch (err) {
    waiting.cancel();
    throw err;
  }
  let ended = false;
  void waiting.done.then(() => (ended = true));
  try {
    for (;;) {
      const fresh = await storedFreshRate(deps.ds, auth.environment, currency, deps.config.rateMaxAgeSeconds);
      if (fresh || ended) return fresh;
      await Promise.race([waiting.done, new Promise((resolve) => setTimeout(resolve, RATE_POLL_MS))]);
    }
  } finally {
    waiting.cancel();
  }
}

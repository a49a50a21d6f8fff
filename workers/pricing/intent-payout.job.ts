import { inUnit } from '../../shared/db/unit-of-work.js';
import { payoutWaiting, startIntentPayout } from '../../shared/domain/treasury-payouts.js';
import { defineJob } from '../job-definition.js';

/**
 * A paid intent with a beneficiary: its payout is priced and started from the treasury. Out of attempts (no usable
 * rate, say), it stays pending for the sweeper to try again: a rate-source outage never ends a payout.
 */
export const intentPayoutJob = defineJob({
  name: 'intent.payout',
  process: (job, deps) => startIntentPayout(deps, deps.config, job.data.intentId),
  async onFinalFailure(job, err, deps) {
    await inUnit(deps, (unit) => payoutWaiting(unit, job.data.intentId, `The payout is waiting to start: ${(err as Error).message} It is tried again shortly; the funds stay in the treasury.`));
  },
});

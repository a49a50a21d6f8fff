import { inUnit } from '../../shared/db/unit-of-work.js';
import { payoutNotStarted, startIntentPayout } from '../../shared/domain/treasury-payouts.js';
import { defineJob } from '../job-definition.js';

/** A paid intent with a beneficiary: its payout is priced and started from the treasury. */
export const intentPayoutJob = defineJob({
  name: 'intent.payout',
  process: (job, deps) => startIntentPayout(deps, deps.config, job.data.intentId),
  async onFinalFailure(job, err, deps) {
    await inUnit(deps, (unit) => payoutNotStarted(unit, job.data.intentId, `The payout could not start: ${(err as Error).message} The funds stay in the treasury.`));
  },
});
